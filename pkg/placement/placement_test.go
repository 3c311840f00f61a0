package placement_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/pkg/fleetbundle"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// TestPlacementFollowsLabelsAndTemplate: a FleetBundle is placed in the members its selector
// selects and only there, with the template's metadata; a template change reaches every placed
// copy and is no heal; a label change moves the bundle.
func TestPlacementFollowsLabelsAndTemplate(t *testing.T) {
	g := NewWithT(t)
	const key = "test.placement/labels"
	ns := newNamespace(t, memberA, memberB, memberC)
	labelMember(t, memberA, key, "yes")
	labelMember(t, memberB, key, "yes")
	fb := newFleetBundle(t, ns, selecting(key), "v1")

	for _, m := range []string{memberA, memberB} {
		g.Eventually(message(m, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v1"), m)
	}
	b := placed(memberA, fb)(g)
	g.Expect(b.Labels).To(Equal(map[string]string{"team": "platform", hubv1alpha1.FleetBundleLabel: fleetbundle.LabelValue(client.ObjectKeyFromObject(fb))}))
	g.Expect(b.Annotations).To(And(HaveKeyWithValue("owner", "platform@example.com"), HaveKey(hubv1alpha1.FleetBundleUIDAnnotation)))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), haveCounts(hubv1alpha1.PlacementCounts{Selected: 2, Applied: 2, Ready: 2, Updated: 2}),
		HaveField("ObservedGeneration", BeEquivalentTo(1)), HaveField("FailedClusters", BeEmpty())))
	g.Consistently(placed(memberC, fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(BeNil(), "an unselected member gets nothing")

	// A template change updates every placed copy, its driftPolicy too, and heals nothing.
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) {
		s.Template.Spec.Message, s.Template.Spec.DriftPolicy = "v2", configbundlev1alpha1.DriftPolicyReport
	})
	for _, m := range []string{memberA, memberB} {
		g.Eventually(message(m, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v2"), m)
		g.Expect(placed(m, fb)(g).Spec.DriftPolicy).To(Equal(configbundlev1alpha1.DriftPolicyReport), m)
	}
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), HaveField("ObservedGeneration", BeEquivalentTo(2))))
	g.Consistently(status(fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(HaveField("Heals", BeZero()))
	g.Expect(healEvents(fb)(g)).To(BeEmpty())

	// member-b stops matching, member-c starts: the bundle moves.
	labelMember(t, memberB, key, "")
	labelMember(t, memberC, key, "yes")
	g.Eventually(placed(memberB, fb)).WithTimeout(timeout).WithPolling(interval).Should(BeNil())
	g.Eventually(message(memberC, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v2"))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), haveCounts(hubv1alpha1.PlacementCounts{Selected: 2, Applied: 2, Ready: 2, Updated: 2})))
	g.Expect(message(memberA, fb)(g)).To(Equal("v2"))
}

// TestPlacementRestoresEditedAndDeletedBundles: a placed bundle edited or deleted by hand is
// restored, counted in the FleetBundle's heals and announced by an Event naming the member.
func TestPlacementRestoresEditedAndDeletedBundles(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key = "test.placement/heal"
	ns := newNamespace(t, memberA)
	labelMember(t, memberA, key, "yes")
	fb := newFleetBundle(t, ns, selecting(key), "placed")
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.FleetBundleReady(hubv1alpha1.AllReadyReason))

	b := placed(memberA, fb)(g)
	b.Spec.Message = "edited"
	g.Expect(memberClients[memberA].Update(ctx, b)).To(Succeed())
	g.Eventually(message(memberA, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("placed"))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Heals", BeEquivalentTo(1)))

	deleteWithConfigMap(g, memberA, placed(memberA, fb)(g))
	g.Eventually(placed(memberA, fb)).WithTimeout(timeout).WithPolling(interval).Should(
		And(Not(BeNil()), WithTransform(func(b *configbundlev1alpha1.ConfigBundle) types.UID { return b.UID }, Not(Equal(b.UID)))))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("Heals", BeEquivalentTo(2)), fleet.FleetBundleReady(hubv1alpha1.AllReadyReason)))
	g.Eventually(healEvents(fb)).WithTimeout(timeout).WithPolling(interval).Should(ContainElements(
		And(ContainSubstring(memberA), ContainSubstring("deleted")),
		And(ContainSubstring(memberA), ContainSubstring("spec"))))
}

// TestDeletingFleetBundleRemovesWhatItPlaced: a FleetBundle carries the placement finalizer;
// deleting it removes its bundles from every member, and it goes only once they are gone.
func TestDeletingFleetBundleRemovesWhatItPlaced(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key, hold = "test.placement/delete", "test.configbundle.dev/hold"
	ns := newNamespace(t, memberA, memberB)
	labelMember(t, memberA, key, "yes")
	labelMember(t, memberB, key, "yes")
	fb := newFleetBundle(t, ns, selecting(key), "v1")
	for _, m := range []string{memberA, memberB} {
		g.Eventually(message(m, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v1"), m)
	}
	got := &hubv1alpha1.FleetBundle{}
	g.Expect(hub.Get(ctx, client.ObjectKeyFromObject(fb), got)).To(Succeed())
	g.Expect(got.Finalizers).To(ContainElement(hubv1alpha1.PlacementFinalizer))
	// A finalizer of the test's holds member-a's bundle after its deletion.
	setFinalizers(g, memberA, fb, []string{hold})

	g.Expect(hub.Delete(ctx, fb)).To(Succeed())
	g.Eventually(placed(memberB, fb)).WithTimeout(timeout).WithPolling(interval).Should(BeNil())
	g.Eventually(placed(memberA, fb)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("DeletionTimestamp", Not(BeNil())))
	g.Consistently(func() error { return hub.Get(ctx, client.ObjectKeyFromObject(fb), &hubv1alpha1.FleetBundle{}) }).
		WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed(), "the FleetBundle stays while a member holds its bundle")

	setFinalizers(g, memberA, fb, nil)
	deleteFleetBundle(g, fb)
	for _, m := range []string{memberA, memberB} {
		g.Expect(placed(m, fb)(g)).To(BeNil(), m)
	}
}

// TestPlacementConflictAndNamespaceMissing: a member's own bundle of the FleetBundle's name is
// left untouched and reported (Conflict) until it goes; a member without the namespace is
// reported (NamespaceMissing) until it has one; the status counts them as failed.
func TestPlacementConflictAndNamespaceMissing(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key = "test.placement/conflict"
	ns := newNamespace(t, memberA, memberB)
	foreign := &configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "mine"}}
	g.Expect(memberClients[memberB].Create(ctx, foreign)).To(Succeed())
	for _, m := range []string{memberA, memberB, memberC} {
		labelMember(t, m, key, "yes")
	}
	fb := newFleetBundle(t, ns, selecting(key), "placed")

	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.ClustersFailedReason),
		haveCounts(hubv1alpha1.PlacementCounts{Selected: 3, Applied: 1, Ready: 1, Failed: 2, Updated: 1}),
		HaveField("FailedClusters", ConsistOf(failedCluster(memberB, hubv1alpha1.ConflictReason), failedCluster(memberC, hubv1alpha1.NamespaceMissingReason)))))
	g.Consistently(placed(memberB, fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(And(
		HaveField("Spec.Message", "mine"), HaveField("Labels", BeEmpty())), "a foreign bundle is never changed")

	g.Expect(memberClients[memberB].Get(ctx, client.ObjectKeyFromObject(foreign), foreign)).To(Succeed())
	deleteWithConfigMap(g, memberB, foreign)
	createNamespace(t, memberC, ns)
	for _, m := range []string{memberA, memberB, memberC} {
		g.Eventually(message(m, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("placed"), m)
	}
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), HaveField("FailedClusters", BeEmpty()),
		haveCounts(hubv1alpha1.PlacementCounts{Selected: 3, Applied: 3, Ready: 3, Updated: 3})))
}

// TestPlacementInvalidSelector: a selector that passes admission but does not parse is
// reported, and nothing in any member changes until it is fixed.
func TestPlacementInvalidSelector(t *testing.T) {
	g := NewWithT(t)
	const key = "test.placement/invalid"
	ns := newNamespace(t, memberA)
	labelMember(t, memberA, key, "yes")
	fb := newFleetBundle(t, ns, selecting(key), "v1")
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.FleetBundleReady(hubv1alpha1.AllReadyReason))

	invalid := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpIn}}}
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.ClusterSelector, s.Template.Spec.Message = invalid, "v2" })
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.FleetBundleReady(hubv1alpha1.InvalidSelectorReason))
	g.Consistently(message(memberA, fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal("v1"), "an invalid selector removes and changes nothing")

	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.ClusterSelector = selecting(key) })
	g.Eventually(message(memberA, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v2"))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.FleetBundleReady(hubv1alpha1.AllReadyReason))
}

// TestPlacementNoClustersSelected: a selector that selects no member, or none at all, places
// nothing and says so.
func TestPlacementNoClustersSelected(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, memberA, memberB, memberC)
	fb := newFleetBundle(t, ns, selecting("test.placement/nobody"), "v1")
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.NoClustersSelectedReason), haveCounts(hubv1alpha1.PlacementCounts{})))

	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.ClusterSelector = nil })
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.NoClustersSelectedReason), HaveField("ObservedGeneration", BeEquivalentTo(2))))
	for _, m := range []string{memberA, memberB, memberC} {
		g.Expect(placed(m, fb)(g)).To(BeNil(), m)
	}
}

// TestPlacementCountsMembersNotReady: a selected member that is not Ready is a failed cluster
// with the provider's reason, and gets its bundle once it is Ready again.
func TestPlacementCountsMembersNotReady(t *testing.T) {
	g := NewWithT(t)
	const key = "test.placement/notready"
	ns := newNamespace(t, memberA, memberB)
	labelMember(t, memberA, key, "yes")
	members.Set(memberB, spokeprovider.State{Reason: hubv1alpha1.UnreachableReason, Message: "Probe failed"})
	t.Cleanup(func() { members.Set(memberB, connected()) })
	labelMember(t, memberB, key, "yes")
	fb := newFleetBundle(t, ns, selecting(key), "v1")

	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.ClustersFailedReason),
		haveCounts(hubv1alpha1.PlacementCounts{Selected: 2, Applied: 1, Ready: 1, Failed: 1, Updated: 1}),
		HaveField("FailedClusters", ConsistOf(And(failedCluster(memberB, hubv1alpha1.UnreachableReason), HaveField("Message", "Probe failed"))))))
	g.Consistently(placed(memberB, fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(BeNil(), "nothing is written to a member that is not Ready")

	members.Set(memberB, connected())
	g.Eventually(message(memberB, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v1"))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), haveCounts(hubv1alpha1.PlacementCounts{Selected: 2, Applied: 2, Ready: 2, Updated: 2})))
}

// TestPlacementCountsJoiningMembersNeitherFailedNorReady: a selected member the hub is only
// connecting to (as every member is right after a hub restart) has not failed: the FleetBundle is
// Progressing, with no failed cluster, until the member is connected and holds the bundle.
func TestPlacementCountsJoiningMembersNeitherFailedNorReady(t *testing.T) {
	g := NewWithT(t)
	const key = "test.placement/joining"
	ns := newNamespace(t, memberA, memberB)
	labelMember(t, memberA, key, "yes")
	members.Set(memberB, spokeprovider.State{Reason: hubv1alpha1.ConnectingReason, Message: "Connecting to the member"})
	t.Cleanup(func() { members.Set(memberB, connected()) })
	labelMember(t, memberB, key, "yes")
	fb := newFleetBundle(t, ns, selecting(key), "v1")

	joining := And(fleet.FleetBundleReady(hubv1alpha1.ProgressingReason),
		haveCounts(hubv1alpha1.PlacementCounts{Selected: 2, Applied: 1, Ready: 1, Updated: 1}), HaveField("FailedClusters", BeEmpty()))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(joining)
	g.Consistently(status(fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(joining, "a member joining never counts as failed")

	members.Set(memberB, connected())
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(fleet.FleetBundleReady(hubv1alpha1.AllReadyReason),
		haveCounts(hubv1alpha1.PlacementCounts{Selected: 2, Applied: 2, Ready: 2, Updated: 2})))
}
