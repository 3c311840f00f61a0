package placement_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// approver is the approvedBy of this suite's approvals (its hub runs no approval policy).
const approver = "test-approver"

// awaitingApproval matches the status of a rollout of revision waiting for an approval for stage.
func awaitingApproval(revision int64, stage string) OmegaMatcher {
	return And(fleet.RolloutPhase(hubv1alpha1.RolloutAwaitingApproval), fleet.RolloutRevisions(1, revision),
		HaveField("Rollout.Stage", stage), HaveField("Rollout.Message", ContainSubstring("requires approval")),
		fleet.RolloutCondition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.AwaitingApprovalReason),
		fleet.RolloutCondition(hubv1alpha1.ProgressingCondition, metav1.ConditionTrue, hubv1alpha1.AwaitingApprovalReason),
		fleet.RolloutCondition(hubv1alpha1.StalledCondition, metav1.ConditionFalse, hubv1alpha1.NotStalledReason))
}

// approve adds the approval of revision for stage to fb's spec.rollout.approvals.
func approve(g Gomega, fb *hubv1alpha1.FleetBundle, revision int64, stage string) {
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) {
		s.Rollout.Approvals = append(s.Rollout.Approvals, hubv1alpha1.RolloutApproval{Revision: revision, Stage: stage, ApprovedBy: approver})
	})
}

// TestRolloutWaitsForApproval: the stage rest requires approval. A new revision reaches the
// canary, then waits at rest (AwaitingApproval: Ready=False, Progressing=True, kstatus
// InProgress, one Normal Event) and no member of rest gets it; approved, it goes on to every
// member (an Event names the approver); the next revision waits again.
func TestRolloutWaitsForApproval(t *testing.T) {
	g := NewWithT(t)
	const key = "test.rollout/approval"
	ns, ring := rolloutFixture(t, key)
	fb := stagedAtV1(t, ns, key, canaryThenRest(ring, func(s *hubv1alpha1.RolloutStrategy) { s.Stages[1].RequireApproval = true }))

	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Template.Spec.Message = "v2" })
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(awaitingApproval(2, "rest"))
	g.Expect(kstatusOf(fb)(g)).To(Equal(kstatus.InProgressStatus), "awaiting approval reads in progress, not failed")
	want := allHold(held(1, "v1"), rolloutMembers...)
	want[memberA] = held(2, "v2")
	g.Consistently(func(g Gomega) map[string]placedState {
		g.Expect(status(fb)(g)).To(awaitingApproval(2, "rest"))
		return holding(fb, rolloutMembers...)(g)
	}).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal(want), "rest waits for its approval")
	g.Expect(rolloutEvents(fb, hubv1alpha1.AwaitingApprovalEvent)(g)).To(ConsistOf(And(HaveField("Type", corev1.EventTypeNormal),
		HaveField("Note", And(ContainSubstring("Revision 2"), ContainSubstring("rest"))))), "one Event")

	approve(g, fb, 2, "rest")
	g.Eventually(holding(fb, rolloutMembers...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(allHold(held(2, "v2"), rolloutMembers...)))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(2, 3))
	g.Eventually(rolloutEvents(fb, hubv1alpha1.RolloutApprovedEvent)).WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(
		HaveField("Note", And(ContainSubstring("Revision 2"), ContainSubstring("rest"), ContainSubstring(approver)))))

	// An approval is for one revision: the next waits again.
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Template.Spec.Message = "v3" })
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(fleet.RolloutPhase(hubv1alpha1.RolloutAwaitingApproval),
		fleet.RolloutRevisions(2, 3), HaveField("Rollout.Stage", "rest")))
	g.Expect(holding(fb, memberB, memberC)(g)).To(Equal(allHold(held(2, "v2"), memberB, memberC)))
}
