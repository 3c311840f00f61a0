// Package pki makes the certificates and keys of test clusters: a CA, leaf certificates it
// signs (ECDSA P-256, valid for Validity), and service-account signing keys. Test machinery
// only: nothing here is fit to secure a real cluster.
package pki
