package fleet

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// ErrNotHealthy is wrapped by Gate's errors.
var ErrNotHealthy = errors.New("fleet not healthy")

// Gate is the health check to gate a rollout on (`hub status --max-age`): it returns nil if the
// Fleet is Ready and a hub confirmed it less than maxAge before now, and otherwise an error that
// says why, wrapping ErrNotHealthy. A Ready condition alone cannot be trusted: a stopped hub
// leaves the last one behind, and only the heartbeat tells.
func Gate(f *hubv1alpha1.Fleet, now time.Time, maxAge time.Duration) error {
	beat := f.Status.HeartbeatTime
	switch {
	case beat == nil:
		return fmt.Errorf("%w: Fleet %s has no heartbeat: no hub has reported it yet", ErrNotHealthy, f.Name)
	case now.Sub(beat.Time) > maxAge:
		return fmt.Errorf("%w: Fleet %s's heartbeat is %s old, more than %s: no hub is watching the fleet, and its status may be stale",
			ErrNotHealthy, f.Name, now.Sub(beat.Time).Round(time.Second), maxAge)
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
