package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleetbundle"
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

// Where is where the status says the rollout of a revision stands.
type Where struct {
	// Stage is the index of its current stage.
	Stage int
	// AdmittedThrough is its admittedThrough.
	AdmittedThrough string
	// Soaking is whether the current stage soaks: its members' consumers must stay available.
	Soaking bool
}

// TallyMembers counts members for the rollout of revision u of strategy s, whose status stands
// where w says, at now. Members that are not Ready are skipped, and so are paused ones, but for
// a paused member that holds u and fails it. A member that holds u, Ready, counts as done only
// once its consumers are (Member.Workloads).
func TallyMembers(s *hubv1alpha1.RolloutStrategy, u int64, w Where, members []Member, now time.Time) Tally {
	t := Tally{Failed: map[string]hubv1alpha1.ClusterFailure{}, Stages: make([]StageCount, len(s.Stages)+1)}
	deadline := progressDeadline(s)
	updated := map[string]bool{}
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
		case m.Held != u:
		case m.BundleReady && m.Workloads == nil:
			updated[m.Name] = true
		case m.BundleReady:
			v := JudgeWorkloads(s, u, *m.Workloads, m.UpdatedAt, w.Soaking && m.Stage == w.Stage, now)
			updated[m.Name] = v.Done
			if v.Failure != "" {
				t.Failed[m.Name] = hubv1alpha1.ClusterFailure{Cluster: m.Name, Reason: hubv1alpha1.WorkloadUnhealthyReason,
					Message: fleetbundle.Truncate(fmt.Sprintf("member %s: %s", m.Name, v.Failure))}
			}
			t.requeue(v.Wait)
		case m.Failure != nil:
			t.Failed[m.Name] = *m.Failure
		case m.UpdatedAt.IsZero():
		case now.Sub(m.UpdatedAt) >= deadline:
			t.Failed[m.Name] = hubv1alpha1.ClusterFailure{Cluster: m.Name, Reason: hubv1alpha1.ProgressDeadlineExceededReason,
				Message: fmt.Sprintf("the bundle of revision %d is not Ready %s after member %s got it (progressDeadline)", u, deadline, m.Name)}
		default:
			t.requeue(m.UpdatedAt.Add(deadline).Sub(now))
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
		case failed || updated[m.Name]:
			c.Done++ // a tolerated failure holds no stage back
		case m.Held == u || (m.Stage == w.Stage && w.AdmittedThrough != "" && m.Name <= w.AdmittedThrough):
			c.InFlight++ // updated, or admitted and about to be
			c.Waiting = append(c.Waiting, m.Name)
		default:
			c.Waiting = append(c.Waiting, m.Name)
		}
	}
	return t
}

// requeue asks for the tally again after wait at the latest (0: no need).
func (t *Tally) requeue(wait time.Duration) {
	if wait > 0 && (t.RequeueAfter == 0 || wait < t.RequeueAfter) {
		t.RequeueAfter = wait
	}
}
