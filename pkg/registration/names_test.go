package registration_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/registration"
)

func TestNamesPerRegistration(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	g.Expect(registration.ServiceAccountName("eu-1")).To(Equal("configbundle-hub-eu-1"))
	g.Expect(registration.ClusterRoleBindingName("eu-1")).To(Equal("configbundle-hub-member-eu-1"))
	g.Expect(registration.ClusterRoleBindingName("member")).NotTo(Equal(registration.RBACName), "never the legacy binding's name")
	g.Expect(registration.ServiceAccountName("x")).NotTo(Equal(registration.LegacyServiceAccountName))

	// Registration names may be DNS-1123 subdomains of up to 253 characters; derived names stay
	// valid, at most 63 characters, and distinct.
	long1 := strings.Repeat("a", 60) + ".example.com-" + strings.Repeat("b", 100)
	long2 := strings.Repeat("a", 60) + ".example.com-" + strings.Repeat("c", 100)
	dotted := strings.Repeat("d", 25) + "." + strings.Repeat("e", 60)
	seen := map[string]string{}
	for _, name := range []string{"eu-1", "a.b.c", long1, long2, dotted, strings.Repeat("z", 253)} {
		g.Expect(validation.IsDNS1123Subdomain(name)).To(BeEmpty(), "test input %q", name)
		for _, derived := range []string{registration.ServiceAccountName(name), registration.ClusterRoleBindingName(name)} {
			g.Expect(len(derived)).To(BeNumerically("<=", 63), derived)
			g.Expect(validation.IsDNS1123Subdomain(derived)).To(BeEmpty(), derived)
			g.Expect(seen).NotTo(HaveKey(derived), "%q and %q", name, seen[derived])
			seen[derived] = name
		}
	}
	g.Expect(registration.ServiceAccountName(long1)).To(HavePrefix("configbundle-hub-aaaa"))
}

func TestParseLabels(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want map[string]string
		err  string
	}{
		{"none", nil, nil, ""},
		{"one", []string{"env=prod"}, map[string]string{"env": "prod"}, ""},
		{"prefixed key, empty value", []string{"example.com/team=", "tier=1"}, map[string]string{"example.com/team": "", "tier": "1"}, ""},
		{"value with an equals sign is refused", []string{"a=b=c"}, nil, `invalid value "b=c" of label "a"`},
		{"no equals sign", []string{"env"}, nil, `invalid label "env": want KEY=VALUE`},
		{"empty key", []string{"=x"}, nil, `invalid label key ""`},
		{"bad key", []string{"Not Valid=x"}, nil, `invalid label key "Not Valid"`},
		{"bad value", []string{"env=" + strings.Repeat("v", 64)}, nil, "invalid value"},
		{"twice", []string{"env=a", "env=b"}, nil, `"env" is given twice`},
		{"reserved", []string{hubv1alpha1.ManagedByLabel + "=me"}, nil, "reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			got, err := registration.ParseLabels(tc.args)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}
