package kubeconfig

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func TestCredentialsExpiry(t *testing.T) {
	t.Parallel()
	pki := newKubeconfigTestPKI(t)
	block, _ := pem.Decode(pki.certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	jwt := func(payload string) string {
		enc := base64.RawURLEncoding.EncodeToString
		return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(payload)) + ".c2lnbmF0dXJl"
	}
	exp := time.Date(2027, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		cfg    rest.Config
		want   time.Time
		wantOK bool
	}{
		{"ServiceAccount token", rest.Config{BearerToken: jwt(`{"iss":"https://kubernetes.default.svc","exp":1827576000,"sub":"system:serviceaccount:x:y"}`)}, exp, true},
		{"exp in scientific notation", rest.Config{BearerToken: jwt(`{"exp":1.827576e9}`)}, exp, true},
		{"padded payload", rest.Config{BearerToken: "e30." + base64.URLEncoding.EncodeToString([]byte(`{"exp":1827576000 }`)) + ".c2ln"}, exp, true},
		{"client certificate", rest.Config{TLSClientConfig: rest.TLSClientConfig{CertData: pki.certPEM}}, cert.NotAfter.UTC(), true},
		{"the token wins over a certificate", rest.Config{BearerToken: jwt(`{"exp":1827576000}`), TLSClientConfig: rest.TLSClientConfig{CertData: pki.certPEM}}, exp, true},
		{"static token", rest.Config{BearerToken: "s3cr3t"}, time.Time{}, false},
		{"JWT without exp", rest.Config{BearerToken: jwt(`{"sub":"me"}`)}, time.Time{}, false},
		{"JWT with a string exp", rest.Config{BearerToken: jwt(`{"exp":"tomorrow"}`)}, time.Time{}, false},
		{"JWT with a negative exp", rest.Config{BearerToken: jwt(`{"exp":-1}`)}, time.Time{}, false},
		{"payload not base64", rest.Config{BearerToken: "a.%%%.c"}, time.Time{}, false},
		{"payload not JSON", rest.Config{BearerToken: "a." + base64.RawURLEncoding.EncodeToString([]byte("nope")) + ".c"}, time.Time{}, false},
		{"certificate data not PEM", rest.Config{TLSClientConfig: rest.TLSClientConfig{CertData: []byte("garbage")}}, time.Time{}, false},
		{"only a key", rest.Config{TLSClientConfig: rest.TLSClientConfig{CertData: pki.keyPEM}}, time.Time{}, false},
		{"nothing", rest.Config{}, time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := CredentialsExpiry(&tt.cfg)
			if ok != tt.wantOK || !got.Equal(tt.want) {
				t.Errorf("CredentialsExpiry = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
