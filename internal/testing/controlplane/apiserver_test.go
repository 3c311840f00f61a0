package controlplane

import (
	"testing"

	"github.com/onsi/gomega"
)

func TestSecondAPIServerArgs(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	first := []string{
		"--cert-dir=/tmp/cp/apiserver",
		"--client-ca-file=/tmp/cp/apiserver/client-cert-auth-ca.crt",
		"--etcd-servers=http://127.0.0.1:2379",
		"--secure-port=6443",
		"--service-account-issuer=https://127.0.0.1:6443/",
		"--service-account-key-file=/tmp/cp/apiserver/sa-signer.crt",
		"--endpoint-reconciler-type=lease",
		"--bind-address=127.0.0.1",
	}
	g.Expect(secondAPIServerArgs(first, "/tmp/cp/apiserver", "/tmp/cp/kube-apiserver-2", 7443)).To(gomega.Equal([]string{
		"--cert-dir=/tmp/cp/kube-apiserver-2",
		"--client-ca-file=/tmp/cp/kube-apiserver-2/client-cert-auth-ca.crt",
		"--etcd-servers=http://127.0.0.1:2379",
		"--secure-port=7443",
		"--service-account-issuer=https://127.0.0.1:6443/", // tokens of either apiserver are valid on both
		"--service-account-key-file=/tmp/cp/kube-apiserver-2/sa-signer.crt",
		"--bind-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
	}))
}
