package spokeprovider

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

const tokenKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
users: [{name: u, user: {token: secret-token}}]
`

// TestMemberClientLimits: member clients never run on client-go's hidden 5 QPS / 10 burst, and
// their requests (not the cache's watches) have a timeout.
func TestMemberClientLimits(t *testing.T) {
	p := New(Options{})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: "m"}}
	cfg, err := p.restConfig(secret, []byte(tokenKubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != DefaultQPS || cfg.Burst != DefaultBurst {
		t.Errorf("QPS/Burst = %v/%v, want %v/%v", cfg.QPS, cfg.Burst, DefaultQPS, DefaultBurst)
	}
	if cfg.Timeout != 0 {
		t.Errorf("the cluster's config (shared with the cache's watches) has Timeout %v, want none", cfg.Timeout)
	}

	if _, err := p.newClient(cfg, client.Options{}); err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(withTimeout(cfg, p.opts.RequestTimeout))
	if err != nil {
		t.Fatal(err)
	}
	if hc.Timeout != DefaultRequestTimeout {
		t.Errorf("member client request timeout = %v, want %v", hc.Timeout, DefaultRequestTimeout)
	}

	if _, err := p.restConfig(secret, nil); err == nil {
		t.Errorf("a Secret without the key must be refused")
	} else if reason, _ := classify(err); reason != hubv1alpha1.InvalidKubeconfigReason {
		t.Errorf("missing key: reason %q, want %q", reason, hubv1alpha1.InvalidKubeconfigReason)
	}
}
