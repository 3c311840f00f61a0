package fleet

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// ErrNotHealthy is wrapped by the errors of Gate and GateFleetBundles.
var ErrNotHealthy = errors.New("fleet not healthy")

// Gate is the health check to gate a rollout on (`hub status --max-age`): it returns nil if the
// Fleet is Ready and a hub confirmed it less than maxAge before now, and otherwise an error that
// says why, wrapping ErrNotHealthy. A Ready condition alone cannot be trusted: a stopped hub
// leaves the last one behind, and only the heartbeat tells.
func Gate(f *hubv1alpha1.Fleet, now time.Time, maxAge time.Duration) error {
	if err := fresh(f, now, maxAge); err != nil {
		return err
	}
	c := meta.FindStatusCondition(f.Status.Conditions, hubv1alpha1.ReadyCondition)
	switch {
	case c == nil:
		return fmt.Errorf("%w: Fleet %s has no Ready condition yet", ErrNotHealthy, f.Name)
	case c.Status != metav1.ConditionTrue:
		return fmt.Errorf("%w: Fleet %s is not Ready (%s): %s", ErrNotHealthy, f.Name, c.Reason, c.Message)
	}
	return nil
}

// GateFleetBundles is the health check to gate a rollout on chosen FleetBundles alone
// (`hub status --fleet-bundle`): it returns nil if a hub confirmed the Fleet f less than maxAge
// before now and each FleetBundle of want is among bundles and Ready for its current spec
// (FleetBundleReady), whatever the rest of the fleet; otherwise an error that names each one
// that is not, wrapping ErrNotHealthy. The heartbeat vouches for the FleetBundles' status too: the
// hub that writes it writes theirs.
func GateFleetBundles(f *hubv1alpha1.Fleet, want []types.NamespacedName, bundles []hubv1alpha1.FleetBundle, now time.Time, maxAge time.Duration) error {
	if err := fresh(f, now, maxAge); err != nil {
		return err
	}
	byKey := map[types.NamespacedName]*hubv1alpha1.FleetBundle{}
	for i := range bundles {
		byKey[types.NamespacedName{Namespace: bundles[i].Namespace, Name: bundles[i].Name}] = &bundles[i]
	}
	var problems []string
	for _, key := range want {
		if p := fleetBundleProblem(key, byKey[key]); p != "" {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrNotHealthy, strings.Join(problems, "; "))
	}
	return nil
}

// fleetBundleProblem says why the FleetBundle key (nil: absent) does not pass the gate, "" if it
// does.
func fleetBundleProblem(key types.NamespacedName, fb *hubv1alpha1.FleetBundle) string {
	if fb == nil {
		return fmt.Sprintf("FleetBundle %s does not exist", key)
	}
	if FleetBundleReady(fb) {
		return ""
	}
	c := meta.FindStatusCondition(fb.Status.Conditions, hubv1alpha1.ReadyCondition)
	switch {
	case c == nil:
		return fmt.Sprintf("FleetBundle %s has no Ready condition yet", key)
	case c.Status != metav1.ConditionTrue:
		return fmt.Sprintf("FleetBundle %s is not Ready (%s): %s", key, c.Reason, c.Message)
	default:
		return fmt.Sprintf("FleetBundle %s is Ready for generation %d, not yet for its current generation %d", key, fb.Status.ObservedGeneration, fb.Generation)
	}
}

// fresh returns nil if a hub confirmed the Fleet less than maxAge before now, else an error
// that says why not, wrapping ErrNotHealthy.
func fresh(f *hubv1alpha1.Fleet, now time.Time, maxAge time.Duration) error {
	beat := f.Status.HeartbeatTime
	switch {
	case beat == nil:
		return fmt.Errorf("%w: Fleet %s has no heartbeat: no hub has reported it yet", ErrNotHealthy, f.Name)
	case now.Sub(beat.Time) > maxAge:
		return fmt.Errorf("%w: Fleet %s's heartbeat is %s old, more than %s: no hub is watching the fleet, and its status may be stale",
			ErrNotHealthy, f.Name, now.Sub(beat.Time).Round(time.Second), maxAge)
	}
	return nil
}

// MinMaxAge is the shortest maxAge worth gating on with the Fleet f (nil: not read yet): twice
// the heartbeat interval its hub publishes (status.heartbeatIntervalSeconds), or, while it
// publishes none, twice one second, the shortest it can publish. A heartbeat is up to one
// interval old by design, and its write takes a moment more: a shorter maxAge would pass and
// fail by turns on a healthy fleet.
func MinMaxAge(f *hubv1alpha1.Fleet) time.Duration {
	interval := time.Second
	if f != nil && f.Status.HeartbeatIntervalSeconds > 0 {
		interval = time.Duration(f.Status.HeartbeatIntervalSeconds) * time.Second
	}
	return 2 * interval
}
