package controlplane

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"configbundle.dev/hub/internal/testing/pki"
)

// sharedCerts are the files every kube-apiserver of a Shared fleet serves and authenticates
// with: one CA signs the serving certificate (127.0.0.1 and localhost, valid for every port)
// and the admin's client certificate (group system:masters); one key signs service-account
// tokens. Sharing them costs nothing in realism: each kube-apiserver still terminates TLS,
// authenticates and authorizes every request itself.
type sharedCerts struct {
	CA, ServingCert, ServingKey, SAKey, SAPub string // file paths
	// CAData, AdminCert and AdminKey are PEM, for client configs.
	CAData, AdminCert, AdminKey []byte
}

// newSharedCerts writes the certificates and keys into dir.
func newSharedCerts(dir string) (*sharedCerts, error) {
	caKey, caCert, caPEM, err := pki.NewCA("controlplane-shared-ca")
	if err != nil {
		return nil, err
	}
	c := &sharedCerts{CA: filepath.Join(dir, "ca.crt"), ServingCert: filepath.Join(dir, "serving.crt"),
		ServingKey: filepath.Join(dir, "serving.key"), SAKey: filepath.Join(dir, "sa.key"), SAPub: filepath.Join(dir, "sa.pub"), CAData: caPEM}
	serving := &x509.Certificate{Subject: pkix.Name{CommonName: "kube-apiserver"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
	servingCert, servingKey, err := pki.SignLeaf(serving, caCert, caKey)
	if err != nil {
		return nil, err
	}
	admin := &x509.Certificate{Subject: pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if c.AdminCert, c.AdminKey, err = pki.SignLeaf(admin, caCert, caKey); err != nil {
		return nil, err
	}
	saKey, saPub, err := pki.NewKeyPair()
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{c.CA: caPEM, c.ServingCert: servingCert, c.ServingKey: servingKey, c.SAKey: saKey, c.SAPub: saPub}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return c, nil
}
