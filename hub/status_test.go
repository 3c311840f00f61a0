package main

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// TestStatusMentionsUnownedMembers: `hub status` says how many members no live replica manages
// (the Fleet's status.clusters.unowned), and says nothing of it when none is.
func TestStatusMentionsUnownedMembers(t *testing.T) {
	for _, tc := range []struct {
		unowned int32
		want    string
	}{
		{2, "\nUnowned: 2 of 3 members are managed by no live hub replica"},
		{0, ""},
	} {
		fleet := &hubv1alpha1.Fleet{ObjectMeta: metav1.ObjectMeta{Name: hubv1alpha1.FleetName},
			Status: hubv1alpha1.FleetStatus{Clusters: hubv1alpha1.ClusterCounts{Total: 3, Ready: 1, Unowned: tc.unowned}}}
		var out strings.Builder
		printStatus(&out, &hubState{fleet: fleet}, nil, time.Now())
		switch got := out.String(); {
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("unowned %d: hub status printed\n%s\nwant it to say %q", tc.unowned, got, tc.want)
		case tc.want == "" && strings.Contains(got, "Unowned"):
			t.Errorf("unowned 0: hub status printed\n%s\nwant no word of unowned members", got)
		}
	}
}

// TestStatusListsDriftedBundles: `hub status` counts each member's drifted bundles and lists
// them, and its gate fails on them as on any failed bundle.
func TestStatusListsDriftedBundles(t *testing.T) {
	now := time.Now()
	fleet := &hubv1alpha1.Fleet{ObjectMeta: metav1.ObjectMeta{Name: hubv1alpha1.FleetName},
		Status: hubv1alpha1.FleetStatus{
			Clusters:      hubv1alpha1.ClusterCounts{Total: 1, Ready: 1},
			Bundles:       hubv1alpha1.BundleCounts{Total: 3, Ready: 1, Failed: 2, Drifted: 2},
			HeartbeatTime: &metav1.Time{Time: now},
			Conditions: []metav1.Condition{{Type: hubv1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: hubv1alpha1.BundlesFailedReason,
				Message: "2 of 3 ConfigBundles have failed, in m1 (2)"}},
		}}
	member := hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "m1"},
		Status: hubv1alpha1.MemberClusterStatus{
			Bundles: hubv1alpha1.BundleCounts{Total: 3, Ready: 1, Failed: 2, Drifted: 2},
			FailedBundles: []hubv1alpha1.FailedBundle{
				{Namespace: "web", Name: "a", Reason: configbundlev1alpha1.DriftedReason},
				{Namespace: "web", Name: "b", Reason: configbundlev1alpha1.DriftedReason},
			},
		}}
	st := &hubState{fleet: fleet, members: []hubv1alpha1.MemberCluster{member}}
	var out strings.Builder
	printStatus(&out, st, nil, now)
	for _, want := range []string{"DRIFTED", "\nDrifted (driftPolicy Report", "m1:web/a, m1:web/b"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("hub status printed\n%s\nwant it to say %q", out.String(), want)
		}
	}
	if err := st.gate(nil, now, defaultMaxAge); err == nil {
		t.Errorf("the gate passed a fleet with drifted bundles")
	}
}
