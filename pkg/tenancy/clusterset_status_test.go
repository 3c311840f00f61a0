package tenancy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// labelled is a MemberCluster with labels.
func labelled(name string, labels map[string]string) hubv1alpha1.MemberCluster {
	return hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func TestClusterSetStatus(t *testing.T) {
	t.Parallel()
	members := []hubv1alpha1.MemberCluster{
		labelled("a", map[string]string{"env": "prod", "region": "eu"}),
		labelled("b", map[string]string{"env": "prod", "region": "us"}),
		labelled("c", map[string]string{"env": "dev"}),
		labelled("d", nil),
	}
	tests := []struct {
		name       string
		selector   metav1.LabelSelector
		members    []hubv1alpha1.MemberCluster
		want       int32
		wantReady  metav1.ConditionStatus
		wantReason string
		wantInMsg  string
	}{{
		name: "{} selects every member", members: members,
		want: 4, wantReady: metav1.ConditionTrue, wantReason: hubv1alpha1.ClusterSetSelectingReason, wantInMsg: "selects 4 members",
	}, {
		name: "labels", selector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}, members: members,
		want: 2, wantReady: metav1.ConditionTrue, wantReason: hubv1alpha1.ClusterSetSelectingReason, wantInMsg: "selects 2 members",
	}, {
		name: "expressions", members: members,
		selector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: metav1.LabelSelectorOpIn, Values: []string{"eu"}}}},
		want:     1, wantReady: metav1.ConditionTrue, wantReason: hubv1alpha1.ClusterSetSelectingReason, wantInMsg: "selects 1 member",
	}, {
		name: "no member is no error", selector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
		want: 0, wantReady: metav1.ConditionTrue, wantReason: hubv1alpha1.ClusterSetSelectingReason, wantInMsg: "selects 0 members",
	}, {
		name: "an invalid selector selects none", members: members,
		selector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near"}}},
		want:     0, wantReady: metav1.ConditionFalse, wantReason: hubv1alpha1.InvalidSelectorReason, wantInMsg: "not a valid label selector",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			set := &hubv1alpha1.ClusterSet{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 3}, Spec: hubv1alpha1.ClusterSetSpec{ClusterSelector: tt.selector}}
			got := ClusterSetStatus(set, tt.members)
			if got.Clusters != tt.want || got.ObservedGeneration != 3 {
				t.Errorf("clusters %d, observedGeneration %d; want %d, 3", got.Clusters, got.ObservedGeneration, tt.want)
			}
			c := meta.FindStatusCondition(got.Conditions, hubv1alpha1.ReadyCondition)
			if c == nil || c.Status != tt.wantReady || c.Reason != tt.wantReason || c.ObservedGeneration != 3 {
				t.Fatalf("Ready = %+v, want %s/%s for generation 3", c, tt.wantReady, tt.wantReason)
			}
			if !strings.Contains(c.Message, tt.wantInMsg) {
				t.Errorf("Ready message %q does not say %q", c.Message, tt.wantInMsg)
			}
			// Computed again from what it wrote, it writes nothing: the transition time stays.
			set.Status = got
			set.Status.Conditions[0].LastTransitionTime = metav1.Unix(1000, 0)
			if again := ClusterSetStatus(set, tt.members); !cmp.Equal(set.Status, again) {
				t.Errorf("recomputing an unchanged set changed its status:\n%s", cmp.Diff(set.Status, again))
			}
		})
	}
}

func TestClusterSetBindingStatus(t *testing.T) {
	t.Parallel()
	binding := &hubv1alpha1.ClusterSetBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "prod", Generation: 2},
		Spec:       hubv1alpha1.ClusterSetBindingSpec{ClusterSet: "prod"},
	}
	for _, tc := range []struct {
		exists     bool
		wantReady  metav1.ConditionStatus
		wantReason string
		wantInMsg  string
	}{
		{true, metav1.ConditionTrue, hubv1alpha1.ClusterSetBoundReason, "ClusterSet prod is bound"},
		{false, metav1.ConditionFalse, hubv1alpha1.ClusterSetNotFoundReason, "ClusterSet prod does not exist"},
	} {
		got := ClusterSetBindingStatus(binding, tc.exists)
		c := meta.FindStatusCondition(got.Conditions, hubv1alpha1.ReadyCondition)
		if got.ObservedGeneration != 2 || c == nil || c.Status != tc.wantReady || c.Reason != tc.wantReason || !strings.Contains(c.Message, tc.wantInMsg) {
			t.Errorf("set exists %t: status %+v; want Ready %s/%s saying %q, observedGeneration 2", tc.exists, got, tc.wantReady, tc.wantReason, tc.wantInMsg)
		}
	}
}
