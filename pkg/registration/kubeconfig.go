package registration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// verifyInterval is the pause between two attempts of the credential check.
const verifyInterval = 250 * time.Millisecond

// buildKubeconfig renders a self-contained kubeconfig for the member name: one cluster (server,
// the member's CA data, read from Member.CAFile if need be, or insecure-skip-tls-verify exactly
// when the member's own credentials skip verification), one user with token, and one context,
// all named name, the context current. Nothing in it refers to a file or a plugin.
func buildKubeconfig(name, server string, member *rest.Config, token string) ([]byte, error) {
	cluster := &clientcmdapi.Cluster{
		Server:                server,
		TLSServerName:         member.ServerName,
		InsecureSkipTLSVerify: member.Insecure,
	}
	if !member.Insecure { // a kubeconfig may not have both a CA and insecure-skip-tls-verify
		cluster.CertificateAuthorityData = member.CAData
		if len(cluster.CertificateAuthorityData) == 0 && member.CAFile != "" {
			ca, err := os.ReadFile(member.CAFile)
			if err != nil {
				return nil, fmt.Errorf("reading the member's certificate authority: %w", err)
			}
			cluster.CertificateAuthorityData = ca
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = cluster
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	if err := clientcmd.Validate(*kc); err != nil {
		// The validation errors name fields, never their values.
		return nil, fmt.Errorf("rendering the kubeconfig: %w", err)
	}
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("rendering the kubeconfig: %w", err)
	}
	return b, nil
}

// verify proves that the member accepts kubeconfig's credential and grants it what the hub needs
// first: getting the namespace kube-system and listing ConfigMaps. It talks to memberURL, not to
// the kubeconfig's server (which may be reachable from the hub only), the way member does (proxy,
// dialer). Refusals (401, 403) are retried for up to verifyTimeout, since the API server learns of
// the new ServiceAccount and its binding through informers; other errors fail at once.
func verify(ctx context.Context, kubeconfig []byte, member *rest.Config, memberURL string) error {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return fmt.Errorf("verifying the new credential: parsing the kubeconfig: %w", err)
	}
	cfg.Host = memberURL
	cfg.Proxy = member.Proxy
	cfg.Dial = member.Dial
	cfg.UserAgent = FieldOwner
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("verifying the new credential: building a client: %w", err)
	}

	var lastErr error
	check := func(ctx context.Context) (bool, error) {
		var err error
		if _, err = cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{}); err != nil {
			err = fmt.Errorf("get namespace %s: %w", metav1.NamespaceSystem, err)
		} else if _, err = cs.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			err = fmt.Errorf("list configmaps: %w", err)
		} else {
			return true, nil
		}
		var status apierrors.APIStatus
		if lastErr != nil && !errors.As(err, &status) {
			return false, err // e.g. out of time: the member's last answer in lastErr says more
		}
		lastErr = err
		if apierrors.IsUnauthorized(lastErr) || apierrors.IsForbidden(lastErr) {
			return false, nil // perhaps not known to the API server yet
		}
		return false, lastErr
	}
	err = wait.PollUntilContextTimeout(ctx, verifyInterval, verifyTimeout, true, check)
	if err == nil {
		return nil
	}
	if lastErr != nil && !errors.Is(err, lastErr) { // gave up waiting on refusals
		err = fmt.Errorf("still refused when the check gave up (%w): %w", err, lastErr)
	}
	return fmt.Errorf("verifying the new credential against the member (%s); nothing was written to the hub: %w", memberURL, err)
}
