package tenancy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// fleetBundle is a FleetBundle of namespace team selecting every member.
func fleetBundle() *hubv1alpha1.FleetBundle {
	return &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web"},
		Spec: hubv1alpha1.FleetBundleSpec{ClusterSelector: &metav1.LabelSelector{}}}
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
			fb := fleetBundle()
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
