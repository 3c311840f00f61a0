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

func TestFleetStatus(t *testing.T) {
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
			got := FleetStatus(hubv1alpha1.FleetStatus{}, tt.members)
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
		first := FleetStatus(hubv1alpha1.FleetStatus{}, members)
		first.Conditions[0].LastTransitionTime = metav1.Unix(1000, 0)
		if second := FleetStatus(first, members); !cmp.Equal(first, second) {
			t.Errorf("recomputing an unchanged fleet changed its status:\n%s", cmp.Diff(first, second))
		}
	})
}
