package configbundle_test

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	clustersprovider "sigs.k8s.io/multicluster-runtime/providers/clusters"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/config"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/suite"
	"configbundle.dev/hub/pkg/configbundle"
)

// Timeouts of the suite, generous for a loaded two-core machine.
const (
	startTimeout = 3 * time.Minute
	timeout      = 20 * time.Second
	interval     = 50 * time.Millisecond
	quietPeriod  = 2 * time.Second
)

// The suite runs one hub and three members, each a real control plane. member-a serves the
// ConfigBundle CRD as generated; member-b serves a copy without its validation rules, as an older
// or hand-made installation would, so that the reconciler's own guards can be seen at work; both
// have a garbage collector. member-c is where faults are made: its kube-apiserver is killed and
// started again, and its objects are changed behind the hub's back through a second
// kube-apiserver.
const (
	memberA = "member-a"
	memberB = "member-b"
	memberC = "member-c"
)

var (
	scheme  = runtime.NewScheme()
	members map[string]client.Client
	caches  map[string]cluster.Cluster

	// hubConfig is the hub's control plane; it serves the ConfigBundle CRD too, so that a test
	// can make it a member that comes and goes through provider.
	hubConfig  *rest.Config
	provider   *clustersprovider.Provider
	reconciler *configbundle.Reconciler

	// planes are the control planes by name: "hub" and the members.
	planes = map[string]*controlplane.ControlPlane{}
	// resync is the function the reconciler handed Options.ResyncOn: the suite's stand-in for
	// the provider's OnReady, called by a test when a member answers again.
	resync atomic.Pointer[func(name string)]
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	must(clientgoscheme.AddToScheme(scheme))
	must(configbundlev1alpha1.AddToScheme(scheme))
	// The CRDs are installed before the garbage collector starts: it discovers new kinds only
	// every 30 seconds.
	crds, err := config.MemberCRDs()
	must(err)
	return suite.Run(m, suite.Options{
		StartTimeout: startTimeout,
		Planes: []controlplane.Plane{
			{Name: "hub", Options: controlplane.Options{CRDs: crds}},
			{Name: memberA, Options: controlplane.Options{CRDs: crds, GarbageCollector: true, AuditWrites: true}},
			{Name: memberB, Options: controlplane.Options{CRDs: withoutValidation(crds), GarbageCollector: true, AuditWrites: true}},
			{Name: memberC, Options: controlplane.Options{CRDs: crds}},
		},
		Setup: setUp,
	})
}

// setUp connects the clusters provider to the members and starts the hub's manager with the
// reconciler.
func setUp(ctx, _ context.Context, cps []*controlplane.ControlPlane) error {
	hubConfig = cps[0].Config
	for _, cp := range cps {
		planes[cp.Name] = cp
	}
	hub, err := suite.NewHub(ctx, cps, scheme, configbundle.ConfigureCache)
	if err != nil {
		return err
	}
	provider, members, caches = hub.Provider, hub.Clients, hub.Clusters
	reconciler, err = configbundle.SetupWithManager(hub.Manager, configbundle.Options{
		RetryBaseDelay: 100 * time.Millisecond,
		RetryMaxDelay:  time.Second,
		ResyncOn:       func(f func(name string)) { resync.Store(&f) },
		HubSources:     testHubSources,
	})
	if err != nil {
		return err
	}
	hub.Start(ctx)
	return nil
}

// withoutValidation strips the ConfigBundle CRD of its CEL rules and bounds: those of spec, of
// its message and of its data (keys, their number, the length of a value).
func withoutValidation(crds []*apiextensionsv1.CustomResourceDefinition) []*apiextensionsv1.CustomResourceDefinition {
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(crds))
	for _, crd := range crds {
		crd = crd.DeepCopy()
		for i := range crd.Spec.Versions {
			spec := crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
			spec.XValidations = nil
			message := spec.Properties["message"]
			message.XValidations, message.MaxLength = nil, nil
			spec.Properties["message"] = message
			data := spec.Properties["data"]
			data.XValidations, data.MaxProperties = nil, nil
			if data.AdditionalProperties != nil && data.AdditionalProperties.Schema != nil {
				data.AdditionalProperties.Schema.MaxLength = nil
			}
			spec.Properties["data"] = data
			crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
		}
		out = append(out, crd)
	}
	return out
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// newNamespace creates a namespace of its own for a test in a member.
func newNamespace(t *testing.T, member string) string {
	t.Helper()
	prefix := strings.NewReplacer("/", "-", "_", "-").Replace(strings.ToLower(t.Name()))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix[:min(40, len(prefix))] + "-"}}
	if err := members[member].Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

func newBundle(ns, name, message string) *configbundlev1alpha1.ConfigBundle {
	return &configbundlev1alpha1.ConfigBundle{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       configbundlev1alpha1.ConfigBundleSpec{Message: message},
	}
}

// events returns the notes of the Events with the given reason about a bundle.
func events(ctx context.Context, c client.Client, bundle *configbundlev1alpha1.ConfigBundle, reason string) ([]string, error) {
	list := &eventsv1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(bundle.Namespace)); err != nil {
		return nil, err
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Name == bundle.Name && e.Regarding.Kind == "ConfigBundle" && e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes, nil
}

// occurrences counts the occurrences of the Events with the given reason about a bundle: one per
// Event, or its series' count (the recorder aggregates repeated Events into a series).
func occurrences(ctx context.Context, c client.Client, bundle *configbundlev1alpha1.ConfigBundle, reason string) (int32, error) {
	list := &eventsv1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(bundle.Namespace)); err != nil {
		return 0, err
	}
	var n int32
	for _, e := range list.Items {
		if e.Regarding.Name != bundle.Name || e.Regarding.Kind != "ConfigBundle" || e.Reason != reason {
			continue
		}
		if e.Series != nil {
			n += e.Series.Count
		} else {
			n++
		}
	}
	return n, nil
}
