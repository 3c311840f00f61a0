package controlplane

import (
	"errors"
	"os"
)

// ErrNoAssets is CheckAssets' error: nothing says where the control-plane binaries are.
var ErrNoAssets = errors.New("KUBEBUILDER_ASSETS is not set: it names the directory of the control-plane binaries " +
	"(etcd, kube-apiserver, kube-controller-manager); `make test`, `make demo` and `make bench` build them and set it, " +
	"and `bash hack/offline/testbin.sh` prints it")

// CheckAssets returns ErrNoAssets when KUBEBUILDER_ASSETS is not set. Every harness calls it
// before it starts a control plane, so that a missing directory says what to do rather than
// failing deep inside envtest.
func CheckAssets() error {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return ErrNoAssets
	}
	return nil
}
