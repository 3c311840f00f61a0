package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// newClusterSet creates the ClusterSet name selecting the members labelled key=yes, and deletes
// it when the test ends.
func newClusterSet(t *testing.T, name, key string) {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	cs := fleet.NewClusterSet(name, map[string]string{key: "yes"})
	g.Expect(fl.Hub.Create(ctx, cs)).To(Succeed())
	t.Cleanup(func() { g.Expect(client.IgnoreNotFound(fl.Hub.Delete(ctx, cs))).To(Succeed()) })
}

// bind binds the ClusterSet set into the hub namespace ns as the fleet's administrator, and
// removes the binding when the test ends.
func bind(t *testing.T, ns, set string) {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	g.Expect(fl.Bind(ctx, nil, ns, set)).To(Succeed())
	t.Cleanup(func() { unbind(g, ns, set) })
}

// unbind deletes the binding of set into ns.
func unbind(g Gomega, ns, set string) {
	g.Expect(client.IgnoreNotFound(fl.Hub.Delete(context.Background(), fleet.NewClusterSetBinding(ns, set)))).To(Succeed())
}

// newUnboundFleetBundle creates, with c (the fleet's administrator if nil), FleetBundle ns/name
// selecting every member it may ({}), in a hub namespace it binds no set into, and deletes it
// (waiting until it is gone) and its ConfigMaps in members when the test ends.
func newUnboundFleetBundle(t *testing.T, c client.Client, ns, name, message string, members ...string) *hubv1alpha1.FleetBundle {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	g.Expect(fleet.EnsureNamespace(ctx, fl.Hub, ns)).To(Succeed())
	if c == nil {
		c = fl.Hub
	}
	fb := fleet.NewFleetBundle(ns, name, nil, configbundlev1alpha1.ConfigBundleSpec{Message: message})
	g.Eventually(func() error { return c.Create(ctx, fb) }).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	t.Cleanup(func() {
		deleteFleetBundle(g, fb)
		for _, m := range members { // the members run no garbage collector
			_ = fl.Member(m).Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		}
	})
	return fb
}

// placedIn returns a function listing the members (of those named) that hold a bundle of fb.
func placedIn(fb *hubv1alpha1.FleetBundle, members ...string) func(Gomega) []string {
	return func(g Gomega) []string {
		out := []string{}
		for _, m := range members {
			if placed(m, fb)(g) != nil {
				out = append(out, m)
			}
		}
		return out
	}
}

// noClusterSetBinding matches the status of a FleetBundle with no bound set: Ready False
// NoClusterSetBinding.
func noClusterSetBinding() OmegaMatcher {
	return condition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.NoClusterSetBindingReason)
}

// TestClusterSetsBoundToANamespace (issue 25): a FleetBundle selecting every member ({}) in a
// namespace bound to a set of one member is placed there only; in a namespace with no binding it
// places nothing (Ready False NoClusterSetBinding); binding a second set extends it; spec.clusterSets
// narrows it to the named bound sets (to none of them: NoClusterSetBinding, and what it placed is
// removed); deleting a binding removes what it placed; relabelling a member moves it in or out of
// a set; so do a set's selector changed and a set deleted. The sets count their members (status.clusters, Ready Selecting); a binding of a set that
// does not exist is Ready False ClusterSetNotFound until the set is created.
func TestClusterSetsBoundToANamespace(t *testing.T) {
	g := NewWithT(t)
	members := []string{"m1", "m2", "m3"}
	joined(t, members...)
	const ns, unboundNS = "clusterset-bound", "clusterset-unbound"
	const oneKey, twoKey, laterKey = "e2e.clusterset/one", "e2e.clusterset/two", "e2e.clusterset/later"
	const one, two, later = "e2e-clusterset-one", "e2e-clusterset-two", "e2e-clusterset-later"
	for _, m := range members {
		ensureNamespace(g, m, ns)
		ensureNamespace(g, m, unboundNS)
	}
	selectMember(t, "m1", oneKey, "yes")
	selectMember(t, "m2", twoKey, "yes")
	newClusterSet(t, one, oneKey)
	newClusterSet(t, two, twoKey)
	for _, s := range []string{one, two} {
		g.Eventually(fl.ClusterSet(s)).WithTimeout(timeout).WithPolling(interval).Should(And(
			fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ClusterSetSelectingReason), HaveField("Status.Clusters", BeEquivalentTo(1))), s)
	}

	// No binding in its namespace: nothing, anywhere.
	unbound := newUnboundFleetBundle(t, nil, unboundNS, "web", "nowhere", members...)
	g.Eventually(fleetBundleStatus(unbound)).WithTimeout(timeout).WithPolling(interval).Should(And(
		noClusterSetBinding(), HaveField("Clusters.Selected", BeZero())))
	g.Consistently(placedIn(unbound, members...)).WithTimeout(quietPeriod).WithPolling(interval).Should(BeEmpty())

	// Bound to the set of m1: m1 alone.
	bind(t, ns, one)
	g.Eventually(fl.ClusterSetBinding(ns, one)).WithTimeout(timeout).WithPolling(interval).Should(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ClusterSetBoundReason))
	fb := newUnboundFleetBundle(t, nil, ns, "web", "bound", members...)
	everywhere(g, fb, "bound", "m1")
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), HaveField("Clusters.Selected", BeEquivalentTo(1))))
	g.Consistently(placedIn(fb, members...)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal([]string{"m1"}))

	// A second set bound: m2 too.
	bind(t, ns, two)
	everywhere(g, fb, "bound", "m1", "m2")
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), HaveField("Clusters.Selected", BeEquivalentTo(2))))

	// spec.clusterSets narrows to the named bound sets: two alone; a set not bound, none.
	editFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.ClusterSets = []string{two} })
	g.Eventually(placedIn(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{"m2"}))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), HaveField("Clusters.Selected", BeEquivalentTo(1))))
	editFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.ClusterSets = []string{later} })
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		noClusterSetBinding(), HaveField("Clusters.Selected", BeZero())))
	g.Eventually(placedIn(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(BeEmpty(), "what it placed is removed")
	editFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.ClusterSets = nil })
	everywhere(g, fb, "bound", "m1", "m2")

	// The binding of one deleted: m1's bundle is removed, m2 keeps its own.
	unbind(g, ns, one)
	g.Eventually(placedIn(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{"m2"}))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Clusters.Selected", BeEquivalentTo(1)))

	// A member relabelled into a bound set is selected; out of it, no longer.
	selectMember(t, "m3", twoKey, "yes")
	g.Eventually(fl.ClusterSet(two)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Status.Clusters", BeEquivalentTo(2)))
	everywhere(g, fb, "bound", "m2", "m3")
	selectMember(t, "m3", twoKey, "")
	g.Eventually(placedIn(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{"m2"}))
	g.Eventually(fl.ClusterSet(two)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Status.Clusters", BeEquivalentTo(1)))

	// A binding of a set that does not exist binds nothing until the set is created.
	bind(t, ns, later)
	g.Eventually(fl.ClusterSetBinding(ns, later)).WithTimeout(timeout).WithPolling(interval).Should(fleet.ReadyIs(metav1.ConditionFalse, hubv1alpha1.ClusterSetNotFoundReason))
	selectMember(t, "m3", laterKey, "yes")
	g.Consistently(placedIn(fb, members...)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal([]string{"m2"}))
	newClusterSet(t, later, laterKey)
	g.Eventually(fl.ClusterSetBinding(ns, later)).WithTimeout(timeout).WithPolling(interval).Should(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ClusterSetBoundReason))
	everywhere(g, fb, "bound", "m2", "m3")

	// A set's selector changed moves its placements: later now selects m1, not m3.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cs := &hubv1alpha1.ClusterSet{}
		if err := fl.Hub.Get(context.Background(), client.ObjectKey{Name: later}, cs); err != nil {
			return err
		}
		cs.Spec.ClusterSelector = metav1.LabelSelector{MatchLabels: map[string]string{oneKey: "yes"}}
		return fl.Hub.Update(context.Background(), cs)
	})).To(Succeed())
	g.Eventually(placedIn(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{"m1", "m2"}))
	g.Eventually(fl.ClusterSet(later)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Status.Clusters", BeEquivalentTo(1)))

	// A bound set deleted: its members lose what it let the FleetBundle place; its binding says
	// the set is gone.
	g.Expect(fl.Hub.Delete(context.Background(), &hubv1alpha1.ClusterSet{ObjectMeta: metav1.ObjectMeta{Name: later}})).To(Succeed())
	g.Eventually(placedIn(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{"m2"}))
	g.Eventually(fl.ClusterSetBinding(ns, later)).WithTimeout(timeout).WithPolling(interval).Should(fleet.ReadyIs(metav1.ConditionFalse, hubv1alpha1.ClusterSetNotFoundReason))

	// And the FleetBundle of the unbound namespace never placed anything.
	g.Expect(placedIn(unbound, members...)(g)).To(BeEmpty())
	g.Expect(fleetBundleStatus(unbound)(g)).To(noClusterSetBinding())
}
