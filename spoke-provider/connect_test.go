package spokeprovider

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/sharding"
	"configbundle.dev/hub/pkg/version"
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
	t.Parallel()
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

// TestReach: a refused credential is Forbidden and says when it expired, if it did; anything
// else is Unreachable.
func TestReach(t *testing.T) {
	t.Parallel()
	now := time.Now()
	unauthorized := apierrors.NewUnauthorized("Unauthorized")
	tests := []struct {
		name       string
		err        error
		expiry     time.Time
		wantReason string
		wantInMsg  string
	}{
		{"expired credential", unauthorized, now.Add(-time.Hour), hubv1alpha1.ForbiddenReason, "which expired at " + now.Add(-time.Hour).UTC().Format(time.RFC3339)},
		{"refused, not expired", unauthorized, now.Add(time.Hour), hubv1alpha1.ForbiddenReason, "revoked"},
		{"refused, expiry unknown", apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "kube-system", errors.New("no")), time.Time{}, hubv1alpha1.ForbiddenReason, "revoked"},
		{"connection refused", errors.New("dial tcp: connection refused"), now.Add(-time.Hour), hubv1alpha1.UnreachableReason, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			reason, message := classify(requestError("reading the API server's version", tt.err, tt.expiry))
			if reason != tt.wantReason || !strings.Contains(message, tt.wantInMsg) {
				t.Errorf("reach = %s: %q; want %s saying %q", reason, message, tt.wantReason, tt.wantInMsg)
			}
		})
	}
}

// TestRefusedCredentialExpiry: a member that never connected publishes the expiry of the
// credential it was refused with, so that an expired one is reported as expired; a member still
// connected with a previous credential keeps that one's.
func TestRefusedCredentialExpiry(t *testing.T) {
	t.Parallel()
	now := time.Now()
	expired, working := now.Add(-time.Hour), now.Add(24*time.Hour)
	var refusal *connectError
	if !errors.As(requestError("reading the API server's version", apierrors.NewUnauthorized("Unauthorized"), expired), &refusal) {
		t.Fatal("reach returned no connectError")
	}

	never := &member{}
	never.failAttempt("h1", hubv1alpha1.ForbiddenReason, refusal.Error(), refusal.expiry, now, time.Minute)
	if !never.state.CredentialsExpiry.Equal(expired) {
		t.Errorf("never connected: CredentialsExpiry = %v, want %v", never.state.CredentialsExpiry, expired)
	}

	connected := &member{active: &connection{expiry: working}}
	connected.state = State{Ready: true, CredentialsExpiry: working}
	connected.failAttempt("h2", hubv1alpha1.ForbiddenReason, refusal.Error(), expired, now, time.Minute)
	if !connected.state.CredentialsExpiry.Equal(working) {
		t.Errorf("still connected: CredentialsExpiry = %v, want the working credential's %v", connected.state.CredentialsExpiry, working)
	}
}

// TestMemberClientUserAgent: a member's audit log names the hub, its version and the replica
// that sent each request.
func TestMemberClientUserAgent(t *testing.T) {
	defer func(v string) { version.Version = v }(version.Version)
	version.Version = "v0.3.0"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: "m"}}
	for _, tc := range []struct {
		replica sharding.Replica
		want    string
	}{
		{sharding.Replica{ID: "hub-7d9f-abc"}, "configbundle-hub/v0.3.0 (hub-7d9f-abc)"},
		{sharding.Replica{}, "configbundle-hub/v0.3.0"},
	} {
		cfg, err := New(Options{Replica: tc.replica}).restConfig(secret, []byte(tokenKubeconfig))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.UserAgent != tc.want {
			t.Errorf("replica %q: member client user agent %q, want %q", tc.replica.ID, cfg.UserAgent, tc.want)
		}
		if got := withTimeout(cfg, time.Second).UserAgent; got != tc.want {
			t.Errorf("replica %q: member request client user agent %q, want %q", tc.replica.ID, got, tc.want)
		}
	}
}
