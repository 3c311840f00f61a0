package fleet

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

func TestGate(t *testing.T) {
	t.Parallel()
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
			t.Parallel()
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

func TestGateFleetBundles(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	fresh := &hubv1alpha1.Fleet{ObjectMeta: metav1.ObjectMeta{Name: hubv1alpha1.FleetName}, Status: hubv1alpha1.FleetStatus{
		// The Fleet's own readiness does not matter: the gate is on the FleetBundles named.
		Conditions:    []metav1.Condition{{Type: hubv1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: hubv1alpha1.MembersNotReadyReason}},
		HeartbeatTime: &metav1.Time{Time: now.Add(-5 * time.Second)},
	}}
	stale := fresh.DeepCopy()
	stale.Status.HeartbeatTime = &metav1.Time{Time: now.Add(-time.Minute)}
	bundles := []hubv1alpha1.FleetBundle{
		fleetBundle("web", "ok", 2, 2, metav1.ConditionTrue, hubv1alpha1.AllReadyReason),
		fleetBundle("web", "ok-too", 1, 1, metav1.ConditionTrue, hubv1alpha1.AllReadyReason),
		fleetBundle("web", "behind", 3, 2, metav1.ConditionTrue, hubv1alpha1.AllReadyReason),
		fleetBundle("web", "conflict", 1, 1, metav1.ConditionFalse, hubv1alpha1.ClustersFailedReason),
		fleetBundle("web", "new", 1, 0, "", ""),
	}
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "web", Name: name} }
	tests := []struct {
		name  string
		fleet *hubv1alpha1.Fleet
		want  []types.NamespacedName
		says  []string // nil for healthy
	}{
		{"every one named Ready, the rest of the fleet not", fresh, []types.NamespacedName{key("ok"), key("ok-too")}, nil},
		{"Ready but the heartbeat is stale", stale, []types.NamespacedName{key("ok")}, []string{"no hub is watching"}},
		{"not Ready", fresh, []types.NamespacedName{key("ok"), key("conflict")}, []string{"FleetBundle web/conflict is not Ready (ClustersFailed): why"}},
		{"Ready for an older generation", fresh, []types.NamespacedName{key("behind")}, []string{"web/behind is Ready for generation 2, not yet for its current generation 3"}},
		{"no condition yet", fresh, []types.NamespacedName{key("new")}, []string{"web/new has no Ready condition yet"}},
		{"absent, and each one that fails named", fresh, []types.NamespacedName{key("gone"), key("conflict")}, []string{"FleetBundle web/gone does not exist", "web/conflict"}},
		{"in another namespace is another FleetBundle", fresh, []types.NamespacedName{{Namespace: "api", Name: "ok"}}, []string{"FleetBundle api/ok does not exist"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := GateFleetBundles(tt.fleet, tt.want, bundles, now, 30*time.Second)
			if tt.says == nil {
				if err != nil {
					t.Errorf("GateFleetBundles = %v, want healthy", err)
				}
				return
			}
			if !errors.Is(err, ErrNotHealthy) {
				t.Fatalf("GateFleetBundles = %v, want an ErrNotHealthy", err)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("GateFleetBundles = %v, want it to say %q", err, s)
				}
			}
		})
	}
}

func TestFleetBundleState(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		fb     hubv1alpha1.FleetBundle
		ready  bool
		failed string
	}{
		{fleetBundle("n", "a", 1, 1, metav1.ConditionTrue, hubv1alpha1.AllReadyReason), true, ""},
		{fleetBundle("n", "a", 2, 1, metav1.ConditionTrue, hubv1alpha1.AllReadyReason), false, ""},
		{fleetBundle("n", "a", 1, 1, metav1.ConditionFalse, hubv1alpha1.ProgressingReason), false, ""},
		{fleetBundle("n", "a", 1, 1, metav1.ConditionFalse, hubv1alpha1.NoClustersSelectedReason), false, ""},
		{fleetBundle("n", "a", 1, 1, metav1.ConditionTrue, hubv1alpha1.NoClustersSelectedReason), true, ""},
		{fleetBundle("n", "a", 1, 1, metav1.ConditionFalse, hubv1alpha1.ClustersFailedReason), false, hubv1alpha1.ClustersFailedReason},
		{fleetBundle("n", "a", 2, 1, metav1.ConditionFalse, hubv1alpha1.InvalidSelectorReason), false, hubv1alpha1.InvalidSelectorReason},
		{fleetBundle("n", "a", 1, 1, metav1.ConditionFalse, hubv1alpha1.NameTooLongReason), false, hubv1alpha1.NameTooLongReason},
		{fleetBundle("n", "a", 1, 1, metav1.ConditionUnknown, "Anything"), false, ""},
		{fleetBundle("n", "a", 1, 0, "", ""), false, ""},
	} {
		reason := "no condition"
		if len(tt.fb.Status.Conditions) > 0 {
			reason = string(tt.fb.Status.Conditions[0].Status) + "/" + tt.fb.Status.Conditions[0].Reason
		}
		if got := FleetBundleReady(&tt.fb); got != tt.ready {
			t.Errorf("FleetBundleReady(%s, generation %d, observed %d) = %v, want %v", reason, tt.fb.Generation, tt.fb.Status.ObservedGeneration, got, tt.ready)
		}
		if got := FleetBundleFailed(&tt.fb); got != tt.failed {
			t.Errorf("FleetBundleFailed(%s) = %q, want %q", reason, got, tt.failed)
		}
	}
}

func TestMinMaxAge(t *testing.T) {
	t.Parallel()
	withInterval := func(s int64) *hubv1alpha1.Fleet {
		return &hubv1alpha1.Fleet{Status: hubv1alpha1.FleetStatus{HeartbeatIntervalSeconds: s}}
	}
	for _, tt := range []struct {
		fleet *hubv1alpha1.Fleet
		want  time.Duration
	}{
		{nil, 2 * time.Second},
		{withInterval(0), 2 * time.Second},
		{withInterval(1), 2 * time.Second},
		{withInterval(10), 20 * time.Second},
	} {
		if got := MinMaxAge(tt.fleet); got != tt.want {
			t.Errorf("MinMaxAge(%v) = %s, want %s", tt.fleet, got, tt.want)
		}
	}
}
