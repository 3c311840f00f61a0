package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleetbundle"
)

// Removals are decided as a rollout is: the fleetbundle-status controller decides where they
// stand (DecideRemovals) and writes it to status.rollout.removals; the placement controller
// removes a member's bundle only once that status admits it (RemovalAdmitted). Without
// spec.rollout, or for a FleetBundle being deleted, a member loses the bundle at once.

// Removal is a member that holds a FleetBundle's bundle and is no longer selected.
type Removal struct {
	// Name is the member's name.
	Name string
	// Stage is the index of the member's stage (StageOf its labels).
	Stage int
}

// RemovalInput is what DecideRemovals decides from.
type RemovalInput struct {
	// Strategy is the FleetBundle's spec.rollout (not nil).
	Strategy *hubv1alpha1.RolloutStrategy
	// Status is status.rollout.removals as last written; nil: none.
	Status *hubv1alpha1.RemovalStatus
	// Pending are the members that hold the bundle and are no longer selected, in any order.
	Pending []Removal
	// Holders counts the members that hold the bundle, selected or not: what a percentage of
	// maxRemovals is of.
	Holders int
	// Cause says why they are no longer selected, as well as the hub can tell.
	Cause string
	// Revision is the FleetBundle's updateRevision, which Events name.
	Revision int64
	// Now is the time of the decision.
	Now time.Time
}

// RemovalDecision is where removals stand.
type RemovalDecision struct {
	// Status is the new status.rollout.removals; nil when no member is to lose the bundle.
	Status *hubv1alpha1.RemovalStatus
	// Events are the Events of what changed.
	Events []Event
	// RequeueAfter is when to decide again although no fact changes (a soak ends); 0: never.
	RequeueAfter time.Duration
}

// DecideRemovals decides which of the pending removals may proceed. Removals that one change
// adds (members not admitted before) beyond maxRemovals are held, with every other pending
// removal, until they are approved (an entry of removalApprovals naming their removal set) or
// the change is reverted. Admitted removals proceed in stage order: the members of the current
// stage lose the bundle, then the stage soaks for its soakTime, then the next stage with pending
// removals goes. A change that adds removals starts again from the first stage.
func DecideRemovals(in RemovalInput) RemovalDecision {
	if len(in.Pending) == 0 {
		return RemovalDecision{}
	}
	pending := slices.SortedFunc(slices.Values(in.Pending), func(a, b Removal) int { return strings.Compare(a.Name, b.Name) })
	names := make([]string, len(pending))
	for i, p := range pending {
		names[i] = p.Name
	}
	prev := in.Status
	var admitted []string
	if prev != nil && !prev.Held {
		admitted = prev.Members
	}
	fresh := 0
	for _, n := range names {
		if _, ok := slices.BinarySearch(admitted, n); !ok {
			fresh++
		}
	}
	set := RemovalSet(names)
	out := RemovalDecision{Status: &hubv1alpha1.RemovalStatus{Pending: int32(len(names)), RemovalSet: set}}
	st := out.Status
	if limit, limited := removalLimit(in.Strategy, in.Holders); limited && fresh > limit && !removalApproved(in.Strategy, set) {
		st.Held = true
		st.Message = fleetbundle.Truncate(fmt.Sprintf("Removal held: %s would lose the bundle, more than maxRemovals (%d of the %d members that hold it): %s; "+
			"nothing is removed until the change is reverted or `hub rollout approve --removals` approves removal set %s",
			countMembers(len(names)), limit, in.Holders, in.Cause, set))
		if prev == nil || !prev.Held || prev.RemovalSet != set {
			out.Events = append(out.Events, Event{Type: corev1.EventTypeWarning, Reason: hubv1alpha1.RemovalHeldEvent, Revision: in.Revision, Stage: "Removal",
				Note: fleetbundle.Truncate(fmt.Sprintf("%s would lose the bundle (%s): %s; maxRemovals is %d", countMembers(len(names)),
					fleetbundle.ListNames(names), in.Cause, limit))})
		}
		return out
	}
	st.Members = names[:min(len(names), hubv1alpha1.MaxRemovalMembers)]
	restart := prev == nil || prev.Held || fresh > 0
	out.RequeueAfter = stageRemovals(in, pending, restart, st)
	return out
}

// stageRemovals sets the stage whose members lose the bundle now (and its soak) in st, and
// returns when to decide again for a soak to end (0: no soak).
func stageRemovals(in RemovalInput, pending []Removal, restart bool, st *hubv1alpha1.RemovalStatus) time.Duration {
	stages := StageNames(in.Strategy)
	i := 0
	if !restart {
		i = max(slices.Index(stages, in.Status.Stage), 0)
	}
	for ; i < len(stages); i++ {
		n := 0
		for _, p := range pending {
			if p.Stage == i {
				n++
			}
		}
		if n > 0 {
			st.Stage = stages[i]
			st.Message = fmt.Sprintf("Stage %s: %s", stages[i], losing(n))
			return 0
		}
		soak := soakTime(in.Strategy, i)
		if restart || in.Status.Stage != stages[i] || soak <= 0 {
			continue // no removal in this stage: it passes unsaid
		}
		start := in.Now
		if in.Status.SoakStartTime != nil {
			start = in.Status.SoakStartTime.Time
		}
		if left := start.Add(soak).Sub(in.Now); left > 0 {
			t := metav1.NewMicroTime(start)
			st.Stage, st.SoakStartTime = stages[i], &t
			st.Message = fmt.Sprintf("Stage %s: its members lost the bundle; soaking until %s", stages[i], start.Add(soak).UTC().Format(time.RFC3339))
			return left
		}
	}
	// What is left pending belongs to stages passed already: it goes at once.
	st.Stage = stages[len(stages)-1]
	st.Message = losing(len(pending))
	return 0
}

// RemovalAdmitted reports whether a member that holds a FleetBundle's bundle and is no longer
// selected loses it now: at once without spec.rollout; otherwise once status.rollout.removals
// names it, is not held, and its stage's turn came.
func RemovalAdmitted(fb *hubv1alpha1.FleetBundle, member string, memberLabels map[string]string) bool {
	s := fb.Spec.Rollout
	if s == nil {
		return true
	}
	if fb.Status.Rollout == nil || fb.Status.Rollout.Removals == nil {
		return false
	}
	rm := fb.Status.Rollout.Removals
	if _, ok := slices.BinarySearch(rm.Members, member); rm.Held || !ok {
		return false
	}
	current := slices.Index(StageNames(s), rm.Stage)
	return current >= 0 && StageOf(s, memberLabels) <= current
}

// RemovalSet is the hash of the names of the members that would lose a bundle (sorted): what an
// approval of held removals names.
func RemovalSet(names []string) string {
	return fleetbundle.Hash(names)
}

// removalLimit is maxRemovals of holders members, and whether there is one.
func removalLimit(s *hubv1alpha1.RolloutStrategy, holders int) (int, bool) {
	if s.MaxRemovals == nil {
		return 0, false
	}
	return scaled(s.MaxRemovals, holders, intstr.FromInt32(0), false), true
}

// removalApproved reports whether spec.rollout.removalApprovals approves removal set set.
func removalApproved(s *hubv1alpha1.RolloutStrategy, set string) bool {
	return slices.ContainsFunc(s.RemovalApprovals, func(a hubv1alpha1.RemovalApproval) bool { return a.RemovalSet == set })
}

// countMembers says "1 member" or "N members".
func countMembers(n int) string {
	if n == 1 {
		return "1 member"
	}
	return fmt.Sprintf("%d members", n)
}

// losing says that n members lose the bundle.
func losing(n int) string {
	if n == 1 {
		return "1 member loses the bundle"
	}
	return fmt.Sprintf("%d members lose the bundle", n)
}

// WithRemovals adds removal decision d to a rollout's status ro (not nil): the phase is
// RemovalHeld while removals are held, unless the rollout halted or was rolled back.
func WithRemovals(ro *hubv1alpha1.RolloutStatus, d RemovalDecision) {
	ro.Removals = d.Status
	if d.Status != nil && d.Status.Held && ro.Phase != hubv1alpha1.RolloutHalted && ro.Phase != hubv1alpha1.RolloutRolledBack {
		ro.Phase = hubv1alpha1.RolloutRemovalHeld
	}
}
