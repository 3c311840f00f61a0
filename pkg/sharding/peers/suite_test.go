package peers

import (
	"context"
	"fmt"
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
	os.Exit(run(m))
}

// run starts the API server of the Leases, runs the tests and stops it.
func run(m *testing.M) int {
	if err := controlplane.CheckAssets(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cps, err := controlplane.Start(ctx, controlplane.Named(controlplane.Options{StartTimeout: startTimeout}, "hub")...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		return 1
	}
	defer func() {
		if err := controlplane.StopAll(cps); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}()
	if kube, err = client.New(cps[0].Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
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
