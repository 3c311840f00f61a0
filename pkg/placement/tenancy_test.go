package placement_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/pkg/rollout"
)

// newClusterSet creates a ClusterSet selecting the members labelled key=yes, named after the
// test, and deletes it when the test ends.
func newClusterSet(t *testing.T, key string) string {
	t.Helper()
	name := strings.NewReplacer("/", "-", "_", "-", ".", "-").Replace(strings.ToLower(t.Name()))
	name = name[:min(50, len(name))] + "-" + strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(key, "test.")), "/", "-")
	name = strings.ReplaceAll(name, ".", "-")
	set := fleet.NewClusterSet(name, map[string]string{key: "yes"})
	if err := hub.Create(context.Background(), set); err != nil {
		t.Fatalf("creating ClusterSet %s: %v", name, err)
	}
	t.Cleanup(func() { _ = client.IgnoreNotFound(hub.Delete(context.Background(), set)) })
	return name
}

// unbind deletes the binding of ClusterSet set into hub namespace ns.
func unbind(g Gomega, ns, set string) {
	g.Expect(hub.Delete(context.Background(), fleet.NewClusterSetBinding(ns, set))).To(Succeed())
}

// pauseMember sets a member's spec.paused; a member paused is resumed when the test ends.
func pauseMember(t *testing.T, member string, paused bool) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mc := &hubv1alpha1.MemberCluster{}
		if err := hub.Get(context.Background(), client.ObjectKey{Name: member}, mc); err != nil {
			return err
		}
		mc.Spec.Paused = paused
		return hub.Update(context.Background(), mc)
	})
	if err != nil {
		t.Fatalf("setting spec.paused of MemberCluster %s: %v", member, err)
	}
	if paused {
		t.Cleanup(func() { pauseMember(t, member, false) })
	}
}

// readyMessage polls the message of a FleetBundle's Ready condition.
func readyMessage(fb *hubv1alpha1.FleetBundle) func(Gomega) string {
	return func(g Gomega) string {
		c := meta.FindStatusCondition(status(fb)(g).Conditions, hubv1alpha1.ReadyCondition)
		g.Expect(c).NotTo(BeNil())
		return c.Message
	}
}

// TestPlacementNeedsABoundClusterSet: a FleetBundle in a namespace that binds no ClusterSet
// places nothing and says so (NoClusterSetBinding); binding a set places it; removing the
// binding removes what it placed.
func TestPlacementNeedsABoundClusterSet(t *testing.T) {
	g := NewWithT(t)
	const key = "test.placement/unbound"
	ns := newUnboundNamespace(t, memberA)
	labelMember(t, memberA, key, "yes")
	fb := newFleetBundle(t, ns, selecting(key), "v1")
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.NoClusterSetBindingReason), haveCounts(hubv1alpha1.PlacementCounts{})))
	g.Expect(readyMessage(fb)(g)).To(And(ContainSubstring("No ClusterSet is bound to namespace "+ns), ContainSubstring(hubv1alpha1.ClusterSetBindPermission)))
	g.Consistently(placed(memberA, fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(BeNil(), "nothing is placed without a bound set")

	// A binding of a set that does not exist adds nothing, and the message says so.
	bind(t, ns, "test-placement-missing-set")
	g.Eventually(readyMessage(fb)).WithTimeout(timeout).WithPolling(interval).Should(ContainSubstring("test-placement-missing-set name no existing ClusterSet"))

	bind(t, ns, fleet.GlobalClusterSet)
	g.Eventually(message(memberA, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v1"))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), haveCounts(hubv1alpha1.PlacementCounts{Selected: 1, Applied: 1, Ready: 1, Updated: 1})))

	unbind(g, ns, fleet.GlobalClusterSet)
	g.Eventually(placed(memberA, fb)).WithTimeout(timeout).WithPolling(interval).Should(BeNil(), "the binding's removal removes what it placed")
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.NoClusterSetBindingReason), haveCounts(hubv1alpha1.PlacementCounts{})))
}

// TestPlacementWithinClusterSets: a FleetBundle selecting every member ({}) in a namespace bound
// to a set of one member is placed there only; binding a second set extends it;
// spec.clusterSets narrows it back; relabelling the member out of its set removes its bundle.
func TestPlacementWithinClusterSets(t *testing.T) {
	g := NewWithT(t)
	const key = "test.placement/set"
	ns := newUnboundNamespace(t, memberA, memberB, memberC)
	labelMember(t, memberB, key, "yes")
	set := newClusterSet(t, key)
	bind(t, ns, set)
	fb := newFleetBundle(t, ns, &metav1.LabelSelector{}, "v1")

	g.Eventually(message(memberB, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v1"))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), haveCounts(hubv1alpha1.PlacementCounts{Selected: 1, Applied: 1, Ready: 1, Updated: 1})))
	for _, m := range []string{memberA, memberC} {
		g.Consistently(placed(m, fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(BeNil(), "%s is in no bound set", m)
	}

	bind(t, ns, fleet.GlobalClusterSet)
	for _, m := range []string{memberA, memberC} {
		g.Eventually(message(m, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v1"), "a second set extends it to %s", m)
	}
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(haveCounts(hubv1alpha1.PlacementCounts{Selected: 3, Applied: 3, Ready: 3, Updated: 3}))

	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.ClusterSets = []string{set} })
	for _, m := range []string{memberA, memberC} {
		g.Eventually(placed(m, fb)).WithTimeout(timeout).WithPolling(interval).Should(BeNil(), "spec.clusterSets narrows it: %s", m)
	}
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), haveCounts(hubv1alpha1.PlacementCounts{Selected: 1, Applied: 1, Ready: 1, Updated: 1})))
	g.Expect(message(memberB, fb)(g)).To(Equal("v1"))

	labelMember(t, memberB, key, "")
	g.Eventually(placed(memberB, fb)).WithTimeout(timeout).WithPolling(interval).Should(BeNil(), "relabelled out of its set")
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.NoClustersSelectedReason), haveCounts(hubv1alpha1.PlacementCounts{})))

	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.ClusterSets = []string{"test-placement-not-bound"} })
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.FleetBundleReady(hubv1alpha1.NoClusterSetBindingReason))
	g.Expect(readyMessage(fb)(g)).To(ContainSubstring("None of the ClusterSets spec.clusterSets names (test-placement-not-bound)"))
}

// TestPausedMember: a paused member gets neither a template change nor a new FleetBundle, and
// is counted apart; drift of the bundle it holds is still healed; resumed, it is brought up to
// date.
func TestPausedMember(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key = "test.placement/paused"
	ns := newNamespace(t, memberA, memberB)
	labelMember(t, memberA, key, "yes")
	labelMember(t, memberB, key, "yes")
	fb := newFleetBundle(t, ns, selecting(key), "v1")
	for _, m := range []string{memberA, memberB} {
		g.Eventually(message(m, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v1"), m)
	}
	pauseMember(t, memberB, true)
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), haveCounts(hubv1alpha1.PlacementCounts{Selected: 2, Paused: 1, Applied: 1, Ready: 1, Updated: 1})))

	// A template change reaches member-a, not member-b.
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Template.Spec.Message = "v2" })
	g.Eventually(message(memberA, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v2"))
	g.Consistently(message(memberB, fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal("v1"), "a paused member keeps what it holds")

	// A new FleetBundle reaches member-a, not member-b.
	other := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}, Spec: hubv1alpha1.FleetBundleSpec{
		ClusterSelector: selecting(key), Template: hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "other"}}}}
	g.Expect(hub.Create(ctx, other)).To(Succeed())
	t.Cleanup(func() { deleteFleetBundle(NewWithT(t), other) })
	g.Eventually(message(memberA, other)).WithTimeout(timeout).WithPolling(interval).Should(Equal("other"))
	g.Eventually(status(other)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), haveCounts(hubv1alpha1.PlacementCounts{Selected: 2, Paused: 1, Applied: 1, Ready: 1, Updated: 1})))
	g.Expect(placed(memberB, other)(g)).To(BeNil(), "a new FleetBundle does not reach a paused member")

	// Drift of what member-b holds is healed, to what it holds (v1).
	b := placed(memberB, fb)(g)
	b.Spec.Message = "edited"
	g.Expect(memberClients[memberB].Update(ctx, b)).To(Succeed())
	g.Eventually(message(memberB, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v1"), "what a paused member holds stays true")
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Heals", BeEquivalentTo(1)))

	// Resumed, member-b is brought up to date.
	pauseMember(t, memberB, false)
	g.Eventually(message(memberB, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v2"))
	g.Eventually(message(memberB, other)).WithTimeout(timeout).WithPolling(interval).Should(Equal("other"))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), haveCounts(hubv1alpha1.PlacementCounts{Selected: 2, Applied: 2, Ready: 2, Updated: 2})))
}

// TestPausedMemberKeepsWhatItHolds: a paused member's bundle is not removed when the member
// stops being selected nor when its FleetBundle is deleted (which does not wait for it); resumed,
// what it holds of a FleetBundle gone is removed.
func TestPausedMemberKeepsWhatItHolds(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key = "test.placement/keeps"
	ns := newNamespace(t, memberA, memberB)
	labelMember(t, memberA, key, "yes")
	labelMember(t, memberB, key, "yes")
	fb := newFleetBundle(t, ns, selecting(key), "v1")
	for _, m := range []string{memberA, memberB} {
		g.Eventually(message(m, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v1"), m)
	}
	pauseMember(t, memberB, true)
	labelMember(t, memberA, key, "")
	labelMember(t, memberB, key, "")
	g.Eventually(placed(memberA, fb)).WithTimeout(timeout).WithPolling(interval).Should(BeNil())
	g.Consistently(message(memberB, fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal("v1"), "no removal from a paused member")

	// Newer revisions beyond revisionHistoryLimit prune none that a paused member still holds,
	// unselected as it is: what it holds is still healed from it.
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) {
		s.RevisionHistoryLimit = ptr.To[int32](0)
		s.Template.Spec.Message = "v2"
	})
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Template.Spec.Message = "v3" })
	g.Eventually(func(g Gomega) []string {
		list := &appsv1.ControllerRevisionList{}
		g.Expect(hub.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		var names []string
		for _, r := range list.Items {
			names = append(names, r.Name)
		}
		return names
	}).WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(rollout.RevisionName(fb.Name, 1), rollout.RevisionName(fb.Name, 3)),
		"revision 2 pruned, revision 1 kept: the paused member holds it")
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b := &configbundlev1alpha1.ConfigBundle{}
		if err := memberClients[memberB].Get(ctx, client.ObjectKeyFromObject(fb), b); err != nil {
			return err
		}
		b.Spec.Message = "tampered"
		return memberClients[memberB].Update(ctx, b)
	})).To(Succeed())
	g.Eventually(message(memberB, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v1"), "healed from the revision it holds")

	deleteFleetBundle(g, fb)
	g.Consistently(message(memberB, fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal("v1"), "no removal from a paused member")

	pauseMember(t, memberB, false)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(memberClients[memberB].Get(ctx, client.ObjectKeyFromObject(fb), &configbundlev1alpha1.ConfigBundle{}))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "resumed, what it holds of a FleetBundle gone is removed")
}

// TestRolloutHeldByPausedCanary: a staged rollout whose canary stage has only a paused member
// holds there (Progressing in stage canary, naming the paused member, currentRevision unmoved)
// and the rest keep the old revision; spec.rollout.skipPausedStages lets it pass the stage and
// complete; resumed, the member gets the revision the rollout completed.
func TestRolloutHeldByPausedCanary(t *testing.T) {
	g := NewWithT(t)
	const key, ring = "test.placement/rollout-paused", "test.placement/rollout-paused-ring"
	ns := newNamespace(t, memberA, memberB)
	labelMember(t, memberA, key, "yes")
	labelMember(t, memberB, key, "yes")
	labelMember(t, memberA, ring, "canary")
	fb := newFleetBundle(t, ns, selecting(key), "v1")
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) {
		s.Rollout = &hubv1alpha1.RolloutStrategy{Stages: []hubv1alpha1.RolloutStage{{Name: "canary",
			ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{ring: "canary"}}, MaxConcurrency: ptr.To(intstr.FromInt32(1))}}}
	})
	for _, m := range []string{memberA, memberB} {
		g.Eventually(message(m, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v1"), m)
	}
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), HaveField("Rollout.Phase", hubv1alpha1.RolloutComplete)))

	pauseMember(t, memberA, true)
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Template.Spec.Message = "v2" })
	held := And(HaveField("Rollout.Phase", hubv1alpha1.RolloutProgressing), HaveField("Rollout.Stage", "canary"), fleet.RolloutRevisions(1, 2),
		HaveField("Rollout.Message", ContainSubstring("waiting for paused members "+memberA)),
		fleet.RolloutCondition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.ProgressingReason))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(held)
	g.Consistently(message(memberB, fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal("v1"), "the rest wait for the paused canary")
	g.Expect(status(fb)(g)).To(held)

	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Rollout.SkipPausedStages = true })
	g.Eventually(message(memberB, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v2"), "skipPausedStages passes the paused canary's stage")
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("Rollout.Phase", hubv1alpha1.RolloutComplete), HaveField("CurrentRevision", BeEquivalentTo(2)),
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), haveCounts(hubv1alpha1.PlacementCounts{Selected: 2, Paused: 1, Applied: 1, Ready: 1, Updated: 1})))
	g.Expect(message(memberA, fb)(g)).To(Equal("v1"), "the paused member keeps what it holds")

	pauseMember(t, memberA, false)
	g.Eventually(message(memberA, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v2"), "resumed, it gets the revision the rollout completed")
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), haveCounts(hubv1alpha1.PlacementCounts{Selected: 2, Applied: 2, Ready: 2, Updated: 2})))
}
