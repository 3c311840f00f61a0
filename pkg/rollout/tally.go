package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// Tally counts members for the rollout of one revision, from where the status says the rollout
// stands (its stage and admittedThrough).
type Tally struct {
	// Failed are the members that failed the revision (all of them, or the first of them when
	// summed from replicas), by name.
	Failed map[string]hubv1alpha1.ClusterFailure
	// FailedCount counts them all.
	FailedCount int
	// Stages count the Ready members of each stage, by index.
	Stages []StageCount
	// RequeueAfter is when a progress deadline ends; 0: none.
	RequeueAfter time.Duration
}

// StageCount counts the Ready members of one stage.
type StageCount struct {
	// Done counts those that hold the revision, Ready, or failed it.
	Done int32
	// InFlight counts those updated, or admitted to be, and not yet Ready.
	InFlight int32
	// Waiting names those not done (unknown when summed from replicas).
	Waiting []string
}

// TallyMembers counts members for the rollout of revision u of strategy s, whose status names
// the stage of index stage and admittedThrough, at now. Members that are not Ready are skipped,
// and so are paused ones, but for a paused member that holds u and fails it.
func TallyMembers(s *hubv1alpha1.RolloutStrategy, u int64, stage int, admittedThrough string, members []Member, now time.Time) Tally {
	t := Tally{Failed: map[string]hubv1alpha1.ClusterFailure{}, Stages: make([]StageCount, len(s.Stages)+1)}
	deadline := progressDeadline(s)
	for _, m := range members {
		if m.Paused && m.Held == u && m.Failure != nil && !m.Refused {
			// Paused while it fails the revision it holds: pausing a failing member (to look into
			// it) neither lifts a halt nor lets the next stage start. A paused member is otherwise
			// skipped.
			t.Failed[m.Name] = *m.Failure
			continue
		}
		if !m.Ready {
			continue
		}
		switch {
		case m.Refused && m.Failure != nil:
			t.Failed[m.Name] = *m.Failure
		case m.Held != u || m.BundleReady:
		case m.Failure != nil:
			t.Failed[m.Name] = *m.Failure
		case m.UpdatedAt.IsZero():
		case now.Sub(m.UpdatedAt) >= deadline:
			t.Failed[m.Name] = hubv1alpha1.ClusterFailure{Cluster: m.Name, Reason: hubv1alpha1.ProgressDeadlineExceededReason,
				Message: fmt.Sprintf("the bundle of revision %d is not Ready %s after member %s got it (progressDeadline)", u, deadline, m.Name)}
		default:
			if wait := m.UpdatedAt.Add(deadline).Sub(now); t.RequeueAfter == 0 || wait < t.RequeueAfter {
				t.RequeueAfter = wait
			}
		}
	}
	t.FailedCount = len(t.Failed)
	sorted := slices.SortedFunc(slices.Values(members), func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	for _, m := range sorted {
		if !m.Ready || m.Stage < 0 || m.Stage >= len(t.Stages) {
			continue
		}
		c := &t.Stages[m.Stage]
		_, failed := t.Failed[m.Name]
		switch {
		case failed || (m.Held == u && m.BundleReady):
			c.Done++ // a tolerated failure holds no stage back
		case m.Held == u || (m.Stage == stage && admittedThrough != "" && m.Name <= admittedThrough):
			c.InFlight++ // updated, or admitted and about to be
			c.Waiting = append(c.Waiting, m.Name)
		default:
			c.Waiting = append(c.Waiting, m.Name)
		}
	}
	return t
}
