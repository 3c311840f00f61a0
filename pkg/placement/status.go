package placement

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleetbundle"
	"configbundle.dev/hub/pkg/rollout"
	"configbundle.dev/hub/pkg/template"
	"configbundle.dev/hub/pkg/tenancy"
)

// MemberView is what the status of a FleetBundle needs to know of one selected member.
type MemberView struct {
	// Name is the member's name.
	Name string
	// NotReady, if its Reason is set, says why the member cannot be reached: the reason of its
	// state (Connecting, Unreachable, Forbidden, CRDMissing, ...) or NotJoinedReason. A member
	// only joining (NotJoined, Connecting) is not counted failed.
	NotReady Outcome
	// Placement is the pair's last placement failure (Conflict, NamespaceMissing,
	// PlacementFailed); zero if none.
	Placement Outcome
	// Bundle is the bundle of the FleetBundle's name in the member's cache; nil if none.
	Bundle *configbundlev1alpha1.ConfigBundle
	// Labels are the labels of the member's MemberCluster: its stage of a rollout.
	Labels map[string]string
	// Paused is whether the member is paused (MemberCluster spec.paused): it is counted apart,
	// never as failed, ready, applied or updated.
	Paused bool
	// Workloads, when the FleetBundle's rollout judges workloads, is where the consumers of its
	// bundle in the member stand; nil otherwise.
	Workloads *rollout.Workloads
}

// judge says where a FleetBundle's bundle stands in one selected member, against the bundle it
// should hold there (nil: none decided yet): the member's own unreadiness first, then
// placement's failure, then the placed bundle's Ready condition. A member that is only joining
// (NotJoined, Connecting: the hub has just started, say) has not failed, and is not Ready yet.
func judge(fb *hubv1alpha1.FleetBundle, desired *configbundlev1alpha1.ConfigBundle, m MemberView) Health {
	fail := func(o Outcome) Health {
		return Health{Cluster: m.Name, Failure: &hubv1alpha1.ClusterFailure{Cluster: m.Name, Reason: o.Reason, Message: fleetbundle.Truncate(o.Message)}}
	}
	switch {
	case joining(m.NotReady.Reason):
		return Health{Cluster: m.Name}
	case m.NotReady.Reason != "":
		return fail(m.NotReady)
	case m.Placement.Reason != "":
		return fail(m.Placement)
	case OwnershipOf(m.Bundle, types.NamespacedName{Namespace: fb.Namespace, Name: fb.Name}, fb.UID) != Own:
		return Health{Cluster: m.Name}
	}
	held := rollout.HeldRevision(m.Bundle)
	res := Health{Cluster: m.Name, Applied: desired != nil && len(Drift(desired, m.Bundle)) == 0,
		Updated: held != 0 && held == fb.Status.UpdateRevision}
	ready := meta.FindStatusCondition(m.Bundle.Status.Conditions, configbundlev1alpha1.ReadyCondition)
	switch {
	case ready == nil || m.Bundle.Status.ObservedGeneration != m.Bundle.Generation:
	case ready.Status == metav1.ConditionTrue:
		res.Ready = res.Applied
	case ready.Status == metav1.ConditionFalse:
		res.Failure = &hubv1alpha1.ClusterFailure{Cluster: m.Name, Reason: ready.Reason, Message: fleetbundle.Truncate(ready.Message)}
	}
	return res
}

// judgeAll says where a FleetBundle's bundle stands in each of its selected members, each against
// the revision the rollout gives it (TargetRevision; revs holds the revisions by number), with
// the rollout's failures (by member) that no object records (ProgressDeadlineExceeded): what its
// status and its Events are computed from. A FleetBundle whose status names no revision yet is
// judged against its spec's template.
func judgeAll(fb *hubv1alpha1.FleetBundle, revs map[int64]rollout.Revision, selected []MemberView, failed map[string]hubv1alpha1.ClusterFailure) []Health {
	spec := specRevision(fb)
	hs := make([]Health, 0, len(selected))
	for _, m := range selected {
		if m.Paused {
			hs = append(hs, judgePaused(m))
			continue
		}
		desired, renderErr := desiredFor(fb, revs, spec, m)
		h := judge(fb, desired, m)
		if renderErr != nil && h.Failure == nil {
			h.Failure = &hubv1alpha1.ClusterFailure{Cluster: m.Name, Reason: hubv1alpha1.RenderFailedReason, Message: fleetbundle.Truncate(renderErr.Error())}
			h.Ready = false
		}
		if f, ok := failed[m.Name]; ok && h.Failure == nil {
			h.Failure, h.Ready = &f, false
		}
		hs = append(hs, h)
	}
	return hs
}

// judgePaused says where a FleetBundle's bundle stands in a paused member: counted apart, never
// ready, failed only while it is connected and holds a revision that is missing (nothing says
// what it should hold, so its drift cannot be healed).
func judgePaused(m MemberView) Health {
	h := Health{Cluster: m.Name, Paused: true}
	if m.NotReady.Reason == "" && m.Placement.Reason == hubv1alpha1.RevisionMissingReason {
		h.Failure = &hubv1alpha1.ClusterFailure{Cluster: m.Name, Reason: m.Placement.Reason, Message: fleetbundle.Truncate(m.Placement.Message)}
	}
	return h
}

// specRevision is the spec's definition as a revision without a number, what members are judged
// against while the status names no revision yet; nil once it names one, or if the definition
// renders for no member (InvalidTemplate: the FleetBundle says so, not each member), or has
// sources.
func specRevision(fb *hubv1alpha1.FleetBundle) *rollout.Revision {
	if fb.Status.UpdateRevision != 0 || len(fb.Spec.DataFrom) > 0 { // the spec alone does not say what its sources hold
		return nil
	}
	r := &rollout.Revision{Definition: template.DefinitionOf(fb)}
	if templateError(fb) != nil {
		return nil
	}
	r.Hash = template.Hash(&r.Definition)
	return r
}

// desiredFor is the bundle a selected member should hold: rendered from the revision the rollout
// gives it (TargetRevision; revs holds them by number), or from the spec (spec) if the status
// names no revision yet; nil if none is decided, or if it does not render for the member (the
// error).
func desiredFor(fb *hubv1alpha1.FleetBundle, revs map[int64]rollout.Revision, spec *rollout.Revision, m MemberView) (*configbundlev1alpha1.ConfigBundle, error) {
	key := types.NamespacedName{Namespace: fb.Namespace, Name: fb.Name}
	held := int64(0)
	if OwnershipOf(m.Bundle, key, fb.UID) == Own {
		held = rollout.HeldRevision(m.Bundle)
	}
	member := template.Member{Name: m.Name, Labels: m.Labels}
	switch n := rollout.TargetRevision(fb, m.Name, m.Labels, held); {
	case fb.Status.UpdateRevision == 0 && spec != nil:
		return DesiredOf(fb, *spec, member)
	case fb.Status.UpdateRevision == 0:
	case n != 0:
		if r, ok := revs[n]; ok {
			return DesiredOf(fb, r, member)
		}
	}
	return nil, nil
}

// ComputeStatus computes a FleetBundle's status from where it may place (boundary), its selected
// members (in any order) and the heals not yet counted in its status, at now. Conditions keep
// their lastTransitionTime unless their status changes.
func ComputeStatus(fb *hubv1alpha1.FleetBundle, boundary tenancy.Boundary, selected []MemberView, pendingHeals int64, now metav1.Time) hubv1alpha1.FleetBundleStatus {
	return statusOf(fb, boundary, judgeAll(fb, nil, selected, nil), pendingHeals, now)
}

// statusOf is ComputeStatus from the judgement of each selected member (judgeAll).
func statusOf(fb *hubv1alpha1.FleetBundle, boundary tenancy.Boundary, health []Health, pendingHeals int64, now metav1.Time) hubv1alpha1.FleetBundleStatus {
	st := hubv1alpha1.FleetBundleStatus{
		ObservedGeneration: fb.Generation,
		Heals:              fb.Status.Heals + pendingHeals,
		CurrentRevision:    fb.Status.CurrentRevision,
		UpdateRevision:     fb.Status.UpdateRevision,
		Rollout:            fb.Status.Rollout.DeepCopy(),
		ObservedRevision:   fb.Status.ObservedRevision,
		HeldRevisions:      slices.Clone(fb.Status.HeldRevisions),
		Conditions:         slices.Clone(fb.Status.Conditions),
	}
	st.Clusters.Selected = int32(len(health))
	var failures []hubv1alpha1.ClusterFailure
	var drifted []string
	for _, h := range health {
		if h.Paused {
			st.Clusters.Paused++
		}
		if h.Applied {
			st.Clusters.Applied++
		}
		if h.Ready {
			st.Clusters.Ready++
		}
		if h.Updated {
			st.Clusters.Updated++
		}
		if h.Failure != nil {
			failures = append(failures, *h.Failure)
		}
		if h.Failure != nil && h.Failure.Reason == configbundlev1alpha1.DriftedReason {
			drifted = append(drifted, h.Cluster)
		}
	}
	st.Clusters.Failed = int32(len(failures))
	st.Clusters.Drifted = int32(len(drifted))
	st.DriftedClusters = firstDrifted(drifted)
	finish(fb, boundary, &st, failures, now)
	return st
}

// finish sets the first failures (sorted by member name) and the Ready condition, at now, of a
// status whose counts are computed.
func finish(fb *hubv1alpha1.FleetBundle, boundary tenancy.Boundary, st *hubv1alpha1.FleetBundleStatus, failures []hubv1alpha1.ClusterFailure, now metav1.Time) {
	slices.SortFunc(failures, func(a, b hubv1alpha1.ClusterFailure) int { return strings.Compare(a.Cluster, b.Cluster) })
	if len(failures) > hubv1alpha1.MaxFailedClusters {
		failures = failures[:hubv1alpha1.MaxFailedClusters]
	}
	st.FailedClusters = failures
	ready := readyCondition(fb, boundary, *st)
	ready.LastTransitionTime = now
	meta.SetStatusCondition(&st.Conditions, ready)
	progressing, stalled, ok := rolloutConditions(fb)
	if !ok {
		meta.RemoveStatusCondition(&st.Conditions, hubv1alpha1.ProgressingCondition)
		meta.RemoveStatusCondition(&st.Conditions, hubv1alpha1.StalledCondition)
		return
	}
	progressing.LastTransitionTime, stalled.LastTransitionTime = now, now
	meta.SetStatusCondition(&st.Conditions, progressing)
	meta.SetStatusCondition(&st.Conditions, stalled)
}

// firstDrifted sorts the names of drifted members and keeps the first MaxFailedClusters; nil if
// there are none.
func firstDrifted(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	names = slices.Compact(names)
	return names[:min(len(names), hubv1alpha1.MaxFailedClusters)]
}

// rolloutConditions are the Progressing and Stalled conditions of a FleetBundle's rollout, from
// its status.rollout; false without a staged rollout.
func rolloutConditions(fb *hubv1alpha1.FleetBundle) (progressing, stalled metav1.Condition, ok bool) {
	ro := fb.Status.Rollout
	if fb.Spec.Rollout == nil || ro == nil {
		return progressing, stalled, false
	}
	progressing = metav1.Condition{Type: hubv1alpha1.ProgressingCondition, Status: metav1.ConditionFalse, ObservedGeneration: fb.Generation, Message: ro.Message}
	stalled = metav1.Condition{Type: hubv1alpha1.StalledCondition, Status: metav1.ConditionFalse, ObservedGeneration: fb.Generation,
		Reason: hubv1alpha1.NotStalledReason, Message: "The rollout needs nobody to act"}
	switch ro.Phase {
	case hubv1alpha1.RolloutProgressing:
		progressing.Status, progressing.Reason = metav1.ConditionTrue, hubv1alpha1.RollingOutReason
	case hubv1alpha1.RolloutSoaking:
		progressing.Status, progressing.Reason = metav1.ConditionTrue, hubv1alpha1.SoakingReason
	case hubv1alpha1.RolloutAwaitingApproval:
		progressing.Status, progressing.Reason = metav1.ConditionTrue, hubv1alpha1.AwaitingApprovalReason
	case hubv1alpha1.RolloutPaused:
		progressing.Reason = hubv1alpha1.RolloutPausedReason
	case hubv1alpha1.RolloutHalted:
		progressing.Reason = hubv1alpha1.RolloutHaltedReason
		stalled.Status, stalled.Reason, stalled.Message = metav1.ConditionTrue, hubv1alpha1.RolloutHaltedReason, ro.Message
	case hubv1alpha1.RolloutRemovalHeld:
		progressing.Reason = hubv1alpha1.RemovalHeldReason
		if ro.Removals != nil {
			progressing.Message = ro.Removals.Message
		}
	case hubv1alpha1.RolloutRolledBack:
		progressing.Reason = hubv1alpha1.RolledBackReason
		stalled.Status, stalled.Reason, stalled.Message = metav1.ConditionTrue, hubv1alpha1.RolledBackReason, ro.Message
	default:
		progressing.Reason = hubv1alpha1.RolloutCompleteReason
	}
	return progressing, stalled, true
}

// readyCondition is the Ready condition of a status whose counts are computed, for a
// FleetBundle that may place within boundary. Paused members are counted apart: Ready compares
// the Ready members with the selected members that are not paused.
func readyCondition(fb *hubv1alpha1.FleetBundle, boundary tenancy.Boundary, st hubv1alpha1.FleetBundleStatus) metav1.Condition {
	c := metav1.Condition{Type: hubv1alpha1.ReadyCondition, Status: metav1.ConditionFalse, ObservedGeneration: fb.Generation}
	n := st.Clusters
	active := n.Selected - n.Paused
	switch {
	case !fleetbundle.LabelFits(types.NamespacedName{Namespace: fb.Namespace, Name: fb.Name}):
		c.Reason = hubv1alpha1.NameTooLongReason
		c.Message = fmt.Sprintf("%q is longer than %d characters, the most a label value holds: nothing is placed; recreate the FleetBundle with a shorter name",
			fleetbundle.LabelValue(types.NamespacedName{Namespace: fb.Namespace, Name: fb.Name}), hubv1alpha1.MaxFleetBundleLabelValue)
	case selectorError(fb.Spec.ClusterSelector) != nil:
		c.Reason = hubv1alpha1.InvalidSelectorReason
		c.Message = fleetbundle.Truncate(fmt.Sprintf("%v: nothing is placed, removed or changed in any member until it is fixed", selectorError(fb.Spec.ClusterSelector)))
	case templateError(fb) != nil:
		c.Reason = hubv1alpha1.InvalidTemplateReason
		c.Message = fleetbundle.Truncate(fmt.Sprintf("%v: nothing is placed, removed or changed in any member until it is fixed", templateError(fb)))
	case st.Rollout != nil && fb.Spec.Rollout != nil && st.Rollout.Removals != nil && st.Rollout.Removals.Held:
		c.Reason, c.Message = hubv1alpha1.RemovalHeldReason, st.Rollout.Removals.Message
	case !boundary.HasBound():
		c.Reason, c.Message = hubv1alpha1.NoClusterSetBindingReason, fleetbundle.Truncate(boundary.Unbound())
	case n.Selected == 0: // vacuously Ready: nothing to place, nothing to wait for
		c.Status, c.Reason = metav1.ConditionTrue, hubv1alpha1.NoClustersSelectedReason
		c.Message = fmt.Sprintf("The clusterSelector selects no member of the ClusterSets bound to namespace %s (%s): nothing is placed", fb.Namespace, fleetbundle.ListNames(boundary.Bound))
		if fb.Spec.ClusterSelector == nil {
			c.Message = "No clusterSelector: no member is selected ({} selects every member); nothing is placed"
		}
	case st.Rollout != nil && fb.Spec.Rollout != nil && st.Rollout.Phase == hubv1alpha1.RolloutRolledBack:
		c.Reason, c.Message = hubv1alpha1.RolledBackReason, st.Rollout.Message
	case st.Rollout != nil && fb.Spec.Rollout != nil && st.Rollout.Phase == hubv1alpha1.RolloutHalted:
		c.Reason, c.Message = hubv1alpha1.RolloutHaltedReason, st.Rollout.Message
	case st.Rollout != nil && fb.Spec.Rollout != nil && st.Rollout.Phase == hubv1alpha1.RolloutAwaitingApproval:
		c.Reason, c.Message = hubv1alpha1.AwaitingApprovalReason, st.Rollout.Message
	case n.Failed > 0:
		first := st.FailedClusters[0]
		c.Reason = hubv1alpha1.ClustersFailedReason
		c.Message = fleetbundle.Truncate(fmt.Sprintf("%d of %d selected members failed; %s: %s: %s", n.Failed, n.Selected, first.Cluster, first.Reason, first.Message))
	case fb.Spec.Rollout != nil && st.CurrentRevision != st.UpdateRevision:
		c.Reason = hubv1alpha1.ProgressingReason
		c.Message = fmt.Sprintf("Revision %d is rolling out: updated in %d of %d selected members%s", st.UpdateRevision, n.Updated, n.Selected, pausedNote(n))
		if st.Rollout != nil && st.Rollout.Message != "" {
			c.Message = fleetbundle.Truncate(c.Message + "; " + st.Rollout.Message)
		}
	case active == 0: // every selected member is paused
		c.Status, c.Reason = metav1.ConditionTrue, hubv1alpha1.AllReadyReason
		c.Message = fmt.Sprintf("All %d selected members are paused: they keep what they hold until they are resumed", n.Selected)
	case n.Ready == active:
		c.Status, c.Reason = metav1.ConditionTrue, hubv1alpha1.AllReadyReason
		c.Message = fmt.Sprintf("The bundle is Ready in all %d selected members", n.Selected)
		if n.Paused > 0 {
			c.Message = fmt.Sprintf("The bundle is Ready in all %d selected members that are not paused%s", active, pausedNote(n))
		}
	default:
		c.Reason = hubv1alpha1.ProgressingReason
		c.Message = fmt.Sprintf("The bundle is Ready in %d of %d selected members", n.Ready, n.Selected)
		if n.Paused > 0 {
			c.Message = fmt.Sprintf("The bundle is Ready in %d of the %d selected members that are not paused%s", n.Ready, active, pausedNote(n))
		}
	}
	return c
}

// pausedNote says how many selected members are paused, if any.
func pausedNote(n hubv1alpha1.PlacementCounts) string {
	if n.Paused == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d paused, keeping what they hold)", n.Paused)
}
