package spokeprovider

import (
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestUncovered: which rights a SelfSubjectRulesReview's rules do not grant, by RBAC's matching.
func TestUncovered(t *testing.T) {
	t.Parallel()
	right := func(verb, group, resource, subresource, name string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Subresource: subresource, Name: name}
	}
	rule := func(verbs, groups, resources, names []string) authorizationv1.ResourceRule {
		return authorizationv1.ResourceRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
	}
	l := func(s ...string) []string { return s }
	l2 := func(r ...authorizationv1.ResourceAttributes) []authorizationv1.ResourceAttributes { return r }
	updateCM := right("update", "", "configmaps", "", "")
	listCM := right("list", "", "configmaps", "", "")
	updateStatus := right("update", "configbundle.dev", "configbundles", "status", "")
	updateBundles := right("update", "configbundle.dev", "configbundles", "", "")
	getKubeSystem := right("get", "", "namespaces", "", "kube-system")

	tests := []struct {
		name   string
		rules  []authorizationv1.ResourceRule
		rights []authorizationv1.ResourceAttributes
		want   []authorizationv1.ResourceAttributes
	}{
		{"no rules grant nothing", nil, l2(updateCM, getKubeSystem), l2(updateCM, getKubeSystem)},
		{"no rights to check", []authorizationv1.ResourceRule{rule(l("*"), l("*"), l("*"), nil)}, nil, nil},
		{"the exact rule", []authorizationv1.ResourceRule{rule(l("get", "update"), l(""), l("configmaps"), nil)}, l2(updateCM, listCM), l2(listCM)},
		{"a verb wildcard", []authorizationv1.ResourceRule{rule(l("*"), l(""), l("configmaps"), nil)}, l2(updateCM, listCM), nil},
		{"an API group wildcard", []authorizationv1.ResourceRule{rule(l("update"), l("*"), l("configmaps", "configbundles"), nil)}, l2(updateCM, updateBundles), nil},
		{"another API group does not grant", []authorizationv1.ResourceRule{rule(l("update"), l("apps"), l("configmaps"), nil)}, l2(updateCM), l2(updateCM)},
		{"a resource wildcard grants subresources too", []authorizationv1.ResourceRule{rule(l("update"), l("configbundle.dev"), l("*"), nil)}, l2(updateBundles, updateStatus), nil},
		{"cluster-admin", []authorizationv1.ResourceRule{rule(l("*"), l("*"), l("*"), nil)}, l2(updateCM, updateStatus, getKubeSystem), nil},
		{"a resource does not grant its subresource", []authorizationv1.ResourceRule{rule(l("update"), l("configbundle.dev"), l("configbundles"), nil)}, l2(updateBundles, updateStatus), l2(updateStatus)},
		{"a subresource does not grant its resource", []authorizationv1.ResourceRule{rule(l("update"), l("configbundle.dev"), l("configbundles/status"), nil)}, l2(updateBundles, updateStatus), l2(updateBundles)},
		{"*/status grants every status", []authorizationv1.ResourceRule{rule(l("update"), l("configbundle.dev"), l("*/status"), nil)}, l2(updateBundles, updateStatus), l2(updateBundles)},
		{"*/scale does not grant a status", []authorizationv1.ResourceRule{rule(l("update"), l("configbundle.dev"), l("*/scale"), nil)}, l2(updateStatus), l2(updateStatus)},
		{"resourceNames grant the objects named", []authorizationv1.ResourceRule{rule(l("get"), l(""), l("namespaces"), l("default", "kube-system"))}, l2(getKubeSystem), nil},
		{"resourceNames do not grant other objects", []authorizationv1.ResourceRule{rule(l("get"), l(""), l("namespaces"), l("default"))}, l2(getKubeSystem), l2(getKubeSystem)},
		{"resourceNames never grant every object", []authorizationv1.ResourceRule{rule(l("update", "list"), l(""), l("configmaps"), l("greeting"))}, l2(updateCM, listCM), l2(updateCM, listCM)},
		{"a rule without resourceNames grants a named object", []authorizationv1.ResourceRule{rule(l("get"), l(""), l("namespaces"), nil)}, l2(getKubeSystem), nil},
		{"rights granted by several rules", []authorizationv1.ResourceRule{
			rule(l("update"), l(""), l("configmaps"), nil), rule(l("list"), l(""), l("configmaps"), nil), rule(l("update"), l("configbundle.dev"), l("configbundles/status"), nil),
		}, l2(updateCM, listCM, updateStatus, updateBundles), l2(updateBundles)},
		{"the order of the rights is kept", nil, l2(updateStatus, updateCM, listCM), l2(updateStatus, updateCM, listCM)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := uncovered(tt.rules, tt.rights)
			if len(got) != len(tt.want) {
				t.Fatalf("uncovered = %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("uncovered = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// TestRightsOf: a ClusterRole's rules expand into one right per verb, resource and name; the
// rights of a rule are granted by that very rule.
func TestRightsOf(t *testing.T) {
	t.Parallel()
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{"configbundle.dev"}, Resources: []string{"configbundles/status"}, Verbs: []string{"update"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{"kube-system"}, Verbs: []string{"get"}},
		{NonResourceURLs: []string{"/version"}, Verbs: []string{"get"}},
	}
	var got []string
	for _, r := range RightsOf(rules) {
		got = append(got, describeRight(r))
	}
	want := "get configmaps, update configmaps, update configbundles.configbundle.dev/status, get namespaces named kube-system"
	if strings.Join(got, ", ") != want {
		t.Errorf("RightsOf = %q, want %q", strings.Join(got, ", "), want)
	}
	var granted []authorizationv1.ResourceRule
	for _, r := range rules {
		granted = append(granted, authorizationv1.ResourceRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
	}
	if missing := uncovered(granted, RightsOf(rules)); len(missing) != 0 {
		t.Errorf("rules do not grant their own rights: %v", missing)
	}
}
