package peers

import (
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"configbundle.dev/hub/internal/testing/controlplane"
)

// Bounds of the tests, generous for a loaded two-core machine.
const (
	startTimeout = 3 * time.Minute
	timeout      = 20 * time.Second
	interval     = 20 * time.Millisecond
)

var (
	// kube is a client of the API server of the Leases, shared by the tests, each in a
	// namespace of its own.
	kube   client.Client
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunOne(m, controlplane.Options{StartTimeout: startTimeout}, func(cp *controlplane.ControlPlane) error {
		if err := clientgoscheme.AddToScheme(scheme); err != nil {
			return err
		}
		var err error
		kube, err = client.New(cp.Config, client.Options{Scheme: scheme})
		return err
	}))
}

// newNamespace creates a namespace named for the test and returns its name.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if err := kube.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return ns
}
