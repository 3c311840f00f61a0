package placement_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// TestRolloutRevisionsWithinTheHistoryLimit: with revisionHistoryLimit 2, after five template
// changes rolled out, the FleetBundle keeps the revision in use and the two before it, each a
// ControllerRevision it controls, labelled as its own and holding that revision's template.
func TestRolloutRevisionsWithinTheHistoryLimit(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key = "test.rollout/history"
	members := []string{memberA, memberB}
	ns := newNamespace(t, members...)
	for _, m := range members {
		labelMember(t, m, key, "yes")
	}
	fb := newFleetBundle(t, ns, selecting(key), "v1")
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) {
		s.Rollout = &hubv1alpha1.RolloutStrategy{Stages: []hubv1alpha1.RolloutStage{{Name: "all", ClusterSelector: &metav1.LabelSelector{}}}}
		s.RevisionHistoryLimit = ptr.To[int32](2)
	})
	g.Eventually(holding(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(allHold(held(1, "v1"), members...)))
	for i := int64(2); i <= 6; i++ {
		msg := fmt.Sprintf("v%d", i)
		updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Template.Spec.Message = msg })
		g.Eventually(holding(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(allHold(held(i, msg), members...)))
	}
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(6, 2))

	got := &hubv1alpha1.FleetBundle{}
	g.Expect(hub.Get(ctx, client.ObjectKeyFromObject(fb), got)).To(Succeed())
	g.Eventually(func(g Gomega) []int64 {
		revs, err := fleet.Revisions(ctx, hub, fb)
		g.Expect(err).NotTo(HaveOccurred())
		var out []int64
		for _, r := range revs {
			out = append(out, r.Revision)
		}
		return out
	}).WithTimeout(timeout).WithPolling(interval).Should(Equal([]int64{4, 5, 6}), "the revision in use and the 2 before it")
	revs, err := fleet.Revisions(ctx, hub, fb)
	g.Expect(err).NotTo(HaveOccurred())
	for _, rev := range revs {
		g.Expect(rev.Name).To(Equal(fmt.Sprintf("web-%d", rev.Revision)))
		g.Expect(rev.Labels).To(HaveKeyWithValue(hubv1alpha1.FleetBundleLabel, ns+".web"))
		owner := metav1.GetControllerOf(&rev)
		g.Expect(owner).NotTo(BeNil(), "%s's controller", rev.Name)
		g.Expect(owner.Kind).To(Equal("FleetBundle"))
		g.Expect(owner.UID).To(Equal(got.UID))
		var tmpl hubv1alpha1.ConfigBundleTemplate
		g.Expect(json.Unmarshal(rev.Data.Raw, &tmpl)).To(Succeed(), string(rev.Data.Raw))
		g.Expect(tmpl.Spec.Message).To(Equal(fmt.Sprintf("v%d", rev.Revision)), "%s's template", rev.Name)
	}
}

// TestRolloutPausedChangesNothing: while spec.rollout.paused is true, a template change reaches
// no member (Paused, Progressing=False RolloutPaused); resumed, it rolls out.
func TestRolloutPausedChangesNothing(t *testing.T) {
	g := NewWithT(t)
	const key = "test.rollout/paused"
	ns, ring := rolloutFixture(t, key)
	fb := stagedAtV1(t, ns, key, canaryThenRest(ring))

	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Rollout.Paused = true })
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Template.Spec.Message = "v2" })
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.RolloutPhase(hubv1alpha1.RolloutPaused), fleet.RolloutRevisions(1, 2),
		fleet.RolloutCondition(hubv1alpha1.ProgressingCondition, metav1.ConditionFalse, hubv1alpha1.RolloutPausedReason)))
	g.Consistently(holding(fb, rolloutMembers...)).WithTimeout(quietPeriod).WithPolling(interval).Should(
		Equal(allHold(held(1, "v1"), rolloutMembers...)), "paused: nothing changes")

	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Rollout.Paused = false })
	g.Eventually(holding(fb, rolloutMembers...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(allHold(held(2, "v2"), rolloutMembers...)))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(2, 3))
}
