package placement

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleetbundle"
)

// Health is where a FleetBundle's bundle stands in one selected member, for its Events.
type Health struct {
	// Cluster is the member's name.
	Cluster string
	// Failure is the member's failure; nil if it does not fail.
	Failure *hubv1alpha1.ClusterFailure
	// Applied is whether the member holds the bundle as the template says.
	Applied bool
	// Ready is whether the bundle is Ready there, as the template says.
	Ready bool
	// Updated is whether the member holds the FleetBundle's updateRevision.
	Updated bool
	// Paused is whether the member is paused: it is none of the above, and no transition.
	Paused bool
}

// Transition is a change of one member's failure for one FleetBundle.
type Transition struct {
	// Cluster is the member's name.
	Cluster string
	// Failure is the member's new failure; nil: it recovered.
	Failure *hubv1alpha1.ClusterFailure
	// Was is the reason of the failure it had before, "" if none.
	Was string
}

// Transitions compares where a FleetBundle's bundle stands in its selected members (in any
// order) with the failures last observed (by member), and returns the failures to remember and
// the transitions, sorted by member. A member starts failing, or fails for another reason, when
// its failure's reason differs from the one last observed; it recovers when a member that was
// failing is Ready. A member neither failing nor Ready (its bundle being placed, its new
// template not observed yet, or the member only joining) keeps what was last observed: no
// transition. A member no longer selected is forgotten
// without one.
func Transitions(last map[string]hubv1alpha1.ClusterFailure, now []Health) (map[string]hubv1alpha1.ClusterFailure, []Transition) {
	next := map[string]hubv1alpha1.ClusterFailure{}
	var changes []Transition
	for _, h := range now {
		was, failing := last[h.Cluster]
		switch {
		case h.Failure != nil:
			next[h.Cluster] = *h.Failure
			if !failing || was.Reason != h.Failure.Reason {
				changes = append(changes, Transition{Cluster: h.Cluster, Failure: h.Failure, Was: was.Reason})
			}
		case h.Ready:
			if failing {
				changes = append(changes, Transition{Cluster: h.Cluster, Was: was.Reason})
			}
		case failing:
			next[h.Cluster] = was
		}
	}
	slices.SortFunc(changes, func(a, b Transition) int { return strings.Compare(a.Cluster, b.Cluster) })
	return next, changes
}

// joining reports whether a member's reason says only that it is joining the fleet.
func joining(reason string) bool {
	return reason == hubv1alpha1.NotJoinedReason || reason == hubv1alpha1.ConnectingReason
}

// transitions remembers, per FleetBundle, the failures of the members this replica manages as it
// last observed them, and records an Event on the FleetBundle for each transition. What it
// remembers is lost when the hub restarts: a member still failing then raises its Warning once
// more, and a recovery made meanwhile raises none (the FleetBundle's status says it).
type transitions struct {
	recorder events.EventRecorder

	mu   sync.Mutex
	last map[types.NamespacedName]map[string]hubv1alpha1.ClusterFailure
}

func newTransitions(recorder events.EventRecorder) *transitions {
	return &transitions{recorder: recorder, last: map[types.NamespacedName]map[string]hubv1alpha1.ClusterFailure{}}
}

// observe records the Events of a FleetBundle's transitions, from where its bundle stands in the
// selected members this replica manages.
func (t *transitions) observe(fb *hubv1alpha1.FleetBundle, now []Health) {
	key := types.NamespacedName{Namespace: fb.Namespace, Name: fb.Name}
	t.mu.Lock()
	next, changes := Transitions(t.last[key], now)
	if len(next) == 0 {
		delete(t.last, key)
	} else {
		t.last[key] = next
	}
	t.mu.Unlock()
	regarding := fleetBundleReference(fb)
	for _, c := range changes {
		related := &corev1.ObjectReference{APIVersion: hubv1alpha1.GroupVersion.String(), Kind: "MemberCluster", Name: c.Cluster}
		if c.Failure == nil {
			t.recorder.Eventf(regarding, related, corev1.EventTypeNormal, hubv1alpha1.ClusterRecoveredEvent, c.Was,
				"Member %s: the bundle is Ready again (it failed: %s)", c.Cluster, c.Was)
			continue
		}
		t.recorder.Eventf(regarding, related, corev1.EventTypeWarning, hubv1alpha1.ClusterFailingEvent, c.Failure.Reason,
			"%s", fleetbundle.Truncate(fmt.Sprintf("Member %s: %s: %s", c.Cluster, c.Failure.Reason, c.Failure.Message)))
	}
}

// forget drops what is remembered of a FleetBundle that is gone.
func (t *transitions) forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.last, key)
}

// fleetBundleReference refers to a FleetBundle for an Event, without its resourceVersion (which
// every status write changes), so that the recorder makes a series of one member's repeated
// transitions.
func fleetBundleReference(fb *hubv1alpha1.FleetBundle) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: hubv1alpha1.GroupVersion.String(), Kind: "FleetBundle",
		Namespace: fb.Namespace, Name: fb.Name, UID: fb.UID,
	}
}
