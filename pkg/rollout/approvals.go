package rollout

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// Approval returns who approved revision for stage in the rollout's spec.rollout.approvals, and
// whether anyone did.
func Approval(s *hubv1alpha1.RolloutStrategy, revision int64, stage string) (string, bool) {
	if s == nil {
		return "", false
	}
	for _, a := range s.Approvals {
		if a.Revision == revision && a.Stage == stage {
			return a.ApprovedBy, true
		}
	}
	return "", false
}

// RequiresApproval reports whether the stage named stage requires approval.
func RequiresApproval(s *hubv1alpha1.RolloutStrategy, stage string) bool {
	if s == nil {
		return false
	}
	for _, st := range s.Stages {
		if st.Name == stage {
			return st.RequireApproval
		}
	}
	return false
}

// awaitingApproval holds the rollout at stage i while the stage requires approval and the
// revision is not approved for it, and reports whether it holds: no member of the stage is
// admitted, and the rollout is AwaitingApproval (one Event when it starts waiting). Once
// approved it records, where the stage starts approved or the rollout waited for it, who approved.
func (d *decision) awaitingApproval(i int) bool {
	if i >= len(d.s.Stages) || !d.s.Stages[i].RequireApproval {
		return false
	}
	u, stage := d.in.Update, d.names[i]
	prev := d.in.Status.Rollout
	entered := prev == nil || prev.Stage != stage || d.in.Status.UpdateRevision != u // not at this stage when last written
	waited := !entered && d.prevPhase == hubv1alpha1.RolloutAwaitingApproval
	if by, ok := Approval(d.s, u, stage); ok {
		if entered || waited {
			d.event(corev1.EventTypeNormal, hubv1alpha1.RolloutApprovedEvent, stage, "Revision %d: stage %s approved by %s", u, stage, by)
		}
		return false
	}
	d.ro.Phase, d.ro.SoakStartTime, d.ro.AdmittedThrough, d.ro.PassedWhilePaused = hubv1alpha1.RolloutAwaitingApproval, nil, "", nil
	d.ro.Message = fmt.Sprintf("Stage %s requires approval: no member of it gets revision %d until it is approved for the stage (hub rollout approve <name> --stage %s)",
		stage, u, stage)
	if !waited {
		d.event(corev1.EventTypeNormal, hubv1alpha1.AwaitingApprovalEvent, stage, "Revision %d awaits approval for stage %s", u, stage)
	}
	return true
}
