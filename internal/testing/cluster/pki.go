package cluster

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"configbundle.dev/hub/internal/testing/pki"
)

// identity is a client of the API server: a certificate's common name and organizations.
type identity struct {
	file, user string
	groups     []string
}

// The components' identities, each with the RBAC the API server bootstraps for it.
var identities = []identity{
	{file: "admin", user: "kubernetes-admin", groups: []string{"system:masters"}},
	{file: "controller-manager", user: "system:kube-controller-manager"},
	{file: "scheduler", user: "system:kube-scheduler"},
	{file: "kubelet", user: "system:node:" + NodeName, groups: []string{"system:nodes"}},
	{file: "kube-proxy", user: "system:kube-proxy"},
	{file: "apiserver-kubelet-client", user: "kube-apiserver-kubelet-client", groups: []string{"system:masters"}},
}

// writePKI writes the CA, the API server's and the kubelet's serving certificates, the
// service-account key pair and a kubeconfig per identity into dir, for the API server at
// server.
func writePKI(dir, server string) error {
	caKey, ca, caPEM, err := pki.NewCA("configbundle-test-cluster-ca")
	if err != nil {
		return err
	}
	files := map[string][]byte{"ca.crt": caPEM}
	serving := map[string]*x509.Certificate{
		"apiserver": {Subject: pkix.Name{CommonName: "kube-apiserver"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			IPAddresses: []net.IP{net.ParseIP(HostIP), net.ParseIP(KubernetesServiceIP), net.IPv4(127, 0, 0, 1)},
			DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}},
		"kubelet-serving": {Subject: pkix.Name{CommonName: NodeName}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			IPAddresses: []net.IP{net.ParseIP(HostIP)}, DNSNames: []string{NodeName}},
	}
	for name, tmpl := range serving {
		if files[name+".crt"], files[name+".key"], err = pki.SignLeaf(tmpl, ca, caKey); err != nil {
			return err
		}
	}
	if files["sa.key"], files["sa.pub"], err = pki.NewKeyPair(); err != nil {
		return err
	}
	for _, id := range identities {
		tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: id.user, Organization: id.groups},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		cert, key, err := pki.SignLeaf(tmpl, ca, caKey)
		if err != nil {
			return err
		}
		files[id.file+".crt"], files[id.file+".key"] = cert, key
		if files[id.file+".kubeconfig"], err = kubeconfig(server, caPEM, cert, key); err != nil {
			return err
		}
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}

// kubeconfig renders a kubeconfig with one cluster, user and context, all named "cluster".
func kubeconfig(server string, ca, cert, key []byte) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	kc.AuthInfos["cluster"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	kc.Contexts["cluster"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "cluster"}
	kc.CurrentContext = "cluster"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("rendering a kubeconfig: %w", err)
	}
	return data, nil
}
