package placement

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// TestMemberChanged: a MemberCluster update wakes placement when its labels, its readiness or
// its spec.paused change, not when only its counts do.
func TestMemberChanged(t *testing.T) {
	base := func() *hubv1alpha1.MemberCluster {
		return &hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "m1", Labels: map[string]string{"env": "prod"}},
			Status: hubv1alpha1.MemberClusterStatus{Conditions: []metav1.Condition{{Type: hubv1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: hubv1alpha1.ConnectedReason}}}}
	}
	for _, tc := range []struct {
		name string
		edit func(*hubv1alpha1.MemberCluster)
		want bool
	}{
		{name: "counts only", edit: func(mc *hubv1alpha1.MemberCluster) { mc.Status.Heals++ }},
		{name: "paused", edit: func(mc *hubv1alpha1.MemberCluster) { mc.Spec.Paused = true }, want: true},
		{name: "labels", edit: func(mc *hubv1alpha1.MemberCluster) { mc.Labels["env"] = "dev" }, want: true},
		{name: "readiness", edit: func(mc *hubv1alpha1.MemberCluster) { mc.Status.Conditions[0].Reason = hubv1alpha1.UnreachableReason }, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, updated := base(), base()
			tc.edit(updated)
			if got := memberChanged.Update(eventUpdate{ObjectOld: old, ObjectNew: updated}); got != tc.want {
				t.Errorf("memberChanged = %t, want %t", got, tc.want)
			}
			// and back: a resume is a change too
			if got := memberChanged.Update(eventUpdate{ObjectOld: updated, ObjectNew: old}); got != tc.want {
				t.Errorf("memberChanged back = %t, want %t", got, tc.want)
			}
		})
	}
}
