package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

func TestTransitions(t *testing.T) {
	fail := func(cluster, reason string) *hubv1alpha1.ClusterFailure {
		return &hubv1alpha1.ClusterFailure{Cluster: cluster, Reason: reason, Message: reason + " in " + cluster}
	}
	failing := func(h ...Health) map[string]hubv1alpha1.ClusterFailure {
		m := map[string]hubv1alpha1.ClusterFailure{}
		for _, x := range h {
			m[x.Cluster] = *x.Failure
		}
		return m
	}
	conflict := Health{Cluster: "m2", Failure: fail("m2", hubv1alpha1.ConflictReason)}
	missing := Health{Cluster: "m3", Failure: fail("m3", hubv1alpha1.NamespaceMissingReason)}
	for _, tc := range []struct {
		name     string
		last     map[string]hubv1alpha1.ClusterFailure
		now      []Health
		wantNext map[string]hubv1alpha1.ClusterFailure
		want     []Transition
	}{
		{name: "nothing observed, all Ready", now: []Health{{Cluster: "m1", Ready: true}}, wantNext: failing()},
		{
			name: "two start failing, sorted by member", now: []Health{missing, {Cluster: "m1", Ready: true}, conflict},
			wantNext: failing(conflict, missing),
			want:     []Transition{{Cluster: "m2", Failure: conflict.Failure}, {Cluster: "m3", Failure: missing.Failure}},
		},
		{
			name: "still failing for the same reason, another message: no transition", last: failing(conflict),
			now:      []Health{{Cluster: "m2", Failure: &hubv1alpha1.ClusterFailure{Cluster: "m2", Reason: hubv1alpha1.ConflictReason, Message: "other"}}},
			wantNext: map[string]hubv1alpha1.ClusterFailure{"m2": {Cluster: "m2", Reason: hubv1alpha1.ConflictReason, Message: "other"}},
		},
		{
			name: "fails for another reason", last: failing(conflict),
			now:      []Health{{Cluster: "m2", Failure: fail("m2", "ConfigMapConflict")}},
			wantNext: failing(Health{Cluster: "m2", Failure: fail("m2", "ConfigMapConflict")}),
			want:     []Transition{{Cluster: "m2", Failure: fail("m2", "ConfigMapConflict"), Was: hubv1alpha1.ConflictReason}},
		},
		{
			name: "recovers once Ready", last: failing(conflict, missing), now: []Health{{Cluster: "m2", Ready: true}, missing},
			wantNext: failing(missing),
			want:     []Transition{{Cluster: "m2", Was: hubv1alpha1.ConflictReason}},
		},
		{
			name: "neither failing nor Ready yet (being placed): no recovery yet", last: failing(conflict), now: []Health{{Cluster: "m2"}},
			wantNext: failing(conflict),
		},
		{
			name: "a member not Ready fails", now: []Health{{Cluster: "m2", Failure: fail("m2", hubv1alpha1.UnreachableReason)}},
			wantNext: failing(Health{Cluster: "m2", Failure: fail("m2", hubv1alpha1.UnreachableReason)}),
			want:     []Transition{{Cluster: "m2", Failure: fail("m2", hubv1alpha1.UnreachableReason)}},
		},
		{name: "no longer selected: forgotten without a transition", last: failing(conflict, missing), now: nil, wantNext: failing()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, got := Transitions(tc.last, tc.now)
			if d := cmp.Diff(tc.wantNext, next); d != "" {
				t.Errorf("remembered (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("transitions (-want +got):\n%s", d)
			}
		})
	}
}
