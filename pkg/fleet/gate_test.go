package fleet

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

func TestGate(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	fleet := func(ready metav1.ConditionStatus, reason string, beatAgo time.Duration) *hubv1alpha1.Fleet {
		f := &hubv1alpha1.Fleet{ObjectMeta: metav1.ObjectMeta{Name: hubv1alpha1.FleetName}}
		if reason != "" {
			f.Status.Conditions = []metav1.Condition{{Type: hubv1alpha1.ReadyCondition, Status: ready, Reason: reason, Message: "why"}}
		}
		if beatAgo >= 0 {
			f.Status.HeartbeatTime = &metav1.Time{Time: now.Add(-beatAgo)}
		}
		return f
	}
	tests := []struct {
		name  string
		fleet *hubv1alpha1.Fleet
		want  string // "" for healthy, else a part of the error
	}{
		{"ready and fresh", fleet(metav1.ConditionTrue, hubv1alpha1.AllReadyReason, 5*time.Second), ""},
		{"ready, heartbeat exactly max-age old", fleet(metav1.ConditionTrue, hubv1alpha1.AllReadyReason, 30*time.Second), ""},
		{"ready but stale: the hub is gone", fleet(metav1.ConditionTrue, hubv1alpha1.AllReadyReason, 31*time.Second), "no hub is watching"},
		{"ready without a heartbeat", fleet(metav1.ConditionTrue, hubv1alpha1.AllReadyReason, -1), "no heartbeat"},
		{"fresh but not ready", fleet(metav1.ConditionFalse, hubv1alpha1.MembersNotReadyReason, time.Second), "not Ready (MembersNotReady): why"},
		{"fresh without a condition", fleet("", "", time.Second), "no Ready condition"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Gate(tt.fleet, now, 30*time.Second)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Gate = %v, want healthy", err)
			case tt.want != "" && (!errors.Is(err, ErrNotHealthy) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Gate = %v, want an ErrNotHealthy saying %q", err, tt.want)
			}
		})
	}
}
