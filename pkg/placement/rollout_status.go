package placement

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleetbundle"
	"configbundle.dev/hub/pkg/rollout"
	"configbundle.dev/hub/pkg/template"
)

// rolloutState is a FleetBundle's revisions and the decision of where its rollout stands.
type rolloutState struct {
	// next is the FleetBundle with the decided revisions and rollout in its status.
	next *hubv1alpha1.FleetBundle
	// revisions are its revisions, oldest first.
	revisions []rollout.Revision
	// held are the revisions the members hold (keepHeld).
	held map[int64]bool
	// decision is where its rollout stands.
	decision rollout.Decision
	// sourceErr says why its sources cannot be resolved: nothing moves until they can.
	sourceErr *template.SourceError
}

// keepHeld keeps the revisions members hold (held) from pruning, and records them in the status.
func (s *rolloutState) keepHeld(held map[int64]bool) {
	s.held = held
	s.next.Status.HeldRevisions = rollout.RecordHeld(held)
}

// byNumber returns the revisions by number.
func (s *rolloutState) byNumber() map[int64]rollout.Revision {
	m := make(map[int64]rollout.Revision, len(s.revisions))
	for _, r := range s.revisions {
		m[r.Number] = r
	}
	return m
}

// rolloutOf ensures the revision of a FleetBundle's template and decides, from its members,
// where its rollout stands.
// With sharded replicas, members know only their names, stages and readiness, and tally is
// the sum of the replicas' counts; nil: the replicas have not caught up with the status, and the
// rollout stays where the status says until they have.
func (r *StatusReconciler) rolloutOf(ctx context.Context, fb *hubv1alpha1.FleetBundle, members []rollout.Member, now time.Time, tally *rollout.Tally) (*rolloutState, error) {
	frozen := &rolloutState{next: fb.DeepCopy(), decision: rollout.Decision{Current: fb.Status.CurrentRevision, Rollout: fb.Status.Rollout}}
	if !fleetbundle.LabelFits(client.ObjectKeyFromObject(fb)) || templateError(fb) != nil { // it places nothing: no revision can carry its label, or render
		return frozen, nil
	}
	d, err := rollout.ResolveDefinition(ctx, r.hub, fb)
	if errors.As(err, &frozen.sourceErr) { // nor while its sources cannot be resolved
		return frozen, nil
	} else if err != nil {
		return nil, err
	}
	revs, err := rollout.ListRevisions(ctx, r.hub, fb)
	if err != nil {
		return nil, err
	}
	if _, ok := rollout.RevisionOfTemplate(&d, revs); !ok {
		// The cache may not have seen a revision created moments ago: ask the API server before
		// making another.
		if revs, err = rollout.ListRevisions(ctx, r.manager.GetLocalManager().GetAPIReader(), fb); err != nil {
			return nil, err
		}
	}
	update, revs, err := rollout.EnsureRevision(ctx, r.hub, fb, &d, revs, r.opts.FieldOwner)
	if err != nil {
		return nil, err
	}
	st := &rolloutState{revisions: revs, next: fb.DeepCopy()}
	st.next.Status.ObservedRevision = rollout.HighestRevision(fb, revs)
	sharded := r.opts.Replica.Sharded()
	if sharded && tally == nil && fb.Spec.Rollout != nil && fb.Status.Rollout != nil && fb.Status.UpdateRevision == update.Number {
		st.decision = rollout.Decision{Current: fb.Status.CurrentRevision, Rollout: fb.Status.Rollout.DeepCopy()}
		return st, nil // the replicas count again for the status last written
	}
	st.decision = rollout.Decide(rollout.Input{Strategy: fb.Spec.Rollout, Status: fb.Status, Update: update.Number, Members: members, Now: now, Tally: tally})
	st.next.Status.UpdateRevision, st.next.Status.CurrentRevision = update.Number, st.decision.Current
	st.next.Status.Rollout = st.decision.Rollout
	if ro := st.decision.Rollout; ro != nil {
		w := rollout.Where{Stage: slices.Index(rollout.StageNames(fb.Spec.Rollout), ro.Stage), Soaking: ro.Phase == hubv1alpha1.RolloutSoaking}
		ro.Workloads = rollout.WorkloadStatus(fb.Spec.Rollout, update.Number, w, members, now)
	}
	return st, nil
}

// rolloutMembers is what a rollout needs to know of each selected member, from what the status
// knows of it, at now. A paused member is not Ready (the rollout skips it) and still says the
// revision it holds, which is kept.
func (r *StatusReconciler) rolloutMembers(fb *hubv1alpha1.FleetBundle, selected []MemberView, now time.Time) []rollout.Member {
	key := client.ObjectKeyFromObject(fb)
	members := make([]rollout.Member, 0, len(selected))
	for _, v := range selected {
		m := rollout.Member{Name: v.Name, Ready: !v.Paused && v.NotReady.Reason == "", Joining: !v.Paused && joining(v.NotReady.Reason), Paused: v.Paused}
		if fb.Spec.Rollout != nil {
			m.Stage = rollout.StageOf(fb.Spec.Rollout, v.Labels)
		}
		if OwnershipOf(v.Bundle, key, fb.UID) == Own {
			m.Held = rollout.HeldRevision(v.Bundle)
			m.UpdatedAt = r.ledger.heldSince(pair{member: v.Name, fb: key}, m.Held, now)
			ready := meta.FindStatusCondition(v.Bundle.Status.Conditions, configbundlev1alpha1.ReadyCondition)
			if ready != nil && v.Bundle.Status.ObservedGeneration == v.Bundle.Generation {
				m.BundleReady = ready.Status == metav1.ConditionTrue
				if ready.Status == metav1.ConditionFalse {
					m.Failure = &hubv1alpha1.ClusterFailure{Cluster: v.Name, Reason: ready.Reason, Message: fleetbundle.Truncate(ready.Message)}
				}
			}
		}
		if m.Held != 0 {
			m.Workloads = v.Workloads
		}
		// A member that refused the revision fails it, as long as it does not take it.
		if u := fb.Status.UpdateRevision; u != 0 && m.Held != u && r.ledger.refusedRevision(pair{member: v.Name, fb: key}) == u {
			f := hubv1alpha1.ClusterFailure{Cluster: v.Name, Reason: v.Placement.Reason, Message: fleetbundle.Truncate(v.Placement.Message)}
			if f.Reason == "" {
				f.Reason, f.Message = hubv1alpha1.PlacementFailedReason, fmt.Sprintf("member %s refused revision %d", v.Name, u)
			}
			m.Refused, m.Failure = true, &f
		}
		members = append(members, m)
	}
	return members
}

// rolloutChanged reports whether two statuses differ in their revisions or where their rollout
// stands (its message aside): what placement acts on, written at once.
func rolloutChanged(a, b hubv1alpha1.FleetBundleStatus) bool {
	if a.UpdateRevision != b.UpdateRevision || a.CurrentRevision != b.CurrentRevision {
		return true
	}
	strip := func(ro *hubv1alpha1.RolloutStatus) *hubv1alpha1.RolloutStatus {
		if ro == nil {
			return nil
		}
		c := ro.DeepCopy()
		c.Message = ""
		return c
	}
	return !equality.Semantic.DeepEqual(strip(a.Rollout), strip(b.Rollout))
}
