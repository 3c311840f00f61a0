package placement

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// clusterSet is a ClusterSet of name selecting the members with labels (nil: every member).
func clusterSet(name string, labels map[string]string) hubv1alpha1.ClusterSet {
	return hubv1alpha1.ClusterSet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: hubv1alpha1.ClusterSetSpec{ClusterSelector: metav1.LabelSelector{MatchLabels: labels}}}
}

// binding is the ClusterSetBinding of set into namespace ns.
func binding(ns, set string) hubv1alpha1.ClusterSetBinding {
	return hubv1alpha1.ClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: set},
		Spec: hubv1alpha1.ClusterSetBindingSpec{ClusterSet: set}}
}

// everyMember is the Boundary of fb with a set of every member bound to its namespace.
func everyMember(fb *hubv1alpha1.FleetBundle) Boundary {
	return BoundaryOf(fb, []hubv1alpha1.ClusterSet{clusterSet("global", nil)}, []hubv1alpha1.ClusterSetBinding{binding(fb.Namespace, "global")})
}

// TestBoundary: a FleetBundle selects a member only if one of the sets bound to its namespace
// (that exist, and that spec.clusterSets names, if it names any) selects it, and its own
// clusterSelector does; with no such set it is unbound, and says why.
func TestBoundary(t *testing.T) {
	invalid := clusterSet("invalid", nil)
	invalid.Spec.ClusterSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn}}
	sets := []hubv1alpha1.ClusterSet{clusterSet("global", nil), clusterSet("eu", map[string]string{"region": "eu"}),
		clusterSet("us", map[string]string{"region": "us"}), invalid}
	eu := map[string]string{"region": "eu", "env": "prod"}
	us := map[string]string{"region": "us", "env": "prod"}
	asia := map[string]string{"region": "asia", "env": "prod"}
	for _, tc := range []struct {
		name     string
		bindings []hubv1alpha1.ClusterSetBinding
		named    []string
		selector *metav1.LabelSelector
		// noSelector leaves spec.clusterSelector absent (else selector, or {} if nil).
		noSelector bool
		// selects are the members (eu, us, asia) selected, in that order.
		selects []bool
		bound   []string
		// unbound are substrings of the NoClusterSetBinding message; nil: some set is bound.
		unbound []string
	}{
		{name: "no binding", selects: []bool{false, false, false},
			unbound: []string{"No ClusterSet is bound to namespace team", "clustersets/bind"}},
		{name: "a binding of another namespace", bindings: []hubv1alpha1.ClusterSetBinding{binding("other", "global")},
			selects: []bool{false, false, false}, unbound: []string{"namespace team"}},
		{name: "the global set", bindings: []hubv1alpha1.ClusterSetBinding{binding("team", "global")},
			selects: []bool{true, true, true}, bound: []string{"global"}},
		{name: "one set", bindings: []hubv1alpha1.ClusterSetBinding{binding("team", "eu")},
			selects: []bool{true, false, false}, bound: []string{"eu"}},
		{name: "the union of two sets", bindings: []hubv1alpha1.ClusterSetBinding{binding("team", "us"), binding("team", "eu")},
			selects: []bool{true, true, false}, bound: []string{"eu", "us"}},
		{name: "narrowed by the clusterSelector", bindings: []hubv1alpha1.ClusterSetBinding{binding("team", "global")},
			selector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "us"}}, selects: []bool{false, true, false}, bound: []string{"global"}},
		{name: "an absent clusterSelector selects none", bindings: []hubv1alpha1.ClusterSetBinding{binding("team", "global")},
			noSelector: true, selects: []bool{false, false, false}, bound: []string{"global"}},
		{name: "narrowed by spec.clusterSets", bindings: []hubv1alpha1.ClusterSetBinding{binding("team", "us"), binding("team", "eu")},
			named: []string{"eu", "asia"}, selects: []bool{true, false, false}, bound: []string{"eu"}},
		{name: "spec.clusterSets names no bound set", bindings: []hubv1alpha1.ClusterSetBinding{binding("team", "us")},
			named: []string{"eu"}, selects: []bool{false, false, false},
			unbound: []string{"None of the ClusterSets spec.clusterSets names (eu) is bound to namespace team (bound there: us)"}},
		{name: "spec.clusterSets without any binding", named: []string{"eu"}, selects: []bool{false, false, false},
			unbound: []string{"No ClusterSet is bound to namespace team, so none of those spec.clusterSets names (eu)"}},
		{name: "a binding whose set is missing", bindings: []hubv1alpha1.ClusterSetBinding{binding("team", "gone")},
			selects: []bool{false, false, false}, unbound: []string{"No ClusterSet is bound to namespace team", "ClusterSetBindings of gone name no existing ClusterSet"}},
		{name: "a missing set besides a bound one", bindings: []hubv1alpha1.ClusterSetBinding{binding("team", "gone"), binding("team", "eu")},
			selects: []bool{true, false, false}, bound: []string{"eu"}},
		{name: "a set with an invalid selector is bound and selects none", bindings: []hubv1alpha1.ClusterSetBinding{binding("team", "invalid")},
			selects: []bool{false, false, false}, bound: []string{"invalid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := fleetBundle("hello")
			fb.Spec.ClusterSets, fb.Spec.ClusterSelector = tc.named, tc.selector
			if tc.selector == nil && !tc.noSelector {
				fb.Spec.ClusterSelector = &metav1.LabelSelector{}
			}
			b := BoundaryOf(fb, sets, tc.bindings)
			var got []bool
			for _, m := range []map[string]string{eu, us, asia} {
				got = append(got, b.Selects(fb, m))
			}
			if diff := cmp.Diff(tc.selects, got); diff != "" {
				t.Errorf("selects eu, us, asia (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.bound, b.Bound); diff != "" {
				t.Errorf("bound sets (-want +got):\n%s", diff)
			}
			if b.HasBound() != (tc.unbound == nil) {
				t.Errorf("HasBound = %t, want %t", b.HasBound(), tc.unbound == nil)
			}
			msg := b.Unbound()
			for _, want := range tc.unbound {
				if !strings.Contains(msg, want) {
					t.Errorf("Unbound() = %q, want it to contain %q", msg, want)
				}
			}
			if tc.unbound == nil && msg != "" {
				t.Errorf("Unbound() = %q, want none", msg)
			}
		})
	}
}

// TestStatusWithPausedAndUnbound: a paused member is counted in selected and paused only, never
// failed, whatever it holds; Ready compares the Ready members with those not paused; a
// FleetBundle whose namespace binds no set is NoClusterSetBinding, after the spec's own errors.
func TestStatusWithPausedAndUnbound(t *testing.T) {
	fb := fleetBundle("hello")
	ready := func(name string) MemberView {
		return MemberView{Name: name, Bundle: placedBundle(fb, metav1.ConditionTrue, configbundlev1alpha1.SyncedReason)}
	}
	paused := func(v MemberView) MemberView { v.Paused = true; return v }
	failing := MemberView{Name: "m3", NotReady: Outcome{Reason: hubv1alpha1.UnreachableReason}}
	for _, tc := range []struct {
		name     string
		boundary Boundary
		members  []MemberView
		counts   hubv1alpha1.PlacementCounts
		status   metav1.ConditionStatus
		reason   string
		message  string
	}{
		{name: "no bound set", boundary: BoundaryOf(fb, nil, nil),
			status: metav1.ConditionFalse, reason: hubv1alpha1.NoClusterSetBindingReason, message: "No ClusterSet is bound to namespace team"},
		{name: "none selected among the bound sets", boundary: everyMember(fb),
			status: metav1.ConditionTrue, reason: hubv1alpha1.NoClustersSelectedReason, message: "selects no member of the ClusterSets bound to namespace team (global)"},
		{name: "one ready, one paused", boundary: everyMember(fb), members: []MemberView{ready("m1"), paused(ready("m2"))},
			counts: hubv1alpha1.PlacementCounts{Selected: 2, Paused: 1, Applied: 1, Ready: 1},
			status: metav1.ConditionTrue, reason: hubv1alpha1.AllReadyReason, message: "Ready in all 1 selected members that are not paused (1 paused"},
		{name: "a paused member that is unreachable or holds nothing is no failure", boundary: everyMember(fb),
			members: []MemberView{ready("m1"), paused(failing), paused(MemberView{Name: "m4"})},
			counts:  hubv1alpha1.PlacementCounts{Selected: 3, Paused: 2, Applied: 1, Ready: 1},
			status:  metav1.ConditionTrue, reason: hubv1alpha1.AllReadyReason},
		{name: "all paused", boundary: everyMember(fb), members: []MemberView{paused(ready("m1")), paused(failing)},
			counts: hubv1alpha1.PlacementCounts{Selected: 2, Paused: 2},
			status: metav1.ConditionTrue, reason: hubv1alpha1.AllReadyReason, message: "All 2 selected members are paused"},
		{name: "one progressing, one paused", boundary: everyMember(fb), members: []MemberView{{Name: "m1"}, paused(ready("m2"))},
			counts: hubv1alpha1.PlacementCounts{Selected: 2, Paused: 1},
			status: metav1.ConditionFalse, reason: hubv1alpha1.ProgressingReason, message: "Ready in 0 of the 1 selected members that are not paused"},
		{name: "a failure besides a paused member", boundary: everyMember(fb), members: []MemberView{failing, paused(ready("m2"))},
			counts: hubv1alpha1.PlacementCounts{Selected: 2, Paused: 1, Failed: 1},
			status: metav1.ConditionFalse, reason: hubv1alpha1.ClustersFailedReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := ComputeStatus(fb, tc.boundary, tc.members, 0, metav1.Now())
			if diff := cmp.Diff(tc.counts, st.Clusters); diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
			c := meta.FindStatusCondition(st.Conditions, hubv1alpha1.ReadyCondition)
			if c == nil || c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.message) {
				t.Errorf("Ready = %+v, want %s %s with %q", c, tc.status, tc.reason, tc.message)
			}
		})
	}
}

// TestNoClusterSetBindingPrecedence: the spec's own errors come before NoClusterSetBinding, which
// comes before NoClustersSelected.
func TestNoClusterSetBindingPrecedence(t *testing.T) {
	unbound := func(fb *hubv1alpha1.FleetBundle) Boundary { return BoundaryOf(fb, nil, nil) }
	for _, tc := range []struct {
		name   string
		edit   func(*hubv1alpha1.FleetBundle)
		reason string
	}{
		{name: "name too long", edit: func(fb *hubv1alpha1.FleetBundle) { fb.Name = strings.Repeat("n", 70) }, reason: hubv1alpha1.NameTooLongReason},
		{name: "invalid selector", edit: func(fb *hubv1alpha1.FleetBundle) {
			fb.Spec.ClusterSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn}}}
		}, reason: hubv1alpha1.InvalidSelectorReason},
		{name: "invalid template", edit: func(fb *hubv1alpha1.FleetBundle) {
			fb.UID = "uid-precedence-invalid-template"
			fb.Spec.TemplateEngine = hubv1alpha1.TemplateEngineGoTemplate
			fb.Spec.Template.Spec.Message = "{{ .Cluster"
		}, reason: hubv1alpha1.InvalidTemplateReason},
		{name: "no clusterSelector", edit: func(fb *hubv1alpha1.FleetBundle) { fb.Spec.ClusterSelector = nil }, reason: hubv1alpha1.NoClusterSetBindingReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := fleetBundle("hello")
			tc.edit(fb)
			c := meta.FindStatusCondition(ComputeStatus(fb, unbound(fb), nil, 0, metav1.Now()).Conditions, hubv1alpha1.ReadyCondition)
			if c == nil || c.Reason != tc.reason || c.Status != metav1.ConditionFalse {
				t.Errorf("Ready = %+v, want False %s", c, tc.reason)
			}
		})
	}
}

// TestShareAndTotalsCountPaused: the shares count their paused members, and the totals sum them.
func TestShareAndTotalsCountPaused(t *testing.T) {
	fb := fleetBundle("hello")
	held := MemberView{Name: "m1", Bundle: placedBundle(fb, metav1.ConditionTrue, configbundlev1alpha1.SyncedReason)}
	pausedHolding := held
	pausedHolding.Name, pausedHolding.Paused = "m2", true
	shares := []hubv1alpha1.FleetBundleReplicaStatus{
		Share(fb, "r0", []MemberView{held, pausedHolding}, nil, 0),
		Share(fb, "r1", []MemberView{{Name: "m3", Paused: true}}, nil, 0),
	}
	if got := shares[0]; got.Clusters != (hubv1alpha1.PlacementCounts{Selected: 2, Paused: 1, Applied: 1, Ready: 1}) || got.Holding != 1 {
		t.Errorf("r0's share: %+v, want 1 paused, holding 1 (a paused member does not hold a deletion back)", got)
	}
	totals := Totals(fb, everyMember(fb), shares, 3, metav1.Now())
	if want := (hubv1alpha1.PlacementCounts{Selected: 3, Paused: 2, Applied: 1, Ready: 1}); totals.Clusters != want {
		t.Errorf("totals: %+v, want %+v", totals.Clusters, want)
	}
	if c := meta.FindStatusCondition(totals.Conditions, hubv1alpha1.ReadyCondition); c == nil || c.Reason != hubv1alpha1.AllReadyReason {
		t.Errorf("Ready: %+v, want AllReady", c)
	}
	unbound := Totals(fb, BoundaryOf(fb, nil, nil), nil, 0, metav1.Now())
	if c := meta.FindStatusCondition(unbound.Conditions, hubv1alpha1.ReadyCondition); c == nil || c.Reason != hubv1alpha1.NoClusterSetBindingReason {
		t.Errorf("Ready without a bound set: %+v, want NoClusterSetBinding", c)
	}
}

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
