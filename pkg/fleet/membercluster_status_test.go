package fleet

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/configbundle"
	"configbundle.dev/hub/pkg/registration"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

func TestCredentialsCondition(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const warning = 30 * 24 * time.Hour
	tests := []struct {
		name       string
		state      spokeprovider.State
		renewal    *registration.Renewal
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		{"not connected yet", spokeprovider.State{}, nil, metav1.ConditionUnknown, hubv1alpha1.ExpiryUnknownReason},
		{"a credential that does not say", spokeprovider.State{ClusterID: "uid"}, nil, metav1.ConditionUnknown, hubv1alpha1.ExpiryUnknownReason},
		{"a year left", spokeprovider.State{ClusterID: "uid", CredentialsExpiry: now.Add(365 * 24 * time.Hour)}, nil, metav1.ConditionTrue, hubv1alpha1.CredentialsValidReason},
		{"just outside the window", spokeprovider.State{ClusterID: "uid", CredentialsExpiry: now.Add(warning + time.Second)}, nil, metav1.ConditionTrue, hubv1alpha1.CredentialsValidReason},
		{"at the window's edge", spokeprovider.State{ClusterID: "uid", CredentialsExpiry: now.Add(warning)}, nil, metav1.ConditionFalse, hubv1alpha1.ExpiresSoonReason},
		{"ten minutes left", spokeprovider.State{ClusterID: "uid", CredentialsExpiry: now.Add(10 * time.Minute)}, nil, metav1.ConditionFalse, hubv1alpha1.ExpiresSoonReason},
		{"expired now", spokeprovider.State{ClusterID: "uid", CredentialsExpiry: now}, nil, metav1.ConditionFalse, hubv1alpha1.ExpiredReason},
		{"expired long ago, not connected", spokeprovider.State{CredentialsExpiry: now.Add(-time.Hour)}, nil, metav1.ConditionFalse, hubv1alpha1.ExpiredReason},
		{"renewed, a day left", spokeprovider.State{ClusterID: "uid", CredentialsExpiry: now.Add(24 * time.Hour)}, &registration.Renewal{Next: now.Add(19 * time.Hour)}, metav1.ConditionTrue, hubv1alpha1.CredentialsValidReason},
		{"renewed, due and retried", spokeprovider.State{ClusterID: "uid", CredentialsExpiry: now.Add(time.Hour)}, &registration.Renewal{Next: now.Add(-time.Hour)}, metav1.ConditionTrue, hubv1alpha1.CredentialsValidReason},
		{"renewal failed", spokeprovider.State{ClusterID: "uid", CredentialsExpiry: now.Add(time.Hour)}, &registration.Renewal{Next: now.Add(-time.Hour), Err: errors.New("forbidden")}, metav1.ConditionFalse, hubv1alpha1.RenewalFailedReason},
		{"renewal failed, expired", spokeprovider.State{ClusterID: "uid", CredentialsExpiry: now}, &registration.Renewal{Next: now.Add(-time.Hour), Err: errors.New("unauthorized")}, metav1.ConditionFalse, hubv1alpha1.ExpiredReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := credentialsCondition(tt.state, tt.renewal, now, warning)
			if c.Type != hubv1alpha1.CredentialsValidCondition || c.Status != tt.wantStatus || c.Reason != tt.wantReason || c.Message == "" {
				t.Errorf("condition = %+v, want %s/%s with a message", c, tt.wantStatus, tt.wantReason)
			}
		})
	}
}

func TestFirstFailed(t *testing.T) {
	t.Parallel()
	var failed []hubv1alpha1.FailedBundle
	for i := 12; i >= 0; i-- {
		failed = append(failed, hubv1alpha1.FailedBundle{Namespace: fmt.Sprintf("ns-%02d", i%3), Name: fmt.Sprintf("b-%02d", i), Reason: "ConfigMapConflict", Message: "m"})
	}
	failed[0].Message = strings.Repeat("é", 1000) // 2000 bytes
	got := firstFailed(failed)
	if len(got) != hubv1alpha1.MaxFailedBundles {
		t.Fatalf("kept %d, want %d", len(got), hubv1alpha1.MaxFailedBundles)
	}
	for i := 1; i < len(got); i++ {
		if a, b := got[i-1], got[i]; a.Namespace > b.Namespace || (a.Namespace == b.Namespace && a.Name >= b.Name) {
			t.Errorf("not sorted at %d: %s/%s then %s/%s", i, a.Namespace, a.Name, b.Namespace, b.Name)
		}
	}
	for _, f := range got {
		if len(f.Message) > maxFailedBundleMessage || !utf8.ValidString(f.Message) {
			t.Errorf("message of %s/%s: %d bytes, valid UTF-8 %v", f.Namespace, f.Name, len(f.Message), utf8.ValidString(f.Message))
		}
	}
	if firstFailed(nil) != nil {
		t.Errorf("no failed bundles must be nil, not an empty list")
	}
}

// TestTally: a bundle whose outcome the hub could not write to its status counts by that
// outcome, not by its empty or stale status; bundles placed from a FleetBundle are counted apart
// too.
func TestTally(t *testing.T) {
	t.Parallel()
	bundle := func(name string, ready metav1.ConditionStatus, heals int64) configbundlev1alpha1.ConfigBundle {
		b := configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		b.Status.Heals = heals
		if ready != "" {
			b.Status.Conditions = []metav1.Condition{{Type: configbundlev1alpha1.ReadyCondition, Status: ready, Reason: "R", Message: "m"}}
		}
		return b
	}
	placed := bundle("placed", metav1.ConditionTrue, 0)
	placed.Labels = map[string]string{hubv1alpha1.FleetBundleLabel: "default.placed"}
	bundles := []configbundlev1alpha1.ConfigBundle{
		placed,
		bundle("synced", metav1.ConditionTrue, 2),
		bundle("never-reported", "", 0),
		bundle("stale-ready", metav1.ConditionTrue, 1),
		bundle("pending", "", 0),
		bundle("drifted", metav1.ConditionFalse, 0),
		bundle("new-spec", metav1.ConditionTrue, 0),
	}
	bundles[5].Status.Conditions[0].Reason = configbundlev1alpha1.DriftedReason
	bundles[len(bundles)-1].Generation = 2 // its status is the one of generation 0
	unreported := map[types.NamespacedName]metav1.Condition{
		{Namespace: "ns", Name: "never-reported"}: {Type: configbundlev1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: "CreateFailed", Message: "creating ConfigMap ns/never-reported: forbidden"},
		{Namespace: "ns", Name: "stale-ready"}:    {Type: configbundlev1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: "StatusWriteFailed", Message: "writing status: forbidden"},
	}
	counts, failed, heals := tally(bundles, unreported)
	if want := (hubv1alpha1.BundleCounts{Total: 7, Ready: 2, Failed: 3, Placed: 1, Drifted: 1}); counts != want || heals != 3 {
		t.Errorf("counts %+v, heals %d; want %+v, 3", counts, heals, want)
	}
	if len(failed) != 3 || failed[0].Reason != configbundlev1alpha1.DriftedReason || failed[1].Name != "never-reported" || failed[1].Reason != "CreateFailed" || failed[2].Reason != "StatusWriteFailed" {
		t.Errorf("failed bundles %+v", failed)
	}
}

func TestSyncedCondition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sync            configbundle.Sync
		status          metav1.ConditionStatus
		reason, message string
	}{
		{sync: configbundle.Sync{}, status: metav1.ConditionFalse, reason: hubv1alpha1.SyncingReason,
			message: "The member is not connected: its ConfigBundles are reconciled once it connects"},
		{sync: configbundle.Sync{Connected: true, Total: 20012, Left: 12000}, status: metav1.ConditionFalse, reason: hubv1alpha1.SyncingReason,
			message: "12000 of 20012 ConfigBundles left to reconcile since the member connected"},
		{sync: configbundle.Sync{Connected: true, Total: 20012}, status: metav1.ConditionTrue, reason: hubv1alpha1.AllReconciledReason,
			message: "All 20012 ConfigBundles the member held when it connected have been reconciled since"},
		{sync: configbundle.Sync{Connected: true}, status: metav1.ConditionTrue, reason: hubv1alpha1.AllReconciledReason,
			message: "All 0 ConfigBundles the member held when it connected have been reconciled since"},
	} {
		c := syncedCondition(tc.sync)
		if c.Type != hubv1alpha1.SyncedCondition || c.Status != tc.status || c.Reason != tc.reason || c.Message != tc.message {
			t.Errorf("syncedCondition(%+v) = %+v, want %s %s %q", tc.sync, c, tc.status, tc.reason, tc.message)
		}
	}
}
