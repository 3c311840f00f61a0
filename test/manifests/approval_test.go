package manifests

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// editApprovals changes the approvals of FleetBundle key with edit, as the client c, again on a
// conflict, and returns the API server's answer.
func editApprovals(c client.Client, key client.ObjectKey, edit func([]hubv1alpha1.RolloutApproval) []hubv1alpha1.RolloutApproval) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fb := &hubv1alpha1.FleetBundle{}
		if err := c.Get(context.Background(), key, fb); err != nil {
			return err
		}
		fb.Spec.Rollout.Approvals = edit(fb.Spec.Rollout.Approvals)
		return c.Update(context.Background(), fb)
	})
}

// adding returns an edit that adds the approval of revision 1 for stage prod by approvedBy.
func adding(approvedBy string) func([]hubv1alpha1.RolloutApproval) []hubv1alpha1.RolloutApproval {
	return func(as []hubv1alpha1.RolloutApproval) []hubv1alpha1.RolloutApproval {
		return append(as, hubv1alpha1.RolloutApproval{Revision: 1, Stage: "prod", ApprovedBy: approvedBy})
	}
}

// TestApprovalPolicy installs config/default (but the Deployment) on a hub cluster and checks,
// on the real API server's RBAC and admission, that approvals cannot be forged: a user with
// configbundle-hub-fleetbundle-editor edits a FleetBundle but its approval is refused (it lacks
// approve on fleetbundles); a user with configbundle-hub-rollout-approver approves, but only in
// its own name; an approval cannot be changed, nor removed while it is of updateRevision but
// together with its stage; lifting a stage's requireApproval, or approving held removals, needs
// approve too.
func TestApprovalPolicy(t *testing.T) {
	g := NewWithT(t)
	cp := controlPlane(t, "hub")
	admin := adminClient(t, cp)
	ctx := t.Context()
	objs := render(t, "default")
	installPrerequisites(t, admin, objs)
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			g.Expect(apply(ctx, admin, u)).To(Succeed(), id(u))
		}
	}
	const ns, editor, approver = "approval-a", "approval-editor", "approval-approver"
	g.Expect(fleet.EnsureNamespace(ctx, admin, ns)).To(Succeed())
	for user, role := range map[string]string{editor: hubv1alpha1.FleetBundleEditorRole, approver: hubv1alpha1.RolloutApproverRole} {
		g.Expect(client.IgnoreAlreadyExists(admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}))).To(Succeed())
	}
	fb := fleet.NewFleetBundle(ns, "web", map[string]string{"test.approval": "nobody"},
		configbundlev1alpha1.ConfigBundleSpec{Message: "v1"})
	fb.Spec.Rollout = &hubv1alpha1.RolloutStrategy{Stages: []hubv1alpha1.RolloutStage{{Name: "prod", ClusterSelector: &metav1.LabelSelector{}, RequireApproval: true}}}
	g.Expect(client.IgnoreAlreadyExists(admin.Create(ctx, fb))).To(Succeed(), "no approval: the policy does not look")
	key := client.ObjectKeyFromObject(fb)
	asEditor, asApprover := impersonating(t, cp.Config, editor), impersonating(t, cp.Config, approver)

	// The editor edits the FleetBundle (once RBAC reaches the authorizer), but cannot approve it,
	// even in its own name: the policy names the verb and the approver's role.
	g.Eventually(func() error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got := &hubv1alpha1.FleetBundle{}
			if err := asEditor.Get(ctx, key, got); err != nil {
				return err
			}
			got.Spec.Template.Spec.Message = "v2"
			return asEditor.Update(ctx, got)
		})
	}).WithTimeout(establishTimeout).WithPolling(interval).Should(Succeed(), "the editor edits the template")
	var refusal error
	g.Eventually(func() error {
		refusal = editApprovals(asEditor, key, adding(editor))
		return refusal
	}).WithTimeout(establishTimeout).WithPolling(interval).Should(HaveOccurred(), "the approval policy is in force")
	g.Expect(refusal.Error()).To(And(ContainSubstring(hubv1alpha1.ApprovalPolicyName), ContainSubstring("needs "+hubv1alpha1.ApproveVerb+" on fleetbundles"),
		ContainSubstring(hubv1alpha1.RolloutApproverRole), ContainSubstring(editor)))

	// The approver cannot approve in another's name; in its own, it can.
	g.Eventually(func() error { return asApprover.Get(ctx, key, &hubv1alpha1.FleetBundle{}) }).
		WithTimeout(establishTimeout).WithPolling(interval).Should(Succeed(), "RBAC reaches the authorizer")
	err := editApprovals(asApprover, key, adding(editor))
	g.Expect(err).To(MatchError(And(ContainSubstring(hubv1alpha1.ApprovalPolicyName), ContainSubstring("approvedBy: "+approver))), "a forged approvedBy")
	g.Eventually(func() error { return editApprovals(asApprover, key, adding(approver)) }).
		WithTimeout(establishTimeout).WithPolling(interval).Should(Succeed(), "the approver's own approval")
	got := &hubv1alpha1.FleetBundle{}
	g.Expect(admin.Get(ctx, key, got)).To(Succeed())
	g.Expect(got.Spec.Rollout.Approvals).To(ConsistOf(hubv1alpha1.RolloutApproval{Revision: 1, Stage: "prod", ApprovedBy: approver}))

	// An approval cannot be changed, even by an approver; nor removed while its revision is
	// updateRevision.
	err = editApprovals(admin, key, func(as []hubv1alpha1.RolloutApproval) []hubv1alpha1.RolloutApproval {
		as[0].ApprovedBy = "someone-else"
		return as
	})
	g.Expect(err).To(MatchError(ContainSubstring("cannot be changed")))
	got.Status.UpdateRevision = 1
	g.Expect(admin.Status().Update(ctx, got)).To(Succeed())
	none := func([]hubv1alpha1.RolloutApproval) []hubv1alpha1.RolloutApproval { return nil }
	g.Expect(editApprovals(asEditor, key, none)).To(MatchError(ContainSubstring("cannot be removed")))
	withItsStage := &hubv1alpha1.FleetBundle{}
	g.Expect(asEditor.Get(ctx, key, withItsStage)).To(Succeed())
	withItsStage.Spec.Rollout.Stages[0].Name, withItsStage.Spec.Rollout.Approvals = "all", nil
	g.Expect(asEditor.Update(ctx, withItsStage, client.DryRunAll)).To(Succeed(), "an approval is removed together with its stage")
	got.Status.UpdateRevision = 2
	g.Expect(admin.Status().Update(ctx, got)).To(Succeed())
	g.Expect(editApprovals(asEditor, key, none)).To(Succeed(), "an approval of an earlier revision is removed")

	// Lifting the gate is approving every revision to come: the editor cannot, the approver can.
	lift := func(c client.Client) error {
		fb := &hubv1alpha1.FleetBundle{}
		if err := c.Get(ctx, key, fb); err != nil {
			return err
		}
		fb.Spec.Rollout.Stages[0].RequireApproval = false
		return c.Update(ctx, fb, client.DryRunAll)
	}
	g.Expect(lift(asEditor)).To(MatchError(And(ContainSubstring("lifting requireApproval"), ContainSubstring(editor))))
	g.Expect(lift(asApprover)).To(Succeed(), "an approver lifts the gate")

	// An approval of held removals follows the same rules.
	approveRemovals := func(c client.Client, approvedBy string) error {
		fb := &hubv1alpha1.FleetBundle{}
		if err := c.Get(ctx, key, fb); err != nil {
			return err
		}
		fb.Spec.Rollout.RemovalApprovals = append(fb.Spec.Rollout.RemovalApprovals, hubv1alpha1.RemovalApproval{RemovalSet: "0123456789abcdef", ApprovedBy: approvedBy})
		return c.Update(ctx, fb, client.DryRunAll)
	}
	g.Expect(approveRemovals(asEditor, editor)).To(MatchError(ContainSubstring("needs "+hubv1alpha1.ApproveVerb+" on fleetbundles")), "an editor approves no removal")
	g.Expect(approveRemovals(asApprover, editor)).To(MatchError(ContainSubstring("approvedBy: "+approver)), "a forged removal approval")
	g.Expect(approveRemovals(asApprover, approver)).To(Succeed(), "the approver's own removal approval")
}
