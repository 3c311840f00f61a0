package kubeconfig

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// Secret values used by the test kubeconfigs; no message may ever contain them.
const (
	kcTestToken    = "s3cr3t-t0ken-7f1d2c9a8b"
	kcTestPassword = "s3cr3t-passw0rd-41c0ffee"
)

// kubeconfigTestPKI is a throwaway CA certificate and client certificate/key, PEM-encoded.
type kubeconfigTestPKI struct {
	caPEM, certPEM, keyPEM, otherKeyPEM []byte
}

func newKubeconfigTestPKI(t testing.TB) kubeconfigTestPKI {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
	keyPEM := func(key *ecdsa.PrivateKey) []byte {
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	caKey, clientKey, otherKey := newKey(), newKey(), newKey()
	caTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	clientTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "hub", Organization: []string{"system:masters"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	clientDER, err := x509.CreateCertificate(rand.Reader, clientTemplate, caTemplate, &clientKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfigTestPKI{
		caPEM:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		certPEM:     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: clientDER}),
		keyPEM:      keyPEM(clientKey),
		otherKeyPEM: keyPEM(otherKey),
	}
}

func kcB64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }

// kcFile assembles a kubeconfig from YAML fragments: clusters and users are the bodies of
// the clusters and users lists, each entry indented by two spaces.
func kcFile(currentContext, clusters, users, contexts string) string {
	return "apiVersion: v1\nkind: Config\n" +
		"current-context: " + currentContext + "\n" +
		"clusters:\n" + clusters +
		"users:\n" + users +
		"contexts:\n" + contexts
}

func kcCluster(name, body string) string {
	return "- name: " + name + "\n  cluster:\n" + kcIndent(body, "    ")
}

func kcUser(name, body string) string {
	return "- name: " + name + "\n  user:\n" + kcIndent(body, "    ")
}

func kcContext(name, clusterName, userName string) string {
	return "- name: " + name + "\n  context:\n    cluster: " + clusterName + "\n    user: " + userName + "\n"
}

func kcIndent(body, prefix string) string {
	var b strings.Builder
	for line := range strings.Lines(body) {
		b.WriteString(prefix + line)
	}
	if !strings.HasSuffix(body, "\n") {
		b.WriteString("\n")
	}
	return b.String()
}

type kubeconfigCase struct {
	name       string
	data       string
	wantReason string // empty: must succeed
	// wantInMessage are substrings the message must contain (refusals only).
	wantInMessage []string
	check         func(t *testing.T, cfg *rest.Config)
}

// kubeconfigCases returns the table of kubeconfigs and the secret values they hold, which no
// message may contain.
func kubeconfigCases(t testing.TB) ([]kubeconfigCase, []string) {
	pki := newKubeconfigTestPKI(t)
	secrets := []string{kcTestToken, kcTestPassword, "another-token", kcB64(pki.keyPEM), string(pki.keyPEM), kcB64(pki.otherKeyPEM)}
	ca := "certificate-authority-data: " + kcB64(pki.caPEM) + "\n"
	httpsServer := "server: https://member.example.com:6443\n"
	goodCluster := kcCluster("member", httpsServer+ca)
	tokenUser := kcUser("admin", "token: "+kcTestToken+"\n")
	certUser := kcUser("admin", "client-certificate-data: "+kcB64(pki.certPEM)+"\nclient-key-data: "+kcB64(pki.keyPEM)+"\n")
	oneContext := kcContext("member", "member", "admin")
	withCluster := func(server string) string {
		return kcFile("member", kcCluster("member", server), tokenUser, oneContext)
	}
	execUser := func(name, command string) string {
		return kcUser(name, "exec:\n  apiVersion: client.authentication.k8s.io/v1\n  command: "+command+
			"\n  args: [eks, get-token]\n  interactiveMode: Never\n")
	}

	return []kubeconfigCase{
		// Accepted.
		{
			name: "token",
			data: kcFile("member", goodCluster, tokenUser, oneContext),
			check: func(t *testing.T, cfg *rest.Config) {
				if cfg.Host != "https://member.example.com:6443" {
					t.Errorf("Host = %q", cfg.Host)
				}
				if cfg.BearerToken != kcTestToken {
					t.Error("BearerToken is not the kubeconfig's token")
				}
				if string(cfg.CAData) != string(pki.caPEM) {
					t.Error("CAData is not the kubeconfig's certificate-authority-data")
				}
			},
		},
		{
			name: "client certificate data",
			data: kcFile("member", goodCluster, certUser, oneContext),
			check: func(t *testing.T, cfg *rest.Config) {
				if string(cfg.CertData) != string(pki.certPEM) || string(cfg.KeyData) != string(pki.keyPEM) {
					t.Error("CertData/KeyData are not the kubeconfig's client certificate and key")
				}
				if cfg.BearerToken != "" {
					t.Error("unexpected BearerToken")
				}
			},
		},
		{
			name: "only context without current-context",
			data: kcFile(`""`, goodCluster, tokenUser, oneContext),
			check: func(t *testing.T, cfg *rest.Config) {
				if cfg.Host != "https://member.example.com:6443" {
					t.Errorf("Host = %q", cfg.Host)
				}
			},
		},
		{
			name: "basic auth, insecure-skip-tls-verify, tls-server-name and impersonation",
			data: kcFile("member",
				kcCluster("member", httpsServer+"insecure-skip-tls-verify: true\ntls-server-name: api.internal\n"),
				kcUser("admin", "username: root\npassword: "+kcTestPassword+"\nas: jane\nas-groups: [ops]\n"),
				oneContext),
			check: func(t *testing.T, cfg *rest.Config) {
				if cfg.Username != "root" || cfg.Password != kcTestPassword {
					t.Error("Username/Password are not the kubeconfig's")
				}
				if !cfg.Insecure || cfg.ServerName != "api.internal" {
					t.Errorf("Insecure = %v, ServerName = %q", cfg.Insecure, cfg.ServerName)
				}
				if cfg.Impersonate.UserName != "jane" || !slices.Equal(cfg.Impersonate.Groups, []string{"ops"}) {
					t.Errorf("Impersonate = %+v", cfg.Impersonate)
				}
			},
		},
		{
			name: "current context picked among several, others are clean",
			data: kcFile("second",
				goodCluster+kcCluster("other", "server: https://other.example.com\n"),
				tokenUser+kcUser("viewer", "token: another-token\n"),
				oneContext+kcContext("second", "other", "viewer")),
			check: func(t *testing.T, cfg *rest.Config) {
				if cfg.Host != "https://other.example.com" || cfg.BearerToken != "another-token" {
					t.Errorf("Host = %q, want the current context's cluster and user", cfg.Host)
				}
			},
		},
		{
			name: "http server and socks5 proxy",
			data: kcFile("member",
				kcCluster("member", "server: http://10.0.0.1:8080\nproxy-url: socks5://proxy.example.com:1080\n"),
				tokenUser, oneContext),
			check: func(t *testing.T, cfg *rest.Config) {
				if cfg.Host != "http://10.0.0.1:8080" || cfg.Proxy == nil {
					t.Errorf("Host = %q, Proxy set = %v", cfg.Host, cfg.Proxy != nil)
				}
				// Like client-go, credentials never go over plain http.
				if cfg.BearerToken != "" {
					t.Error("token put into a plain-http config")
				}
			},
		},
		{
			name: "JSON",
			data: `{"apiVersion":"v1","kind":"Config","current-context":"member",
				"clusters":[{"name":"member","cluster":{"server":"https://member.example.com"}}],
				"users":[{"name":"admin","user":{"token":"` + kcTestToken + `"}}],
				"contexts":[{"name":"member","context":{"cluster":"member","user":"admin"}}]}`,
			check: func(t *testing.T, cfg *rest.Config) {
				if cfg.BearerToken != kcTestToken {
					t.Error("BearerToken is not the kubeconfig's token")
				}
			},
		},
		{
			name: "file fields with the wrong case are unknown fields, not file references",
			data: kcFile("member", goodCluster,
				kcUser("admin", "token: "+kcTestToken+"\nTokenFile: /etc/shadow\ntokenfile: /etc/shadow\nClientKey: /etc/shadow\n"),
				oneContext),
			check: func(t *testing.T, cfg *rest.Config) {
				if cfg.BearerToken != kcTestToken {
					t.Error("BearerToken is not the kubeconfig's token")
				}
			},
		},

		// Programs.
		{
			name:          "exec plugin",
			data:          kcFile("member", goodCluster, execUser("admin", "aws"), oneContext),
			wantReason:    hubv1alpha1.ExecPluginNotAllowedReason,
			wantInMessage: []string{`user "admin"`, `"aws"`},
		},
		{
			name: "exec plugin in a user no context uses",
			data: kcFile("member", goodCluster,
				tokenUser+execUser("spare", "/usr/local/bin/gke-gcloud-auth-plugin"), oneContext),
			wantReason:    hubv1alpha1.ExecPluginNotAllowedReason,
			wantInMessage: []string{`user "spare"`, "gke-gcloud-auth-plugin"},
		},
		{
			name: "exec plugin in a non-current context's user",
			data: kcFile("member", goodCluster+kcCluster("other", "server: https://other.example.com\n"),
				tokenUser+execUser("other-admin", "aws"), oneContext+kcContext("other", "other", "other-admin")),
			wantReason:    hubv1alpha1.ExecPluginNotAllowedReason,
			wantInMessage: []string{`user "other-admin"`},
		},
		{
			name: "auth provider",
			data: kcFile("member", goodCluster,
				kcUser("admin", "auth-provider:\n  name: gcp\n  config:\n    cmd-path: /bin/sh\n    access-token: "+kcTestToken+"\n"),
				oneContext),
			wantReason:    hubv1alpha1.AuthProviderNotAllowedReason,
			wantInMessage: []string{`user "admin"`, `"gcp"`},
		},

		// Files.
		{
			name:          "tokenFile",
			data:          kcFile("member", goodCluster, kcUser("admin", "tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n"), oneContext),
			wantReason:    hubv1alpha1.FileReferenceNotAllowedReason,
			wantInMessage: []string{`user "admin"`, "tokenFile", "/var/run/secrets/kubernetes.io/serviceaccount/token"},
		},
		{
			name: "tokenFile next to a token",
			data: kcFile("member", goodCluster,
				kcUser("admin", "token: "+kcTestToken+"\ntokenFile: /etc/passwd\n"), oneContext),
			wantReason:    hubv1alpha1.FileReferenceNotAllowedReason,
			wantInMessage: []string{`user "admin"`, "tokenFile"},
		},
		{
			name: "client-certificate",
			data: kcFile("member", goodCluster,
				kcUser("admin", "client-certificate: /home/me/.minikube/client.crt\nclient-key-data: "+kcB64(pki.keyPEM)+"\n"), oneContext),
			wantReason:    hubv1alpha1.FileReferenceNotAllowedReason,
			wantInMessage: []string{`user "admin"`, "client-certificate", "client.crt"},
		},
		{
			name: "client-key",
			data: kcFile("member", goodCluster,
				kcUser("admin", "client-certificate-data: "+kcB64(pki.certPEM)+"\nclient-key: relative/client.key\n"), oneContext),
			wantReason:    hubv1alpha1.FileReferenceNotAllowedReason,
			wantInMessage: []string{`user "admin"`, "client-key", "relative/client.key"},
		},
		{
			name:          "certificate-authority",
			data:          kcFile("member", kcCluster("member", httpsServer+"certificate-authority: /etc/kubernetes/pki/ca.crt\n"), tokenUser, oneContext),
			wantReason:    hubv1alpha1.FileReferenceNotAllowedReason,
			wantInMessage: []string{`cluster "member"`, "certificate-authority", "/etc/kubernetes/pki/ca.crt"},
		},
		{
			name: "certificate-authority in a cluster no context uses",
			data: kcFile("member",
				goodCluster+kcCluster("spare", "server: https://spare.example.com\ncertificate-authority: ca.crt\n"), tokenUser, oneContext),
			wantReason:    hubv1alpha1.FileReferenceNotAllowedReason,
			wantInMessage: []string{`cluster "spare"`},
		},
		{
			name: "client-key in a non-current context's user",
			data: kcFile("member", goodCluster,
				tokenUser+kcUser("other", "client-certificate-data: "+kcB64(pki.certPEM)+"\nclient-key: /etc/ssl/private/hub.key\n"),
				oneContext+kcContext("other", "member", "other")),
			wantReason:    hubv1alpha1.FileReferenceNotAllowedReason,
			wantInMessage: []string{`user "other"`, "client-key"},
		},

		// Not a usable kubeconfig.
		{name: "empty", data: "", wantReason: hubv1alpha1.InvalidKubeconfigReason, wantInMessage: []string{"empty"}},
		{name: "whitespace", data: " \n\t\n", wantReason: hubv1alpha1.InvalidKubeconfigReason, wantInMessage: []string{"empty"}},
		{name: "garbage bytes", data: "\x00\x01\xfe\xff" + kcTestToken, wantReason: hubv1alpha1.InvalidKubeconfigReason},
		{name: "YAML null", data: "null\n", wantReason: hubv1alpha1.InvalidKubeconfigReason},
		{name: "broken YAML", data: "apiVersion: v1\nusers: [\n  {name: a, user: {token: " + kcTestToken, wantReason: hubv1alpha1.InvalidKubeconfigReason, wantInMessage: []string{"line"}},
		{name: "not a kubeconfig", data: "apiVersion: v1\nkind: Pod\nmetadata: {name: " + kcTestToken + "}\n", wantReason: hubv1alpha1.InvalidKubeconfigReason},
		{name: "JSON array", data: `["` + kcTestToken + `"]`, wantReason: hubv1alpha1.InvalidKubeconfigReason},
		{
			name:          "wrong type",
			data:          "apiVersion: v1\nkind: Config\nclusters: 5\n",
			wantReason:    hubv1alpha1.InvalidKubeconfigReason,
			wantInMessage: []string{"field clusters has the wrong type"},
		},
		{
			// clientcmd's own error here prints every user with its token.
			name:          "two users with the same name",
			data:          kcFile("member", goodCluster, tokenUser+kcUser("admin", "password: "+kcTestPassword+"\nusername: root\n"), oneContext),
			wantReason:    hubv1alpha1.InvalidKubeconfigReason,
			wantInMessage: []string{"two users with the same name"},
		},
		{
			name:          "valid YAML without clusters",
			data:          "apiVersion: v1\nkind: Config\ncurrent-context: member\nusers:\n" + tokenUser + "contexts:\n" + oneContext,
			wantReason:    hubv1alpha1.InvalidKubeconfigReason,
			wantInMessage: []string{"no clusters"},
		},
		{
			name:          "valid YAML without anything",
			data:          "apiVersion: v1\nkind: Config\npreferences: {}\n",
			wantReason:    hubv1alpha1.InvalidKubeconfigReason,
			wantInMessage: []string{"no clusters, users or contexts"},
		},
		{
			name:          "no contexts",
			data:          "apiVersion: v1\nkind: Config\nclusters:\n" + goodCluster + "users:\n" + tokenUser,
			wantReason:    hubv1alpha1.InvalidKubeconfigReason,
			wantInMessage: []string{"no contexts"},
		},
		{
			name:          "several contexts without current-context",
			data:          kcFile(`""`, goodCluster, tokenUser, oneContext+kcContext("again", "member", "admin")),
			wantReason:    hubv1alpha1.InvalidKubeconfigReason,
			wantInMessage: []string{"2 contexts", "current-context"},
		},
		{
			name:          "current-context that does not exist",
			data:          kcFile("nope", goodCluster, tokenUser, oneContext),
			wantReason:    hubv1alpha1.InvalidKubeconfigReason,
			wantInMessage: []string{`current-context "nope"`},
		},
		{
			name:          "context naming a missing user",
			data:          kcFile("member", goodCluster, tokenUser, kcContext("member", "member", "ghost")),
			wantReason:    hubv1alpha1.InvalidKubeconfigReason,
			wantInMessage: []string{`context "member"`, `user "ghost"`},
		},
		{
			name:          "non-current context naming a missing cluster",
			data:          kcFile("member", goodCluster, tokenUser, oneContext+kcContext("other", "ghost", "admin")),
			wantReason:    hubv1alpha1.InvalidKubeconfigReason,
			wantInMessage: []string{`context "other"`, `cluster "ghost"`},
		},
		{
			name:          "context without user",
			data:          kcFile("member", goodCluster, tokenUser, "- name: member\n  context:\n    cluster: member\n"),
			wantReason:    hubv1alpha1.InvalidKubeconfigReason,
			wantInMessage: []string{`context "member" names no user`},
		},
		{name: "unix server", data: withCluster("server: unix:///var/run/kube.sock\n"), wantReason: hubv1alpha1.InvalidKubeconfigReason, wantInMessage: []string{`scheme "unix"`}},
		{name: "file server", data: withCluster("server: file:///etc/passwd\n"), wantReason: hubv1alpha1.InvalidKubeconfigReason, wantInMessage: []string{`scheme "file"`}},
		{name: "ftp server", data: withCluster("server: ftp://member.example.com\n"), wantReason: hubv1alpha1.InvalidKubeconfigReason},
		{name: "empty server", data: withCluster("server: \"\"\n"), wantReason: hubv1alpha1.InvalidKubeconfigReason, wantInMessage: []string{"no server"}},
		{name: "server without scheme", data: withCluster("server: member.example.com:6443\n"), wantReason: hubv1alpha1.InvalidKubeconfigReason, wantInMessage: []string{"not an absolute URL"}},
		{name: "server that is a bare address", data: withCluster("server: 10.0.0.1:6443\n"), wantReason: hubv1alpha1.InvalidKubeconfigReason, wantInMessage: []string{"not an absolute URL"}},
		{name: "server with a password and no scheme is not echoed", data: withCluster("server: root:" + kcTestPassword + "@10.0.0.1\n"), wantReason: hubv1alpha1.InvalidKubeconfigReason},
		{name: "server without host", data: withCluster("server: https://\n"), wantReason: hubv1alpha1.InvalidKubeconfigReason, wantInMessage: []string{"without a host"}},
		{name: "server with only a port", data: withCluster("server: https://:6443\n"), wantReason: hubv1alpha1.InvalidKubeconfigReason},
		{name: "opaque server", data: withCluster("server: http:member.example.com\n"), wantReason: hubv1alpha1.InvalidKubeconfigReason},
		{
			name:       "server URL with a password is not echoed",
			data:       withCluster("server: \"unix://root:" + kcTestPassword + "@host\"\n"),
			wantReason: hubv1alpha1.InvalidKubeconfigReason,
		},
		{name: "unparsable server", data: withCluster("server: \"https://exa mple.com:port\"\n"), wantReason: hubv1alpha1.InvalidKubeconfigReason},
		{
			name:          "proxy-url with a bad scheme",
			data:          withCluster(httpsServer + "proxy-url: file:///tmp/proxy\n"),
			wantReason:    hubv1alpha1.InvalidKubeconfigReason,
			wantInMessage: []string{"proxy-url", `scheme "file"`},
		},
		{
			name:       "proxy-url with credentials is not echoed",
			data:       withCluster(httpsServer + "proxy-url: \"ftp://u:" + kcTestPassword + "@proxy\"\n"),
			wantReason: hubv1alpha1.InvalidKubeconfigReason,
		},
		{
			name:          "insecure-skip-tls-verify with certificate-authority-data",
			data:          withCluster(httpsServer + ca + "insecure-skip-tls-verify: true\n"),
			wantReason:    hubv1alpha1.InvalidKubeconfigReason,
			wantInMessage: []string{"insecure-skip-tls-verify"},
		},
		{
			name:          "certificate-authority-data that is not PEM",
			data:          withCluster(httpsServer + "certificate-authority-data: " + kcB64([]byte("not a certificate")) + "\n"),
			wantReason:    hubv1alpha1.InvalidKubeconfigReason,
			wantInMessage: []string{"certificate-authority-data"},
		},
		{
			name:          "certificate-authority-data that is not base64",
			data:          withCluster(httpsServer + "certificate-authority-data: '!!!'\n"),
			wantReason:    hubv1alpha1.InvalidKubeconfigReason,
			wantInMessage: []string{"base64"},
		},
		{
			name:          "client certificate without key",
			data:          kcFile("member", goodCluster, kcUser("admin", "client-certificate-data: "+kcB64(pki.certPEM)+"\n"), oneContext),
			wantReason:    hubv1alpha1.InvalidKubeconfigReason,
			wantInMessage: []string{"no client-key-data"},
		},
		{
			name:          "client key without certificate",
			data:          kcFile("member", goodCluster, kcUser("admin", "client-key-data: "+kcB64(pki.keyPEM)+"\n"), oneContext),
			wantReason:    hubv1alpha1.InvalidKubeconfigReason,
			wantInMessage: []string{"no client-certificate-data"},
		},
		{
			name: "client certificate with someone else's key",
			data: kcFile("member", goodCluster,
				kcUser("admin", "client-certificate-data: "+kcB64(pki.certPEM)+"\nclient-key-data: "+kcB64(pki.otherKeyPEM)+"\n"), oneContext),
			wantReason:    hubv1alpha1.InvalidKubeconfigReason,
			wantInMessage: []string{`user "admin"`},
		},
		{
			name:       "token and basic auth",
			data:       kcFile("member", goodCluster, kcUser("admin", "token: "+kcTestToken+"\nusername: root\npassword: "+kcTestPassword+"\n"), oneContext),
			wantReason: hubv1alpha1.InvalidKubeconfigReason,
		},
		{
			name:       "impersonated groups without a user",
			data:       kcFile("member", goodCluster, kcUser("admin", "token: "+kcTestToken+"\nas-groups: [system:masters]\n"), oneContext),
			wantReason: hubv1alpha1.InvalidKubeconfigReason,
		},
	}, secrets
}

func TestRESTConfig(t *testing.T) {
	t.Parallel()
	cases, secrets := kubeconfigCases(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := RESTConfig([]byte(tc.data))
			if tc.wantReason == "" {
				if err != nil {
					t.Fatalf("RESTConfig() error = %v, want none", err)
				}
				assertSafeRESTConfig(t, cfg)
				if tc.check != nil {
					tc.check(t, cfg)
				}
				return
			}

			if cfg != nil {
				t.Error("RESTConfig() returned a config along with a refusal")
			}
			var kerr *Error
			if !errors.As(err, &kerr) {
				t.Fatalf("RESTConfig() error = %v (%T), want a *Error", err, err)
			}
			t.Logf("%s: %s", kerr.Reason, kerr.Message)
			if kerr.Reason != tc.wantReason {
				t.Errorf("Reason = %q, want %q (message: %s)", kerr.Reason, tc.wantReason, kerr.Message)
			}
			for _, want := range tc.wantInMessage {
				if !strings.Contains(kerr.Message, want) {
					t.Errorf("Message %q does not contain %q", kerr.Message, want)
				}
			}
			for _, secret := range secrets {
				if strings.Contains(kerr.Message, secret) || strings.Contains(kerr.Error(), secret) {
					t.Errorf("Message %q contains the secret %q", kerr.Message, secret)
				}
			}
			if !strings.Contains(kerr.Error(), kerr.Reason) || !strings.Contains(kerr.Error(), kerr.Message) {
				t.Errorf("Error() = %q does not carry reason and message", kerr.Error())
			}
		})
	}
}

func assertSafeRESTConfig(t testing.TB, cfg *rest.Config) {
	t.Helper()
	if cfg == nil {
		t.Fatal("RESTConfig() returned neither a config nor an error")
	}
	if cfg.ExecProvider != nil {
		t.Error("config has an ExecProvider")
	}
	if cfg.AuthProvider != nil || cfg.AuthConfigPersister != nil {
		t.Error("config has an AuthProvider or AuthConfigPersister")
	}
	if cfg.BearerTokenFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" || cfg.CAFile != "" {
		t.Error("config names a local file")
	}
}

// TestRESTConfigRunsNoProgram proves that an exec plugin in a Secret never runs:
// the plugin would create a file, which must not exist afterwards. The control subtests show
// that the very same plugin does run when client-go is handed it, so a missing file means
// something.
func TestRESTConfigRunsNoProgram(t *testing.T) {
	t.Parallel()
	touch, err := exec.LookPath("touch")
	if err != nil {
		t.Skip("no touch program to act as exec plugin")
	}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"36"}`))
	}))
	t.Cleanup(server.Close)

	execConfig := func(marker string) *clientcmdapi.ExecConfig {
		return &clientcmdapi.ExecConfig{
			APIVersion:      "client.authentication.k8s.io/v1",
			Command:         touch,
			Args:            []string{marker},
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		}
	}
	// get makes a request with cfg, which is when client-go runs exec plugins.
	get := func(t *testing.T, cfg *rest.Config) {
		t.Helper()
		client, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Logf("HTTPClientFor: %v", err)
			return
		}
		if resp, err := client.Get(server.URL + "/version"); err == nil {
			_ = resp.Body.Close()
		}
	}
	exists := func(path string) bool {
		_, err := os.Stat(path)
		return err == nil
	}

	t.Run("control: client-go runs the plugin", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "ran")
		get(t, &rest.Config{Host: server.URL, ExecProvider: execConfig(marker)})
		if !exists(marker) {
			t.Fatal("the exec plugin did not run even when allowed; this test proves nothing")
		}
	})

	t.Run("control: DenyAll stops the plugin", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "ran")
		provider := execConfig(marker)
		provider.PluginPolicy = clientcmdapi.PluginPolicy{PolicyType: clientcmdapi.PluginPolicyDenyAll}
		get(t, &rest.Config{Host: server.URL, ExecProvider: provider})
		if exists(marker) {
			t.Fatal("the exec plugin ran despite PluginPolicyDenyAll")
		}
	})

	for _, serverURL := range []string{server.URL, strings.Replace(server.URL, "http://", "https://", 1)} {
		t.Run("kubeconfig with "+serverURL, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "ran")
			kc := clientcmdapi.NewConfig()
			kc.Clusters["member"] = &clientcmdapi.Cluster{Server: serverURL, InsecureSkipTLSVerify: true}
			kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Exec: execConfig(marker)}
			kc.Contexts["member"] = &clientcmdapi.Context{Cluster: "member", AuthInfo: "admin"}
			kc.CurrentContext = "member"
			data, err := clientcmd.Write(*kc)
			if err != nil {
				t.Fatal(err)
			}

			cfg, err := RESTConfig(data)
			var kerr *Error
			if !errors.As(err, &kerr) || kerr.Reason != hubv1alpha1.ExecPluginNotAllowedReason {
				t.Errorf("RESTConfig() error = %v, want reason %s", err, hubv1alpha1.ExecPluginNotAllowedReason)
			}
			if cfg != nil {
				t.Error("RESTConfig() returned a config")
				get(t, cfg) // and see whether it would run the plugin
			}
			if exists(marker) {
				t.Fatal("the exec plugin of the kubeconfig ran")
			}
		})
	}
}

// TestKubeconfigFieldsAreClassified fails when client-go adds a field to the kubeconfig types:
// it may name a file or a program, and checkNoProgramsOrFiles must then be taught about it.
func TestKubeconfigFieldsAreClassified(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		typ   reflect.Type
		known []string
	}{
		{reflect.TypeFor[clientcmdapi.AuthInfo](), []string{
			"LocationOfOrigin",                            // never decoded
			"ClientCertificate", "ClientKey", "TokenFile", // files: refused
			"Exec", "AuthProvider", // programs: refused
			"ClientCertificateData", "ClientKeyData", "Token", // data: validated
			"Username", "Password", // data
			"Impersonate", "ImpersonateUID", "ImpersonateGroups", "ImpersonateUserExtra", // data
			"Extensions", // opaque, unused by the rest.Config
		}},
		{reflect.TypeFor[clientcmdapi.Cluster](), []string{
			"LocationOfOrigin",
			"CertificateAuthority", // file: refused
			"Server", "TLSServerName", "InsecureSkipTLSVerify", "CertificateAuthorityData",
			"ProxyURL", "DisableCompression", "Extensions",
		}},
		{reflect.TypeFor[clientcmdapi.Context](), []string{
			"LocationOfOrigin", "Cluster", "AuthInfo", "Namespace", "Extensions",
		}},
		{reflect.TypeFor[clientcmdapi.Config](), []string{
			"Kind", "APIVersion", "Preferences", "Clusters", "AuthInfos", "Contexts", "CurrentContext", "Extensions",
		}},
	} {
		for field := range tc.typ.Fields() {
			if !slices.Contains(tc.known, field.Name) {
				t.Errorf("%s.%s is new: decide whether it names a file or runs a program, then list it here", tc.typ.Name(), field.Name)
			}
		}
	}
}

// FuzzRESTConfig checks that no input panics, that an accepted kubeconfig yields
// a config that runs nothing and reads no file, and that refusals are *Error with a
// known reason whose message does not repeat a token or password of the input.
func FuzzRESTConfig(f *testing.F) {
	cases, _ := kubeconfigCases(f)
	for _, tc := range cases {
		f.Add([]byte(tc.data))
	}
	reasons := []string{hubv1alpha1.InvalidKubeconfigReason, hubv1alpha1.ExecPluginNotAllowedReason, hubv1alpha1.AuthProviderNotAllowedReason, hubv1alpha1.FileReferenceNotAllowedReason}

	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := RESTConfig(data)
		if err == nil {
			assertSafeRESTConfig(t, cfg)
			host, err := url.Parse(cfg.Host)
			if err != nil || (host.Scheme != "https" && host.Scheme != "http") || host.Hostname() == "" {
				t.Fatal("accepted a server that is not an https:// or http:// URL with a host")
			}
			return
		}
		if cfg != nil {
			t.Error("config returned along with an error")
		}
		var kerr *Error
		if !errors.As(err, &kerr) {
			t.Fatalf("error %v is a %T, not a *Error", err, err)
		}
		if !slices.Contains(reasons, kerr.Reason) {
			t.Fatalf("unknown reason %q", kerr.Reason)
		}
		if kerr.Message == "" {
			t.Fatal("empty message")
		}
		// Secrets of the input must not show up in the message, unless they also appear
		// somewhere messages may legitimately quote (names, plugin commands, file paths).
		parsed, loadErr := clientcmd.Load(data)
		if loadErr != nil || parsed == nil {
			return
		}
		var quotable []string
		quotable = append(quotable, parsed.CurrentContext)
		for name, u := range parsed.AuthInfos {
			quotable = append(quotable, name, u.TokenFile, u.ClientCertificate, u.ClientKey)
			if u.Exec != nil {
				quotable = append(quotable, u.Exec.Command)
			}
			if u.AuthProvider != nil {
				quotable = append(quotable, u.AuthProvider.Name)
			}
		}
		for name, c := range parsed.Clusters {
			quotable = append(quotable, name, c.CertificateAuthority, c.Server, c.ProxyURL)
		}
		for name, c := range parsed.Contexts {
			quotable = append(quotable, name, c.Cluster, c.AuthInfo)
		}
		for _, u := range parsed.AuthInfos {
			for _, secret := range []string{u.Token, u.Password, string(u.ClientKeyData)} {
				if len(secret) < 16 || slices.ContainsFunc(quotable, func(q string) bool { return strings.Contains(q, secret) }) {
					continue
				}
				if strings.Contains(kerr.Message, secret) {
					t.Fatalf("message %q contains a secret of the input", kerr.Message)
				}
			}
		}
	})
}
