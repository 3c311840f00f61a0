package e2e

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// memberEvent matches an Event of type and reason on a FleetBundle about one member: related to
// its MemberCluster, the note naming it and what says.
func memberEvent(eventType, reason, member, says string) OmegaMatcher {
	return And(HaveField("Type", eventType), HaveField("Reason", reason),
		HaveField("Related", And(Not(BeNil()), HaveField("Kind", "MemberCluster"), HaveField("Name", member))),
		HaveField("Note", And(ContainSubstring("Member "+member), ContainSubstring(says))))
}

// ofMember keeps the Events related to one member.
func ofMember(member string, events []eventsv1.Event) []eventsv1.Event {
	var out []eventsv1.Event
	for _, e := range events {
		if e.Related != nil && e.Related.Name == member {
			out = append(out, e)
		}
	}
	return out
}

// fleetBundleGauges returns a function reading a FleetBundle's selected, ready and failed gauges
// from the hub's scrape (-1 for a series it lacks).
func fleetBundleGauges(key types.NamespacedName) func(Gomega) [3]float64 {
	return func(g Gomega) [3]float64 {
		text := fl.Metrics(g)
		var out [3]float64
		for i, name := range []string{"selected", "ready", "failed"} {
			out[i] = fleet.Sample(text, fmt.Sprintf(`configbundle_fleetbundle_%s{name=%q,namespace=%q}`, name, key.Name, key.Namespace))
		}
		return out
	}
}

// TestPlacementFailuresRaiseEventsAndGauges: a member where the FleetBundle cannot be placed
// (Conflict in one, NamespaceMissing in another) raises one Warning Event on the FleetBundle
// naming it, and a Normal one when it recovers; the FleetBundle's gauges follow its status and
// go with it.
func TestPlacementFailuresRaiseEventsAndGauges(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	joined(t, "m1", "m2", "m3")
	const key, ns = "e2e.placement/events", "placement-events"
	ensureNamespace(g, "m1", ns)
	ensureNamespace(g, "m2", ns)
	foreign := &configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "mine"}}
	g.Expect(fl.Member("m2").Client.Create(ctx, foreign)).To(Succeed())
	for _, m := range []string{"m1", "m2", "m3"} {
		selectMember(t, m, key, "yes")
	}
	fb := newFleetBundle(t, ns, "web", key, configbundlev1alpha1.ConfigBundleSpec{Message: "placed"})
	fbKey := types.NamespacedName{Namespace: ns, Name: "web"}
	failing := fleetBundleEvents(fb, hubv1alpha1.ClusterFailingEvent)
	recovered := fleetBundleEvents(fb, hubv1alpha1.ClusterRecoveredEvent)

	g.Eventually(failing).WithTimeout(timeout).WithPolling(interval).Should(ContainElements(
		memberEvent(corev1.EventTypeWarning, hubv1alpha1.ClusterFailingEvent, "m2", hubv1alpha1.ConflictReason),
		memberEvent(corev1.EventTypeWarning, hubv1alpha1.ClusterFailingEvent, "m3", hubv1alpha1.NamespaceMissingReason)))
	g.Eventually(fleetBundleGauges(fbKey)).WithTimeout(timeout).WithPolling(interval).Should(Equal([3]float64{3, 1, 2}))
	// One Event per transition, not per reconcile: the retries of NamespaceMissing and the
	// status writes add none.
	g.Consistently(func(g Gomega) []eventsv1.Event { return ofMember("m3", failing(g)) }).WithTimeout(quietPeriod).WithPolling(interval).Should(
		ConsistOf(HaveField("Series", BeNil())))
	g.Expect(ofMember("m2", failing(g))).To(HaveLen(1))
	g.Expect(recovered(g)).To(BeEmpty())

	// The conflict goes (with its ConfigMap, as the garbage collector these members lack would
	// remove it): m2 recovers, m3 still fails.
	// Between the two deletions the placed bundle may find the foreign bundle's ConfigMap still
	// there (as it would before the garbage collector removes it): a ConfigMapConflict of its own,
	// reported as such, from which it then recovers.
	g.Expect(fl.Member("m2").Client.Delete(ctx, foreign)).To(Succeed())
	g.Expect(fl.Member("m2").Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})).To(Succeed())
	g.Eventually(recovered).WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(
		memberEvent(corev1.EventTypeNormal, hubv1alpha1.ClusterRecoveredEvent, "m2", "")))
	g.Eventually(fleetBundleGauges(fbKey)).WithTimeout(timeout).WithPolling(interval).Should(Equal([3]float64{3, 2, 1}))

	// The namespace comes: m3 recovers, and nothing fails.
	ensureNamespace(g, "m3", ns)
	g.Eventually(recovered).WithTimeout(timeout).WithPolling(interval).Should(ContainElement(
		memberEvent(corev1.EventTypeNormal, hubv1alpha1.ClusterRecoveredEvent, "m3", hubv1alpha1.NamespaceMissingReason)))
	g.Eventually(fleetBundleGauges(fbKey)).WithTimeout(timeout).WithPolling(interval).Should(Equal([3]float64{3, 3, 0}))
	g.Expect(ofMember("m3", failing(g))).To(HaveLen(1))
	g.Expect(failing(g)).To(HaveEach(HaveField("Series", BeNil())), "no failure reported twice")
	for _, e := range append(failing(g), recovered(g)...) {
		t.Logf("FleetBundle Event: %s %s (action %s): %s", e.Type, e.Reason, e.Action, e.Note)
	}

	// Gone: its series go with it.
	deleteFleetBundle(g, fb)
	g.Eventually(fleetBundleGauges(fbKey)).WithTimeout(timeout).WithPolling(interval).Should(Equal([3]float64{-1, -1, -1}))
	for _, m := range []string{"m1", "m2", "m3"} {
		g.Eventually(placed(m, fb)).WithTimeout(timeout).WithPolling(interval).Should(BeNil(), m)
		_ = fl.Member(m).Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})
	}
}

// TestPlacedBundleFailureRaisesEvent: a placed bundle that fails in its member (a ConfigMap of
// its name that the member's reconciler did not create: ConfigMapConflict) raises a Warning
// Event on the FleetBundle naming the member and the reason.
func TestPlacedBundleFailureRaisesEvent(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	joined(t, "m1")
	const key, ns = "e2e.placement/cmconflict", "placement-cmconflict"
	ensureNamespace(g, "m1", ns)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Data: map[string]string{"owner": "someone else"}}
	g.Expect(fl.Member("m1").Client.Create(ctx, cm)).To(Succeed())
	t.Cleanup(func() { _ = fl.Member("m1").Client.Delete(ctx, cm) })
	selectMember(t, "m1", key, "yes")
	fb := newFleetBundle(t, ns, "web", key, configbundlev1alpha1.ConfigBundleSpec{Message: "placed"})
	fbKey := types.NamespacedName{Namespace: ns, Name: "web"}
	g.Eventually(fleetBundleEvents(fb, hubv1alpha1.ClusterFailingEvent)).WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(
		memberEvent(corev1.EventTypeWarning, hubv1alpha1.ClusterFailingEvent, "m1", configbundlev1alpha1.ConfigMapConflictReason)))
	g.Eventually(fleetBundleGauges(fbKey)).WithTimeout(timeout).WithPolling(interval).Should(Equal([3]float64{1, 0, 1}))
}

// TestJoinRaisesNoWarningEvent: the routine steps of a join (connecting, a credential whose
// expiry is not known yet) are Normal Events on the MemberCluster; a join raises no Warning.
func TestJoinRaisesNoWarningEvent(t *testing.T) {
	g := NewWithT(t)
	joined(t, "m3")
	leave(g, "m3")
	rejoin(g, "m3")
	mc := fl.MemberCluster("m3")(g)
	ofThisMemberCluster := func(g Gomega) []eventsv1.Event {
		var out []eventsv1.Event
		for _, e := range fl.EventsOn("MemberCluster", "", "m3")(g) {
			if e.Regarding.UID == mc.UID {
				out = append(out, e)
			}
		}
		return out
	}
	g.Eventually(ofThisMemberCluster).WithTimeout(timeout).WithPolling(interval).Should(ContainElements(
		And(HaveField("Type", corev1.EventTypeNormal), HaveField("Reason", hubv1alpha1.ConnectingReason)),
		And(HaveField("Type", corev1.EventTypeNormal), HaveField("Reason", hubv1alpha1.ConnectedReason))))
	g.Consistently(ofThisMemberCluster).WithTimeout(quietPeriod).WithPolling(interval).ShouldNot(ContainElement(HaveField("Type", corev1.EventTypeWarning)))
	for _, e := range ofThisMemberCluster(g) {
		t.Logf("join Event: %s %s: %s", e.Type, e.Reason, e.Note)
	}
}
