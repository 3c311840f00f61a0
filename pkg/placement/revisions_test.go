package placement_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/pkg/rollout"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// A FleetBundle's revisions: kept while a member holds them, numbered once.

// revisionNumbers polls the numbers of a FleetBundle's ControllerRevisions.
func revisionNumbers(fb *hubv1alpha1.FleetBundle) func(Gomega) []int64 {
	return func(g Gomega) []int64 {
		revs, err := fleet.Revisions(context.Background(), hub, fb)
		g.Expect(err).NotTo(HaveOccurred())
		out := []int64{}
		for _, r := range revs {
			out = append(out, r.Revision)
		}
		return out
	}
}

// tamper sets the message of the bundle of a FleetBundle in a member.
func tamper(g Gomega, member string, fb *hubv1alpha1.FleetBundle, msg string) {
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b := &configbundlev1alpha1.ConfigBundle{}
		if err := memberClients[member].Get(context.Background(), client.ObjectKeyFromObject(fb), b); err != nil {
			return err
		}
		b.Spec.Message = msg
		return memberClients[member].Update(context.Background(), b)
	})).To(Succeed())
}

// TestRevisionHeldByAPausedMemberAway: with revisionHistoryLimit 0, the revision a paused member
// holds is kept through a rollout while the member cannot be reached (status.heldRevisions
// records it); back, its tampered bundle and ConfigMap are healed from it. If that revision is
// deleted by hand, the member is failed RevisionMissing, never counted Ready.
func TestRevisionHeldByAPausedMemberAway(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key = "test.revisions/held"
	members2 := []string{memberA, memberB}
	ns := newNamespace(t, members2...)
	for _, m := range members2 {
		labelMember(t, m, key, "yes")
	}
	fb := newFleetBundle(t, ns, selecting(key), "v1")
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.RevisionHistoryLimit = ptr.To[int32](0) })
	g.Eventually(holding(fb, members2...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(allHold(held(1, "v1"), members2...)))

	pauseMember(t, memberB, true)
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Clusters.Paused", BeEquivalentTo(1)))
	members.Set(memberB, spokeprovider.State{Reason: hubv1alpha1.UnreachableReason, Message: "Probe failed"})
	t.Cleanup(func() { members.Set(memberB, connected()) })
	for _, msg := range []string{"v2", "v3"} {
		updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Template.Spec.Message = msg })
		g.Eventually(message(memberA, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal(msg))
	}
	g.Eventually(revisionNumbers(fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal([]int64{1, 3}),
		"revision 2 pruned; revision 1 kept: the paused member away holds it")
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("HeldRevisions", Equal([]int64{1, 3})), HaveField("ObservedRevision", BeEquivalentTo(3))))
	g.Consistently(revisionNumbers(fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal([]int64{1, 3}))

	members.Set(memberB, connected())
	g.Eventually(holding(fb, memberB)).WithTimeout(timeout).WithPolling(interval).Should(Equal(allHold(held(1, "v1"), memberB)))
	tamper(g, memberB, fb, "tampered")
	g.Eventually(holding(fb, memberB)).WithTimeout(timeout).WithPolling(interval).Should(Equal(allHold(held(1, "v1"), memberB)),
		"the paused member's bundle and ConfigMap healed from the revision it holds")
	g.Eventually(healEvents(fb)).WithTimeout(timeout).WithPolling(interval).Should(ContainElement(ContainSubstring("Member " + memberB)))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.FleetBundleReady(hubv1alpha1.AllReadyReason))

	// The held revision deleted by hand: nothing says what the member should hold.
	g.Expect(hub.Delete(ctx, &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rollout.RevisionName(fb.Name, 1)}})).To(Succeed())
	tamper(g, memberB, fb, "tampered again")
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.ClustersFailedReason),
		HaveField("FailedClusters", ConsistOf(failedCluster(memberB, hubv1alpha1.RevisionMissingReason))),
		haveCounts(hubv1alpha1.PlacementCounts{Selected: 2, Paused: 1, Applied: 1, Ready: 1, Updated: 1, Failed: 1})))

	pauseMember(t, memberB, false)
	g.Eventually(holding(fb, memberB)).WithTimeout(timeout).WithPolling(interval).Should(Equal(allHold(held(3, "v3"), memberB)),
		"resumed, it gets the current revision")
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), HaveField("HeldRevisions", Equal([]int64{3}))))
	g.Eventually(revisionNumbers(fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal([]int64{3}))
}

// TestRevisionNumbersNeverRepeat: a revision abandoned before it completed (its template undone
// while the rollout is paused) and then pruned (revisionHistoryLimit 0) keeps its number: the
// next template gets the number above it, recorded in status.observedRevision.
func TestRevisionNumbersNeverRepeat(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	fb := newFleetBundle(t, ns, selecting("test.revisions/nobody"), "v1")
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutRevisions(1, 1))
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) {
		s.RevisionHistoryLimit = ptr.To[int32](0)
		s.Rollout = &hubv1alpha1.RolloutStrategy{Paused: true, Stages: []hubv1alpha1.RolloutStage{{Name: "all", ClusterSelector: &metav1.LabelSelector{}}}}
	})
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Template.Spec.Message = "v2" })
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(fleet.RolloutRevisions(1, 2), HaveField("ObservedRevision", BeEquivalentTo(2))))

	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Template.Spec.Message = "v1" }) // an undo
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutRevisions(1, 1))
	g.Eventually(revisionNumbers(fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal([]int64{1}), "revision 2 pruned")

	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Template.Spec.Message = "v3" })
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(fleet.RolloutRevisions(1, 3), HaveField("ObservedRevision", BeEquivalentTo(3))))
	g.Eventually(revisionNumbers(fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal([]int64{1, 3}), "never a second revision 2")
}
