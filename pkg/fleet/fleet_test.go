package fleet

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

func member(name string, ready bool, reason string, counts hubv1alpha1.BundleCounts, heals int64) hubv1alpha1.MemberCluster {
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	return hubv1alpha1.MemberCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: hubv1alpha1.MemberClusterStatus{
			Conditions: []metav1.Condition{{Type: hubv1alpha1.ReadyCondition, Status: status, Reason: reason}},
			Bundles:    counts, Heals: heals,
		},
	}
}

// unsynced returns mc with its Synced condition False (Syncing).
func unsynced(mc hubv1alpha1.MemberCluster) hubv1alpha1.MemberCluster {
	mc.Status.Conditions = append(mc.Status.Conditions, metav1.Condition{Type: hubv1alpha1.SyncedCondition, Status: metav1.ConditionFalse, Reason: hubv1alpha1.SyncingReason})
	return mc
}

// paused returns mc paused for maintenance (spec.paused).
func paused(mc hubv1alpha1.MemberCluster) hubv1alpha1.MemberCluster {
	mc.Spec.Paused = true
	return mc
}

func TestFleetStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		members    []hubv1alpha1.MemberCluster
		want       hubv1alpha1.FleetStatus
		wantReady  metav1.ConditionStatus
		wantReason string
		wantInMsg  string
	}{{
		name:       "no members",
		wantReady:  metav1.ConditionFalse,
		wantReason: hubv1alpha1.NoMembersReason,
	}, {
		name: "all ready",
		members: []hubv1alpha1.MemberCluster{
			member("a", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{Total: 3, Ready: 3}, 2),
			member("b", true, hubv1alpha1.RotationFailedReason, hubv1alpha1.BundleCounts{Total: 1, Ready: 1}, 1),
		},
		want:       hubv1alpha1.FleetStatus{Clusters: hubv1alpha1.ClusterCounts{Total: 2, Ready: 2}, Bundles: hubv1alpha1.BundleCounts{Total: 4, Ready: 4}, Heals: 3},
		wantReady:  metav1.ConditionTrue,
		wantReason: hubv1alpha1.AllReadyReason,
	}, {
		name: "an unreachable member keeps its counts in the sum and makes the fleet not ready",
		members: []hubv1alpha1.MemberCluster{
			member("b", false, hubv1alpha1.UnreachableReason, hubv1alpha1.BundleCounts{Total: 2, Ready: 2}, 0),
			member("a", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{Total: 1, Ready: 1}, 0),
			{ObjectMeta: metav1.ObjectMeta{Name: "c"}},
		},
		want:       hubv1alpha1.FleetStatus{Clusters: hubv1alpha1.ClusterCounts{Total: 3, Ready: 1}, Bundles: hubv1alpha1.BundleCounts{Total: 3, Ready: 3}},
		wantReady:  metav1.ConditionFalse,
		wantReason: hubv1alpha1.MembersNotReadyReason,
		wantInMsg:  "2 of 3 members not Ready: b (Unreachable), c (Unknown)",
	}, {
		name: "paused members are counted apart, and change nothing else",
		members: []hubv1alpha1.MemberCluster{
			paused(member("a", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{Total: 1, Ready: 1}, 0)),
			paused(member("b", false, hubv1alpha1.UnreachableReason, hubv1alpha1.BundleCounts{}, 0)),
			member("c", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{Total: 1, Ready: 1}, 0),
		},
		want:       hubv1alpha1.FleetStatus{Clusters: hubv1alpha1.ClusterCounts{Total: 3, Ready: 2, Paused: 2}, Bundles: hubv1alpha1.BundleCounts{Total: 2, Ready: 2}},
		wantReady:  metav1.ConditionFalse,
		wantReason: hubv1alpha1.MembersNotReadyReason,
		wantInMsg:  "1 of 3 members not Ready: b (Unreachable)",
	}, {
		name:       "a paused member that is Ready leaves the fleet Ready",
		members:    []hubv1alpha1.MemberCluster{paused(member("a", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{Total: 1, Ready: 1}, 0))},
		want:       hubv1alpha1.FleetStatus{Clusters: hubv1alpha1.ClusterCounts{Total: 1, Ready: 1, Paused: 1}, Bundles: hubv1alpha1.BundleCounts{Total: 1, Ready: 1}},
		wantReady:  metav1.ConditionTrue,
		wantReason: hubv1alpha1.AllReadyReason,
	}, {
		name: "members not synced since they connected keep the fleet from Ready, after members not Ready",
		members: []hubv1alpha1.MemberCluster{
			unsynced(member("b", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{Total: 3, Ready: 1, Failed: 1}, 0)),
			unsynced(member("a", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{Total: 3, Ready: 3}, 0)),
			member("c", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{Total: 1, Ready: 1}, 0),
		},
		want:       hubv1alpha1.FleetStatus{Clusters: hubv1alpha1.ClusterCounts{Total: 3, Ready: 3}, Bundles: hubv1alpha1.BundleCounts{Total: 7, Ready: 5, Failed: 1}},
		wantReady:  metav1.ConditionFalse,
		wantReason: hubv1alpha1.MembersSyncingReason,
		wantInMsg:  "2 of 3 members not synced",
	}, {
		name: "a member not Ready goes first",
		members: []hubv1alpha1.MemberCluster{
			unsynced(member("a", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{}, 0)),
			unsynced(member("b", false, hubv1alpha1.ConnectingReason, hubv1alpha1.BundleCounts{}, 0)),
		},
		want:       hubv1alpha1.FleetStatus{Clusters: hubv1alpha1.ClusterCounts{Total: 2, Ready: 1}},
		wantReady:  metav1.ConditionFalse,
		wantReason: hubv1alpha1.MembersNotReadyReason,
		wantInMsg:  "1 of 2 members not Ready: b (Connecting)",
	}, {
		name: "failed bundles",
		members: []hubv1alpha1.MemberCluster{
			member("a", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{Total: 3, Ready: 1, Failed: 1}, 0),
		},
		want:       hubv1alpha1.FleetStatus{Clusters: hubv1alpha1.ClusterCounts{Total: 1, Ready: 1}, Bundles: hubv1alpha1.BundleCounts{Total: 3, Ready: 1, Failed: 1}},
		wantReady:  metav1.ConditionFalse,
		wantReason: hubv1alpha1.BundlesFailedReason,
		wantInMsg:  "1 of 3 ConfigBundles have failed, in a (1)",
	}, {
		name: "the message names the first members with failed bundles, sorted, and counts the rest",
		members: []hubv1alpha1.MemberCluster{
			member("g", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{Total: 1, Failed: 1}, 0),
			member("f", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{Total: 1, Failed: 1}, 0),
			member("e", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{Total: 1, Failed: 1}, 0),
			member("d", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{Total: 1, Ready: 1}, 0),
			member("c", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{Total: 1, Failed: 1}, 0),
			member("b", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{Total: 2, Failed: 2}, 0),
			member("a", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{Total: 1, Failed: 1}, 0),
		},
		want:       hubv1alpha1.FleetStatus{Clusters: hubv1alpha1.ClusterCounts{Total: 7, Ready: 7}, Bundles: hubv1alpha1.BundleCounts{Total: 8, Ready: 1, Failed: 7}},
		wantReady:  metav1.ConditionFalse,
		wantReason: hubv1alpha1.BundlesFailedReason,
		wantInMsg:  "7 of 8 ConfigBundles have failed, in a (1), b (2), c (1), e (1), f (1) and 1 more",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := FleetStatus(hubv1alpha1.FleetStatus{}, tt.members, nil)
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(hubv1alpha1.FleetStatus{}, "Conditions")); diff != "" {
				t.Errorf("FleetStatus() counts mismatch (-want +got):\n%s", diff)
			}
			c := meta.FindStatusCondition(got.Conditions, hubv1alpha1.ReadyCondition)
			if c == nil || c.Status != tt.wantReady || c.Reason != tt.wantReason {
				t.Fatalf("Ready = %+v, want %s/%s", c, tt.wantReady, tt.wantReason)
			}
			if !strings.Contains(c.Message, tt.wantInMsg) {
				t.Errorf("Ready message %q does not say %q", c.Message, tt.wantInMsg)
			}
		})
	}

	t.Run("keeps the transition time while nothing changes", func(t *testing.T) {
		members := []hubv1alpha1.MemberCluster{member("a", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{}, 0)}
		bundles := []hubv1alpha1.FleetBundle{fleetBundle("web", "a", 1, 1, metav1.ConditionFalse, hubv1alpha1.ClustersFailedReason)}
		first := FleetStatus(hubv1alpha1.FleetStatus{}, members, bundles)
		first.Conditions[0].LastTransitionTime = metav1.Unix(1000, 0)
		if second := FleetStatus(first, members, bundles); !cmp.Equal(first, second) {
			t.Errorf("recomputing an unchanged fleet changed its status:\n%s", cmp.Diff(first, second))
		}
	})
}

// fleetBundle is a FleetBundle ns/name at generation, whose status was computed for observed,
// with a Ready condition of status and reason (none if reason is "").
func fleetBundle(ns, name string, generation, observed int64, status metav1.ConditionStatus, reason string) hubv1alpha1.FleetBundle {
	fb := hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: generation}}
	fb.Status.ObservedGeneration = observed
	if reason != "" {
		fb.Status.Conditions = []metav1.Condition{{Type: hubv1alpha1.ReadyCondition, Status: status, Reason: reason, Message: "why"}}
	}
	return fb
}

// TestFleetStatusRollsUpFleetBundles: status.fleetBundles counts them by the rule its fields
// document, and the Ready reason's precedence is MembersNotReady, BundlesFailed,
// FleetBundlesFailed, each message saying how many FleetBundles have failed.
func TestFleetStatusRollsUpFleetBundles(t *testing.T) {
	t.Parallel()
	healthy := member("a", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{Total: 1, Ready: 1}, 0)
	down := member("b", false, hubv1alpha1.UnreachableReason, hubv1alpha1.BundleCounts{}, 0)
	failing := member("c", true, hubv1alpha1.ConnectedReason, hubv1alpha1.BundleCounts{Total: 1, Failed: 1}, 0)
	f, tr := metav1.ConditionFalse, metav1.ConditionTrue
	tests := []struct {
		name       string
		members    []hubv1alpha1.MemberCluster
		bundles    []hubv1alpha1.FleetBundle
		want       hubv1alpha1.FleetBundleCounts
		wantReady  metav1.ConditionStatus
		wantReason string
		wantInMsg  string
	}{{
		name:    "ready FleetBundles, ready only at their current generation",
		members: []hubv1alpha1.MemberCluster{healthy},
		bundles: []hubv1alpha1.FleetBundle{
			fleetBundle("web", "current", 2, 2, tr, hubv1alpha1.AllReadyReason),
			fleetBundle("web", "stale", 3, 2, tr, hubv1alpha1.AllReadyReason),
		},
		want:       hubv1alpha1.FleetBundleCounts{Total: 2, Ready: 1},
		wantReady:  tr,
		wantReason: hubv1alpha1.AllReadyReason,
		wantInMsg:  "1 of 2 FleetBundles Ready",
	}, {
		name:    "in progress, selecting nothing (either way) or not reconciled yet: neither ready nor failed",
		members: []hubv1alpha1.MemberCluster{healthy},
		bundles: []hubv1alpha1.FleetBundle{
			fleetBundle("web", "progressing", 1, 1, f, hubv1alpha1.ProgressingReason),
			fleetBundle("web", "none-false", 1, 1, f, hubv1alpha1.NoClustersSelectedReason),
			fleetBundle("web", "new", 1, 0, "", ""),
			fleetBundle("web", "unknown", 1, 1, metav1.ConditionUnknown, "Whatever"),
		},
		want:       hubv1alpha1.FleetBundleCounts{Total: 4},
		wantReady:  tr,
		wantReason: hubv1alpha1.AllReadyReason,
	}, {
		name:       "NoClustersSelected as vacuously Ready is ready",
		members:    []hubv1alpha1.MemberCluster{healthy},
		bundles:    []hubv1alpha1.FleetBundle{fleetBundle("web", "none-true", 1, 1, tr, hubv1alpha1.NoClustersSelectedReason)},
		want:       hubv1alpha1.FleetBundleCounts{Total: 1, Ready: 1},
		wantReady:  tr,
		wantReason: hubv1alpha1.AllReadyReason,
	}, {
		name:    "failed FleetBundles are named as namespace/name (reason), sorted",
		members: []hubv1alpha1.MemberCluster{healthy},
		bundles: []hubv1alpha1.FleetBundle{
			fleetBundle("web", "ok", 1, 1, tr, hubv1alpha1.AllReadyReason),
			fleetBundle("web", "placed", 1, 1, f, hubv1alpha1.ClustersFailedReason),
			fleetBundle("api", "long", 1, 1, f, hubv1alpha1.NameTooLongReason),
			fleetBundle("api", "bad", 2, 1, f, hubv1alpha1.InvalidSelectorReason),
		},
		want:       hubv1alpha1.FleetBundleCounts{Total: 4, Ready: 1, Failed: 3},
		wantReady:  f,
		wantReason: hubv1alpha1.FleetBundlesFailedReason,
		wantInMsg:  "3 of 4 FleetBundles have failed: api/bad (InvalidSelector), api/long (NameTooLong), web/placed (ClustersFailed)",
	}, {
		name:    "the first five failed FleetBundles are named, and the rest counted",
		members: []hubv1alpha1.MemberCluster{healthy},
		bundles: []hubv1alpha1.FleetBundle{
			fleetBundle("n", "f", 1, 1, f, hubv1alpha1.ClustersFailedReason),
			fleetBundle("n", "e", 1, 1, f, hubv1alpha1.ClustersFailedReason),
			fleetBundle("n", "d", 1, 1, f, hubv1alpha1.ClustersFailedReason),
			fleetBundle("n", "c", 1, 1, f, hubv1alpha1.ClustersFailedReason),
			fleetBundle("n", "b", 1, 1, f, hubv1alpha1.ClustersFailedReason),
			fleetBundle("n", "a", 1, 1, f, hubv1alpha1.ClustersFailedReason),
		},
		want:       hubv1alpha1.FleetBundleCounts{Total: 6, Failed: 6},
		wantReady:  f,
		wantReason: hubv1alpha1.FleetBundlesFailedReason,
		wantInMsg:  "n/a (ClustersFailed), n/b (ClustersFailed), n/c (ClustersFailed), n/d (ClustersFailed), n/e (ClustersFailed) and 1 more",
	}, {
		name:       "a member not Ready comes first, and says the FleetBundles failed too",
		members:    []hubv1alpha1.MemberCluster{healthy, down, failing},
		bundles:    []hubv1alpha1.FleetBundle{fleetBundle("web", "placed", 1, 1, f, hubv1alpha1.ClustersFailedReason)},
		want:       hubv1alpha1.FleetBundleCounts{Total: 1, Failed: 1},
		wantReady:  f,
		wantReason: hubv1alpha1.MembersNotReadyReason,
		wantInMsg:  "1 of 3 members not Ready: b (Unreachable); 1 of 1 FleetBundles have failed too",
	}, {
		name:       "failed bundles come before failed FleetBundles",
		members:    []hubv1alpha1.MemberCluster{healthy, failing},
		bundles:    []hubv1alpha1.FleetBundle{fleetBundle("web", "placed", 1, 1, f, hubv1alpha1.ClustersFailedReason)},
		want:       hubv1alpha1.FleetBundleCounts{Total: 1, Failed: 1},
		wantReady:  f,
		wantReason: hubv1alpha1.BundlesFailedReason,
		wantInMsg:  "1 of 2 ConfigBundles have failed, in c (1); 1 of 1 FleetBundles have failed too",
	}, {
		name:       "no members: NoMembers, whatever the FleetBundles",
		bundles:    []hubv1alpha1.FleetBundle{fleetBundle("web", "bad", 1, 1, f, hubv1alpha1.InvalidSelectorReason)},
		want:       hubv1alpha1.FleetBundleCounts{Total: 1, Failed: 1},
		wantReady:  f,
		wantReason: hubv1alpha1.NoMembersReason,
		wantInMsg:  "1 of 1 FleetBundles have failed too",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := FleetStatus(hubv1alpha1.FleetStatus{}, tt.members, tt.bundles)
			if diff := cmp.Diff(tt.want, got.FleetBundles); diff != "" {
				t.Errorf("status.fleetBundles mismatch (-want +got):\n%s", diff)
			}
			c := meta.FindStatusCondition(got.Conditions, hubv1alpha1.ReadyCondition)
			if c == nil || c.Status != tt.wantReady || c.Reason != tt.wantReason {
				t.Fatalf("Ready = %+v, want %s/%s", c, tt.wantReady, tt.wantReason)
			}
			if !strings.Contains(c.Message, tt.wantInMsg) {
				t.Errorf("Ready message %q does not say %q", c.Message, tt.wantInMsg)
			}
		})
	}
}

func TestCountUnowned(t *testing.T) {
	t.Parallel()
	managedBy := func(name, replica string) hubv1alpha1.MemberCluster {
		return hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: hubv1alpha1.MemberClusterStatus{Replica: replica}}
	}
	members := []hubv1alpha1.MemberCluster{managedBy("a", "r-1"), managedBy("b", "r-2"), managedBy("c", "gone"), managedBy("d", "")}
	for _, tc := range []struct {
		name       string
		members    []hubv1alpha1.MemberCluster
		live       []string
		emptyOwned bool
		want       int32
	}{
		{name: "sharded: a gone replica's member and one not taken yet", members: members, live: []string{"r-1", "r-2"}, want: 2},
		{name: "sharded: a replica left", members: members, live: []string{"r-1"}, want: 3},
		{name: "one hub: another replica's member, not one not reported yet", members: members, live: []string{"r-1"}, emptyOwned: true, want: 2},
		{name: "one hub with no id: its members are reported with none", members: []hubv1alpha1.MemberCluster{managedBy("a", "")}, live: []string{""}, emptyOwned: true, want: 0},
		{name: "healthy one hub", members: []hubv1alpha1.MemberCluster{managedBy("a", "r-1"), managedBy("b", "r-1")}, live: []string{"r-1"}, emptyOwned: true, want: 0},
		{name: "no members", live: []string{"r-1"}, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := CountUnowned(tc.members, tc.live, tc.emptyOwned); got != tc.want {
				t.Errorf("CountUnowned() = %d, want %d", got, tc.want)
			}
		})
	}
}
