package kubeconfig

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// CredentialsExpiry returns when the credential of a sanitised cfg expires, and false when it
// does not say: the exp claim of a bearer token that is a JWT (a ServiceAccount token from the
// TokenRequest API, say), or else the notAfter of the client certificate. The token's signature
// is not checked: the member's API server does that; the hub only reads when to warn.
func CredentialsExpiry(cfg *rest.Config) (time.Time, bool) {
	if cfg.BearerToken != "" {
		return jwtExpiry(cfg.BearerToken)
	}
	if len(cfg.CertData) > 0 {
		return certificateExpiry(cfg.CertData)
	}
	return time.Time{}, false
}

// jwtExpiry reads the exp claim (seconds since the epoch) of a JWT in compact serialisation.
func jwtExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	exp, err := claims.Exp.Float64()
	if err != nil || exp <= 0 {
		return time.Time{}, false
	}
	return time.Unix(int64(exp), 0).UTC(), true
}

// certificateExpiry returns the notAfter of the first certificate of a PEM bundle.
func certificateExpiry(data []byte) (time.Time, bool) {
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return time.Time{}, false
		}
		return cert.NotAfter.UTC(), true
	}
	return time.Time{}, false
}
