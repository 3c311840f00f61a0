// Package manifests tests the deployable manifests under config/: every kustomization renders
// (with kustomize's Go API, as `kubectl apply -k` would), holds the objects an operator expects,
// is accepted by a real API server, and the hub's generated RBAC is enough to run the hub and no
// more than it needs.
package manifests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/pkg/hubmanager"
)

// Timeouts, generous for a loaded two-core machine.
const (
	// startTimeout bounds starting the control planes.
	startTimeout = 3 * time.Minute
	// establishTimeout bounds a CRD becoming established and RBAC reaching the authorizer.
	establishTimeout = 30 * time.Second
	// joinTimeout bounds a member joining: connecting, installing the CRD, warming the caches.
	joinTimeout = time.Minute
	// timeout bounds anything else the hub does in the background.
	timeout = 30 * time.Second
	// interval is the polling interval of Eventually.
	interval = 100 * time.Millisecond
	// stopTimeout bounds the hub's shutdown.
	stopTimeout = 30 * time.Second
	// registerTimeout bounds registration.Register.
	registerTimeout = time.Minute
)

// Names the manifests use.
const (
	namespace = "configbundle-system"
	hubName   = "configbundle-hub"
	nameLabel = "app.kubernetes.io/name"
)

// configDir is the repository's config/ directory.
var configDir = func() string {
	dir, err := filepath.Abs(filepath.Join("..", "..", "config"))
	if err != nil {
		panic(err)
	}
	return dir
}()

// The control planes, started on first use by the tests that need them (rendering needs none):
// hub and m1 for the RBAC test, dry for the dry runs.
var (
	planesOnce sync.Once
	planesErr  error
	planes     = map[string]*controlplane.ControlPlane{}
	started    []*controlplane.ControlPlane
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := controlplane.StopAll(started); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control planes:", err)
	}
	os.Exit(code)
}

// controlPlane returns the control plane name (hub, m1 or dry), starting all three on first use.
func controlPlane(t *testing.T, name string) *controlplane.ControlPlane {
	t.Helper()
	planesOnce.Do(func() {
		if planesErr = controlplane.CheckAssets(); planesErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		// The hub's and m1's audit logs show the hub's writes (its user agent).
		audited := controlplane.Named(controlplane.Options{AuditWrites: true}, "hub", "m1")
		started, planesErr = controlplane.Start(ctx, append(audited, controlplane.Named(controlplane.Options{}, "dry")...)...)
		for _, cp := range started {
			planes[cp.Name] = cp
		}
	})
	if planesErr != nil {
		t.Fatalf("starting the control planes: %v", planesErr)
	}
	return planes[name]
}

// newClient is a client of cfg with the hub's scheme and the CRD types.
func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	scheme, err := hubmanager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// adminClient is a client of cp with its admin credentials.
func adminClient(t *testing.T, cp *controlplane.ControlPlane) client.Client {
	t.Helper()
	return newClient(t, cp.Config)
}

// render builds the kustomization in dir (relative to config/, or absolute) with the options
// `kubectl kustomize` uses: files only from within each kustomization's directory, no plugins.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(configDir, dir)
	}
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	objs := make([]*unstructured.Unstructured, 0, resMap.Size())
	for _, r := range resMap.Resources() {
		// Through JSON, so that numbers are int64 or float64 as everywhere in apimachinery (Map
		// would give ints, which unstructured.Unstructured cannot even DeepCopy).
		raw, err := r.MarshalJSON()
		if err != nil {
			t.Fatalf("kustomize build %s: %s: %v", dir, r.CurId(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			t.Fatalf("kustomize build %s: %s: %v", dir, r.CurId(), err)
		}
		objs = append(objs, u)
	}
	return objs
}

// id names an object as Kind/namespace/name ("Kind//name" when cluster-scoped).
func id(u *unstructured.Unstructured) string {
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

func ids(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, u := range objs {
		out = append(out, id(u))
	}
	return out
}

// find returns the object kind/namespace/name of objs, failing the test when it is missing.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == kind && u.GetNamespace() == ns && u.GetName() == name {
			return u
		}
	}
	t.Fatalf("no %s/%s/%s among %v", kind, ns, name, ids(objs))
	return nil
}

// apply server-side applies obj as the test's field manager, optionally as a dry run.
func apply(ctx context.Context, c client.Client, obj *unstructured.Unstructured, opts ...client.ApplyOption) error {
	opts = append([]client.ApplyOption{client.FieldOwner("manifests-test"), client.ForceOwnership}, opts...)
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()), opts...)
}

// unknownClusterScoped are cluster-scoped kinds that kustomize's schema does not know to be
// cluster-scoped: its namespace transformer (config/default's `namespace:`) gives them a
// namespace, which the API server drops (a cluster-scoped object has none), and the chart
// generated from config/default templates it as the release's.
var unknownClusterScoped = []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}

// asServed returns copies of objs as the API server stores them: the kinds of
// unknownClusterScoped without a namespace.
func asServed(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, u := range objs {
		if slices.Contains(unknownClusterScoped, u.GetKind()) {
			u = u.DeepCopy()
			u.SetNamespace("")
		}
		out = append(out, u)
	}
	return out
}
