package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is how long the certificates of a Shared fleet are valid: longer than any run.
const certValidity = 7 * 24 * time.Hour

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
	caKey, caCert, caPEM, err := newCA()
	if err != nil {
		return nil, err
	}
	c := &sharedCerts{CA: filepath.Join(dir, "ca.crt"), ServingCert: filepath.Join(dir, "serving.crt"),
		ServingKey: filepath.Join(dir, "serving.key"), SAKey: filepath.Join(dir, "sa.key"), SAPub: filepath.Join(dir, "sa.pub"), CAData: caPEM}
	serving := &x509.Certificate{Subject: pkix.Name{CommonName: "kube-apiserver"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
	servingCert, servingKey, err := signLeaf(serving, caCert, caKey)
	if err != nil {
		return nil, err
	}
	admin := &x509.Certificate{Subject: pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if c.AdminCert, c.AdminKey, err = signLeaf(admin, caCert, caKey); err != nil {
		return nil, err
	}
	saKey, saPub, err := newKeyPair()
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

// newCA returns a self-signed CA: its key, certificate and the certificate as PEM.
func newCA() (*ecdsa.PrivateKey, *x509.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generating the CA key: %w", err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "controlplane-shared-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(certValidity), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("creating the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("parsing the CA certificate: %w", err)
	}
	return key, cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// signLeaf completes tmpl, signs it with the CA and returns certificate and key as PEM.
func signLeaf(tmpl, ca *x509.Certificate, caKey crypto.Signer) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating a key for %s: %w", tmpl.Subject.CommonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, fmt.Errorf("generating a serial number: %w", err)
	}
	tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = serial, time.Now().Add(-time.Hour), time.Now().Add(certValidity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the certificate of %s: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the key of %s: %w", tmpl.Subject.CommonName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// newKeyPair returns a private key and its public key as PEM, for service-account tokens.
func newKeyPair() (keyPEM, pubPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating the service-account key: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the service-account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the service-account public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), nil
}
