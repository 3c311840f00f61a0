package placement_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// What a FleetBundle's failures in its members raise: Events on the FleetBundle, one per
// transition, and its gauges.

// memberEvents polls the Events of reason on a FleetBundle.
func memberEvents(fb *hubv1alpha1.FleetBundle, reason string) func(Gomega) []eventsv1.Event {
	return func(g Gomega) []eventsv1.Event {
		list := &eventsv1.EventList{}
		g.Expect(hub.List(context.Background(), list, client.InNamespace(fb.Namespace))).To(Succeed())
		var out []eventsv1.Event
		for _, e := range list.Items {
			if e.Regarding.Kind == "FleetBundle" && e.Regarding.Name == fb.Name && e.Reason == reason {
				out = append(out, e)
			}
		}
		return out
	}
}

// aboutMember matches an Event of eventType and reason related to a member's MemberCluster, its
// note naming the member and what says.
func aboutMember(eventType, reason, member, says string) OmegaMatcher {
	return And(HaveField("Type", eventType), HaveField("Reason", reason),
		HaveField("Related", And(Not(BeNil()), HaveField("Kind", "MemberCluster"), HaveField("Name", member))),
		HaveField("Note", And(ContainSubstring("Member "+member), ContainSubstring(says))))
}

// relatedTo keeps the Events related to one member.
func relatedTo(member string, events []eventsv1.Event) []eventsv1.Event {
	var out []eventsv1.Event
	for _, e := range events {
		if e.Related != nil && e.Related.Name == member {
			out = append(out, e)
		}
	}
	return out
}

// fleetBundleGauges reads a FleetBundle's selected, ready and failed gauges from
// controller-runtime's registry (-1 for a series it lacks).
func fleetBundleGauges(fb *hubv1alpha1.FleetBundle) func(Gomega) [3]float64 {
	return func(g Gomega) [3]float64 {
		families, err := ctrlmetrics.Registry.Gather()
		g.Expect(err).NotTo(HaveOccurred())
		out := [3]float64{-1, -1, -1}
		for i, name := range []string{"selected", "ready", "failed"} {
			for _, f := range families {
				if f.GetName() != "configbundle_fleetbundle_"+name {
					continue
				}
				for _, m := range f.GetMetric() {
					labels := map[string]string{}
					for _, l := range m.GetLabel() {
						labels[l.GetName()] = l.GetValue()
					}
					if labels["namespace"] == fb.Namespace && labels["name"] == fb.Name {
						out[i] = m.GetGauge().GetValue()
					}
				}
			}
		}
		return out
	}
}

// TestPlacementFailuresRaiseEventsAndGauges: a member where the FleetBundle cannot be placed
// (Conflict in one, NamespaceMissing in another) raises one Warning Event on the FleetBundle
// naming it, not one per retry, and a Normal one when it recovers; the FleetBundle's gauges
// follow its status and go with it.
func TestPlacementFailuresRaiseEventsAndGauges(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key = "test.placement/events"
	ns := newNamespace(t, memberA, memberB)
	foreign := &configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "mine"}}
	g.Expect(memberClients[memberB].Create(ctx, foreign)).To(Succeed())
	for _, m := range []string{memberA, memberB, memberC} {
		labelMember(t, m, key, "yes")
	}
	fb := newFleetBundle(t, ns, selecting(key), "placed")
	failing := memberEvents(fb, hubv1alpha1.ClusterFailingEvent)
	recovered := memberEvents(fb, hubv1alpha1.ClusterRecoveredEvent)

	g.Eventually(failing).WithTimeout(timeout).WithPolling(interval).Should(ContainElements(
		aboutMember(corev1.EventTypeWarning, hubv1alpha1.ClusterFailingEvent, memberB, hubv1alpha1.ConflictReason),
		aboutMember(corev1.EventTypeWarning, hubv1alpha1.ClusterFailingEvent, memberC, hubv1alpha1.NamespaceMissingReason)))
	g.Eventually(fleetBundleGauges(fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal([3]float64{3, 1, 2}))
	// One Event per transition, not per reconcile: the retries of NamespaceMissing and the status
	// writes add none.
	g.Consistently(func(g Gomega) []eventsv1.Event { return relatedTo(memberC, failing(g)) }).WithTimeout(quietPeriod).WithPolling(interval).Should(
		ConsistOf(HaveField("Series", BeNil())))
	g.Expect(relatedTo(memberB, failing(g))).To(HaveLen(1))
	g.Expect(recovered(g)).To(BeEmpty())

	// The conflict goes: member-b recovers, member-c still fails.
	g.Expect(memberClients[memberB].Get(ctx, client.ObjectKeyFromObject(foreign), foreign)).To(Succeed())
	deleteWithConfigMap(g, memberB, foreign)
	g.Eventually(recovered).WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(
		aboutMember(corev1.EventTypeNormal, hubv1alpha1.ClusterRecoveredEvent, memberB, "")))
	g.Eventually(fleetBundleGauges(fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal([3]float64{3, 2, 1}))

	// The namespace comes: member-c recovers, and nothing fails.
	createNamespace(t, memberC, ns)
	g.Eventually(recovered).WithTimeout(timeout).WithPolling(interval).Should(ContainElement(
		aboutMember(corev1.EventTypeNormal, hubv1alpha1.ClusterRecoveredEvent, memberC, hubv1alpha1.NamespaceMissingReason)))
	g.Eventually(fleetBundleGauges(fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal([3]float64{3, 3, 0}))
	g.Expect(relatedTo(memberC, failing(g))).To(HaveLen(1))
	g.Expect(failing(g)).To(HaveEach(HaveField("Series", BeNil())), "no failure reported twice")

	// Gone: its series go with it.
	deleteFleetBundle(g, fb)
	g.Eventually(fleetBundleGauges(fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal([3]float64{-1, -1, -1}))
}

// TestPlacedBundleFailureRaisesEvent: a placed bundle that fails in its member (a ConfigMap of
// its name that the member's reconciler did not create: ConfigMapConflict) raises a Warning
// Event on the FleetBundle naming the member and the reason, and counts in its gauges.
func TestPlacedBundleFailureRaisesEvent(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key = "test.placement/cmconflict"
	ns := newNamespace(t, memberA)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Data: map[string]string{"owner": "someone else"}}
	g.Expect(memberClients[memberA].Create(ctx, cm)).To(Succeed())
	labelMember(t, memberA, key, "yes")
	fb := newFleetBundle(t, ns, selecting(key), "placed")
	g.Eventually(memberEvents(fb, hubv1alpha1.ClusterFailingEvent)).WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(
		aboutMember(corev1.EventTypeWarning, hubv1alpha1.ClusterFailingEvent, memberA, configbundlev1alpha1.ConfigMapConflictReason)))
	g.Eventually(fleetBundleGauges(fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal([3]float64{1, 0, 1}))
}
