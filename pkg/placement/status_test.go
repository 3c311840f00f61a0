package placement

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/template"
)

// placedBundle is fb's bundle as a member holds it, with a Ready condition of status and reason
// ("" for none yet).
func placedBundle(fb *hubv1alpha1.FleetBundle, status metav1.ConditionStatus, reason string) *configbundlev1alpha1.ConfigBundle {
	b, err := Desired(fb, template.Member{})
	if err != nil {
		panic(err) // the tests' templates render
	}
	b.Generation, b.Status.ObservedGeneration = 1, 1
	if status != "" {
		b.Status.Conditions = []metav1.Condition{{Type: configbundlev1alpha1.ReadyCondition, Status: status, Reason: reason}}
	}
	return b
}

func TestComputeStatus(t *testing.T) {
	fb := fleetBundle("hello")
	ready := func(name string) MemberView {
		return MemberView{Name: name, Bundle: placedBundle(fb, metav1.ConditionTrue, configbundlev1alpha1.SyncedReason)}
	}
	outdated := ready("m2")
	outdated.Bundle.Spec.Message = "old"
	many := []MemberView{}
	for i := range 12 {
		many = append(many, MemberView{Name: fmt.Sprintf("m%02d", 12-i), NotReady: Outcome{Reason: hubv1alpha1.UnreachableReason}})
	}
	for _, tc := range []struct {
		name    string
		members []MemberView
		counts  hubv1alpha1.PlacementCounts
		reason  string
		failed  []string
		drifted []string
	}{
		{name: "no member selected", reason: hubv1alpha1.NoClustersSelectedReason},
		{name: "all ready", members: []MemberView{ready("m1"), ready("m2")},
			counts: hubv1alpha1.PlacementCounts{Selected: 2, Applied: 2, Ready: 2}, reason: hubv1alpha1.AllReadyReason},
		{name: "one not placed yet, one outdated", members: []MemberView{ready("m1"), outdated, {Name: "m3"}},
			counts: hubv1alpha1.PlacementCounts{Selected: 3, Applied: 1, Ready: 1}, reason: hubv1alpha1.ProgressingReason},
		{name: "placed, not reconciled yet", members: []MemberView{{Name: "m1", Bundle: placedBundle(fb, "", "")}},
			counts: hubv1alpha1.PlacementCounts{Selected: 1, Applied: 1}, reason: hubv1alpha1.ProgressingReason},
		{name: "failures of every kind, sorted", members: []MemberView{
			ready("m0"),
			{Name: "m4", Placement: Outcome{Reason: hubv1alpha1.ConflictReason}},
			{Name: "m3", NotReady: Outcome{Reason: hubv1alpha1.ForbiddenReason}},
			{Name: "m2", Bundle: placedBundle(fb, metav1.ConditionFalse, configbundlev1alpha1.ConfigMapConflictReason)},
			{Name: "m1", Placement: Outcome{Reason: hubv1alpha1.NamespaceMissingReason}},
		}, counts: hubv1alpha1.PlacementCounts{Selected: 5, Applied: 2, Ready: 1, Failed: 4}, reason: hubv1alpha1.ClustersFailedReason,
			failed: []string{"m1/NamespaceMissing", "m2/ConfigMapConflict", "m3/Forbidden", "m4/Conflict"}},
		// A hub that has just started knows none of its members yet, then connects to them.
		{name: "members joining have not failed", members: []MemberView{
			ready("m1"),
			{Name: "m2", NotReady: Outcome{Reason: hubv1alpha1.NotJoinedReason}},
			{Name: "m3", NotReady: Outcome{Reason: hubv1alpha1.ConnectingReason}},
		}, counts: hubv1alpha1.PlacementCounts{Selected: 3, Applied: 1, Ready: 1}, reason: hubv1alpha1.ProgressingReason},
		{name: "drifted members are failed, counted and named", members: []MemberView{
			ready("m0"),
			{Name: "m2", Bundle: placedBundle(fb, metav1.ConditionFalse, configbundlev1alpha1.DriftedReason)},
			{Name: "m1", Bundle: placedBundle(fb, metav1.ConditionFalse, configbundlev1alpha1.DriftedReason)},
		}, counts: hubv1alpha1.PlacementCounts{Selected: 3, Applied: 3, Ready: 1, Failed: 2, Drifted: 2}, reason: hubv1alpha1.ClustersFailedReason,
			failed: []string{"m1/Drifted", "m2/Drifted"}, drifted: []string{"m1", "m2"}},
		{name: "at most MaxFailedClusters listed", members: many,
			counts: hubv1alpha1.PlacementCounts{Selected: 12, Failed: 12}, reason: hubv1alpha1.ClustersFailedReason,
			failed: []string{"m01/Unreachable", "m02/Unreachable", "m03/Unreachable", "m04/Unreachable", "m05/Unreachable",
				"m06/Unreachable", "m07/Unreachable", "m08/Unreachable", "m09/Unreachable", "m10/Unreachable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := ComputeStatus(fb, everyMember(fb), tc.members, 0, metav1.Now())
			if diff := cmp.Diff(tc.counts, st.Clusters); diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
			var failed []string
			for _, f := range st.FailedClusters {
				failed = append(failed, f.Cluster+"/"+f.Reason)
			}
			if diff := cmp.Diff(tc.failed, failed); diff != "" {
				t.Errorf("failedClusters (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.drifted, st.DriftedClusters); diff != "" {
				t.Errorf("driftedClusters (-want +got):\n%s", diff)
			}
			c := meta.FindStatusCondition(st.Conditions, hubv1alpha1.ReadyCondition)
			if c == nil || c.Reason != tc.reason || (c.Status == metav1.ConditionTrue) != (tc.reason == hubv1alpha1.AllReadyReason || tc.reason == hubv1alpha1.NoClustersSelectedReason) {
				t.Errorf("Ready = %+v, want reason %s", c, tc.reason)
			}
			if st.ObservedGeneration != fb.Generation {
				t.Errorf("observedGeneration = %d, want %d", st.ObservedGeneration, fb.Generation)
			}
		})
	}
}

// TestComputeStatusIsStable: computed again on its own result, the status is the same (no write
// in steady state), its transition time kept; heals add up.
func TestComputeStatusIsStable(t *testing.T) {
	fb := fleetBundle("hello")
	fb.Status.Heals = 2
	members := []MemberView{{Name: "m1", Bundle: placedBundle(fb, metav1.ConditionTrue, configbundlev1alpha1.SyncedReason)}}
	first := ComputeStatus(fb, everyMember(fb), members, 1, metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second)))
	if first.Heals != 3 {
		t.Errorf("heals = %d, want 3", first.Heals)
	}
	fb.Status = first
	if diff := cmp.Diff(first, ComputeStatus(fb, everyMember(fb), members, 0, metav1.Now())); diff != "" {
		t.Errorf("status changed on recompute (-first +second):\n%s", diff)
	}
}

func TestNameTooLong(t *testing.T) {
	fb := fleetBundle("hello")
	fb.Name = string(make([]byte, 70))
	c := meta.FindStatusCondition(ComputeStatus(fb, everyMember(fb), nil, 0, metav1.Now()).Conditions, hubv1alpha1.ReadyCondition)
	if c == nil || c.Reason != hubv1alpha1.NameTooLongReason {
		t.Errorf("Ready = %+v, want NameTooLong", c)
	}
}

func TestInvalidSelector(t *testing.T) {
	fb := fleetBundle("hello")
	fb.Spec.ClusterSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn}}}
	c := meta.FindStatusCondition(ComputeStatus(fb, everyMember(fb), nil, 0, metav1.Now()).Conditions, hubv1alpha1.ReadyCondition)
	if c == nil || c.Reason != hubv1alpha1.InvalidSelectorReason || c.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %+v, want False InvalidSelector", c)
	}
}

// TestInvalidTemplateAndRenderFailed: a definition that renders for no member is the FleetBundle's
// InvalidTemplate, naming the field, and no member's failure; one that does not render for one
// member is that member's RenderFailed alone.
func TestInvalidTemplateAndRenderFailed(t *testing.T) {
	fb := fleetBundle("endpoint={{ .Cluster.Labels.region")
	fb.UID = "uid-invalid-template" // a spec is checked once per uid and generation
	fb.Spec.TemplateEngine = hubv1alpha1.TemplateEngineGoTemplate
	members := []MemberView{{Name: "m1", Labels: map[string]string{"region": "eu"}}, {Name: "m2"}}
	st := ComputeStatus(fb, everyMember(fb), members, 0, metav1.Now())
	c := meta.FindStatusCondition(st.Conditions, hubv1alpha1.ReadyCondition)
	if c == nil || c.Reason != hubv1alpha1.InvalidTemplateReason || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "spec.template.spec.message") {
		t.Errorf("Ready = %+v, want False InvalidTemplate naming spec.template.spec.message", c)
	}
	if len(st.FailedClusters) != 0 {
		t.Errorf("failedClusters = %+v, want none: the definition is at fault, not a member", st.FailedClusters)
	}

	fb.Spec.Template.Spec.Message = "endpoint={{ .Cluster.Labels.region }}"
	fb.Generation++ // as the API server does on a change of the spec
	st = ComputeStatus(fb, everyMember(fb), members, 0, metav1.Now())
	if len(st.FailedClusters) != 1 || st.FailedClusters[0].Cluster != "m2" || st.FailedClusters[0].Reason != hubv1alpha1.RenderFailedReason ||
		!strings.Contains(st.FailedClusters[0].Message, `map has no entry for key "region"`) {
		t.Errorf("failedClusters = %+v, want m2 RenderFailed for its missing region", st.FailedClusters)
	}
	if c := meta.FindStatusCondition(st.Conditions, hubv1alpha1.ReadyCondition); c == nil || c.Reason != hubv1alpha1.ClustersFailedReason {
		t.Errorf("Ready = %+v, want ClustersFailed", c)
	}
}

// TestShareAndTotals: with sharded replicas, each replica's share counts its members, and the
// totals of the shares are the status one replica seeing every member would compute.
func TestShareAndTotals(t *testing.T) {
	fb := fleetBundle("hello")
	fb.Generation = 3
	var all []MemberView
	for i := range 14 {
		name := fmt.Sprintf("m%02d", i)
		v := MemberView{Name: name, Bundle: placedBundle(fb, metav1.ConditionTrue, configbundlev1alpha1.SyncedReason)}
		if i%3 == 0 { // every third member unreachable: 5 failures, more than one share's worth
			v = MemberView{Name: name, NotReady: Outcome{Reason: hubv1alpha1.UnreachableReason, Message: "down"}}
		}
		if i%4 == 1 { // and members 1, 5, 9 and 13 drifted, in every share
			v = MemberView{Name: name, Bundle: placedBundle(fb, metav1.ConditionFalse, configbundlev1alpha1.DriftedReason)}
		}
		all = append(all, v)
	}
	// Three replicas share the members: r0 the first 6, r1 the next 6, r2 the last 2.
	parts := map[string][]MemberView{"r0": all[:6], "r1": all[6:12], "r2": all[12:]}
	var shares []hubv1alpha1.FleetBundleReplicaStatus
	for _, id := range []string{"r0", "r1", "r2"} {
		prev := &hubv1alpha1.FleetBundleReplicaStatus{Replica: id, Heals: 2}
		shares = append(shares, Share(fb, id, parts[id], prev, 1))
	}
	if got := shares[0]; got.Clusters != (hubv1alpha1.PlacementCounts{Selected: 6, Applied: 4, Ready: 2, Failed: 4, Drifted: 2}) || got.Holding != 4 || got.Heals != 3 || got.ObservedGeneration != 3 {
		t.Errorf("r0's share: %+v", got)
	}
	now := metav1.NewTime(time.Unix(1e9, 0))
	whole := ComputeStatus(fb, everyMember(fb), all, 9, now)
	totals := Totals(fb, everyMember(fb), shares, int32(len(all)), now)
	if diff := cmp.Diff(whole.Clusters, totals.Clusters); diff != "" {
		t.Errorf("counts of the shares differ from the whole's (-whole +shares):\n%s", diff)
	}
	if diff := cmp.Diff(whole.FailedClusters, totals.FailedClusters); diff != "" {
		t.Errorf("first failures differ (-whole +shares):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"m01", "m05", "m09", "m13"}, totals.DriftedClusters); diff != "" || totals.Clusters.Drifted != 4 {
		t.Errorf("drifted members of the shares (%d; -want +got):\n%s", totals.Clusters.Drifted, diff)
	}
	if diff := cmp.Diff(whole.Conditions, totals.Conditions); diff != "" {
		t.Errorf("Ready differs (-whole +shares):\n%s", diff)
	}
	if totals.Heals != 9 || len(totals.Replicas) != 3 {
		t.Errorf("heals %d (want 9), %d shares (want 3)", totals.Heals, len(totals.Replicas))
	}

	// A share of another generation counts heals only; its members are neither ready nor
	// failed until it is recomputed, and a member in no share (its replica gone) likewise.
	shares[2].ObservedGeneration = 2
	totals = Totals(fb, everyMember(fb), shares[1:], int32(len(all)), now)
	if want := (hubv1alpha1.PlacementCounts{Selected: 14, Applied: 5, Ready: 4, Failed: 2, Drifted: 1}); totals.Clusters != want {
		t.Errorf("counts with a stale share and a missing one: %+v, want %+v", totals.Clusters, want)
	}
	if c := meta.FindStatusCondition(totals.Conditions, hubv1alpha1.ReadyCondition); c == nil || c.Reason != hubv1alpha1.ClustersFailedReason {
		t.Errorf("Ready: %+v", c)
	}
}
