package fleet

import (
	"context"
	"testing"

	"github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/netproxy"
)

// MustStart starts a fleet for a test, which it fails on error; the fleet is closed when the
// test ends.
func MustStart(t testing.TB, opts Options) *Fleet {
	t.Helper()
	f, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Logf("closing the fleet: %v", err)
		}
	})
	return f
}

// MustRegister registers a member with `hub register --timeout <Options.Timeout>`, failing the
// test on error, and logs the command's output.
func (f *Fleet) MustRegister(t testing.TB, name string) {
	t.Helper()
	out, err := f.Register(context.Background(), name, "--timeout", f.opts.Timeout.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", out)
}

// MustPutSecret is PutSecret, failing through g.
func (f *Fleet) MustPutSecret(g gomega.Gomega, name string, data map[string][]byte) {
	g.Expect(f.PutSecret(context.Background(), name, data)).To(gomega.Succeed())
}

// MustDeleteSecret is DeleteSecret, failing through g.
func (f *Fleet) MustDeleteSecret(g gomega.Gomega, name string) {
	g.Expect(f.DeleteSecret(context.Background(), name)).To(gomega.Succeed())
}

// MemberCluster returns a function reading the MemberCluster name, for Eventually.
func (f *Fleet) MemberCluster(name string) func(gomega.Gomega) *hubv1alpha1.MemberCluster {
	return func(g gomega.Gomega) *hubv1alpha1.MemberCluster {
		mc, err := f.GetMemberCluster(context.Background(), name)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		return mc
	}
}

// Message returns a function reading the message of the ConfigMap of bundle b in the member,
// for Eventually.
func (m *Member) Message(b client.Object) func(gomega.Gomega) string {
	return func(g gomega.Gomega) string {
		msg, err := Message(context.Background(), m.Client, client.ObjectKeyFromObject(b))
		g.Expect(err).NotTo(gomega.HaveOccurred())
		return msg
	}
}

// Fleet reads the Fleet, failing through g.
func (f *Fleet) Fleet(g gomega.Gomega) *hubv1alpha1.Fleet {
	fl, err := f.GetFleet(context.Background())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	return fl
}

// Metrics scrapes the hub process HubName, failing through g.
func (f *Fleet) Metrics(g gomega.Gomega) string {
	text, err := f.ScrapeHub(HubName)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	return text
}

// ReadyIs matches a MemberCluster, a Fleet, a ClusterSet or a ClusterSetBinding whose Ready
// condition has the status and reason.
func ReadyIs(status metav1.ConditionStatus, reason string) gomega.OmegaMatcher {
	return gomega.WithTransform(func(obj any) string {
		var conds []metav1.Condition
		switch o := obj.(type) {
		case *hubv1alpha1.MemberCluster:
			conds = o.Status.Conditions
		case *hubv1alpha1.Fleet:
			conds = o.Status.Conditions
		case *hubv1alpha1.ClusterSet:
			conds = o.Status.Conditions
		case *hubv1alpha1.ClusterSetBinding:
			conds = o.Status.Conditions
		}
		got, why := ReadyReason(conds)
		if got == "" {
			return "no Ready condition"
		}
		return string(got) + "/" + why
	}, gomega.Equal(string(status)+"/"+reason))
}

// FleetBundleStatus polls the status of fb through c, for Eventually.
func FleetBundleStatus(c client.Client, fb *hubv1alpha1.FleetBundle) func(gomega.Gomega) hubv1alpha1.FleetBundleStatus {
	return func(g gomega.Gomega) hubv1alpha1.FleetBundleStatus {
		got := &hubv1alpha1.FleetBundle{}
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(fb), got)).To(gomega.Succeed())
		return got.Status
	}
}

// FleetBundleReady matches a FleetBundle status whose Ready condition has reason.
func FleetBundleReady(reason string) gomega.OmegaMatcher {
	return gomega.WithTransform(func(s hubv1alpha1.FleetBundleStatus) string {
		if _, why := ReadyReason(s.Conditions); why != "" {
			return why
		}
		return "no Ready condition"
	}, gomega.Equal(reason))
}

// EventsOn polls the events.k8s.io Events on the hub regarding the object of kind, namespace and
// name (a cluster-scoped object's Events are in the namespace default), for Eventually.
func (f *Fleet) EventsOn(kind, namespace, name string) func(gomega.Gomega) []eventsv1.Event {
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	return func(g gomega.Gomega) []eventsv1.Event {
		list := &eventsv1.EventList{}
		g.Expect(f.Hub.List(context.Background(), list, client.InNamespace(namespace))).To(gomega.Succeed())
		var out []eventsv1.Event
		for _, e := range list.Items {
			if e.Regarding.Kind == kind && e.Regarding.Name == name {
				out = append(out, e)
			}
		}
		return out
	}
}

// MustBlackHole starts a netproxy.BlackHole, failing the test on error, and closes it when the
// test ends.
func MustBlackHole(t testing.TB) *netproxy.BlackHole {
	t.Helper()
	h, err := netproxy.StartBlackHole()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// MustBindGlobal binds GlobalClusterSet into the hub namespaces ns (BindGlobal), failing t if it
// cannot.
func (f *Fleet) MustBindGlobal(t testing.TB, ns ...string) {
	t.Helper()
	if err := f.BindGlobal(context.Background(), ns...); err != nil {
		t.Fatal(err)
	}
}

// MustBindGlobalWith is BindGlobalWith, failing t if it cannot.
func MustBindGlobalWith(t testing.TB, c client.Client, ns ...string) {
	t.Helper()
	if err := BindGlobalWith(context.Background(), c, ns...); err != nil {
		t.Fatal(err)
	}
}

// ClusterSet polls the ClusterSet name on the hub, for Eventually.
func (f *Fleet) ClusterSet(name string) func(gomega.Gomega) *hubv1alpha1.ClusterSet {
	return func(g gomega.Gomega) *hubv1alpha1.ClusterSet {
		cs := &hubv1alpha1.ClusterSet{}
		g.Expect(f.Hub.Get(context.Background(), client.ObjectKey{Name: name}, cs)).To(gomega.Succeed())
		return cs
	}
}

// ClusterSetBinding polls the binding of the ClusterSet set into the hub namespace ns, for
// Eventually.
func (f *Fleet) ClusterSetBinding(ns, set string) func(gomega.Gomega) *hubv1alpha1.ClusterSetBinding {
	return func(g gomega.Gomega) *hubv1alpha1.ClusterSetBinding {
		b := &hubv1alpha1.ClusterSetBinding{}
		g.Expect(f.Hub.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: set}, b)).To(gomega.Succeed())
		return b
	}
}
