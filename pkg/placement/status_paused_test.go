package placement

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/tenancy"
)

// everyMember is the Boundary of fb with a set of every member bound to its namespace.
func everyMember(fb *hubv1alpha1.FleetBundle) tenancy.Boundary {
	global := hubv1alpha1.ClusterSet{ObjectMeta: metav1.ObjectMeta{Name: "global"}}
	bound := hubv1alpha1.ClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: fb.Namespace, Name: "global"},
		Spec: hubv1alpha1.ClusterSetBindingSpec{ClusterSet: "global"}}
	return tenancy.BoundaryOf(fb, []hubv1alpha1.ClusterSet{global}, []hubv1alpha1.ClusterSetBinding{bound})
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
		boundary tenancy.Boundary
		members  []MemberView
		counts   hubv1alpha1.PlacementCounts
		status   metav1.ConditionStatus
		reason   string
		message  string
	}{
		{name: "no bound set", boundary: tenancy.BoundaryOf(fb, nil, nil),
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
	unbound := func(fb *hubv1alpha1.FleetBundle) tenancy.Boundary { return tenancy.BoundaryOf(fb, nil, nil) }
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
	unbound := Totals(fb, tenancy.BoundaryOf(fb, nil, nil), nil, 0, metav1.Now())
	if c := meta.FindStatusCondition(unbound.Conditions, hubv1alpha1.ReadyCondition); c == nil || c.Reason != hubv1alpha1.NoClusterSetBindingReason {
		t.Errorf("Ready without a bound set: %+v, want NoClusterSetBinding", c)
	}
}
