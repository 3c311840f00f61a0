package placement_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// TestDataFromAdmission: the CRD refuses an entry with both refs or none, a secretRef in a
// FleetBundle that places ConfigMaps, a configMapRef, literal values or no source in one that
// places Secrets, a 17th source and an invalid prefix, each with a message naming the rule; it
// admits 16 sources, and secretRef sources for a Secret.
func TestDataFromAdmission(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ref := &hubv1alpha1.SourceReference{Name: "ca"}
	sources := func(n int) []hubv1alpha1.DataFromSource {
		out := make([]hubv1alpha1.DataFromSource, n)
		for i := range out {
			out[i] = hubv1alpha1.DataFromSource{ConfigMapRef: &hubv1alpha1.SourceReference{Name: fmt.Sprintf("s%d", i)}, Prefix: fmt.Sprintf("s%d-", i)}
		}
		return out
	}
	secretTarget := func(spec configbundlev1alpha1.ConfigBundleSpec) *configbundlev1alpha1.ConfigBundleSpec {
		spec.Target = configbundlev1alpha1.TargetSecret
		return &spec
	}
	tests := []struct {
		name     string
		dataFrom []hubv1alpha1.DataFromSource
		refused  string // "" if admitted
		// spec is the template's spec; absent: an empty one (target ConfigMap).
		spec      *configbundlev1alpha1.ConfigBundleSpec
		overrides []hubv1alpha1.TemplateOverride
	}{
		{name: "a secretRef on a Secret target", dataFrom: []hubv1alpha1.DataFromSource{{SecretRef: ref}}, spec: secretTarget(configbundlev1alpha1.ConfigBundleSpec{})},
		{name: "a configMapRef on a Secret target", dataFrom: []hubv1alpha1.DataFromSource{{SecretRef: ref}, {ConfigMapRef: ref, Prefix: "p-"}},
			spec: secretTarget(configbundlev1alpha1.ConfigBundleSpec{}), refused: "takes its data only from secretRef sources: configMapRef is not allowed"},
		{name: "a literal message on a Secret target", dataFrom: []hubv1alpha1.DataFromSource{{SecretRef: ref}},
			spec: secretTarget(configbundlev1alpha1.ConfigBundleSpec{Message: "literal"}), refused: "a bundle with target Secret holds no values"},
		{name: "literal data on a Secret target", dataFrom: []hubv1alpha1.DataFromSource{{SecretRef: ref}},
			spec: secretTarget(configbundlev1alpha1.ConfigBundleSpec{Data: map[string]configbundlev1alpha1.DataValue{"k": "v"}}), refused: "a bundle with target Secret holds no values"},
		{name: "an override's data on a Secret target", dataFrom: []hubv1alpha1.DataFromSource{{SecretRef: ref}}, spec: secretTarget(configbundlev1alpha1.ConfigBundleSpec{}),
			overrides: []hubv1alpha1.TemplateOverride{{Name: "o", Data: map[string]configbundlev1alpha1.DataValue{"k": "v"}}}, refused: "its overrides set no message or data"},
		{name: "a Secret target without sources", spec: secretTarget(configbundlev1alpha1.ConfigBundleSpec{}), refused: "dataFrom is required in a FleetBundle that places a Secret"},
		{name: "both refs in one entry", dataFrom: []hubv1alpha1.DataFromSource{{ConfigMapRef: ref, SecretRef: ref}}, refused: "exactly one of configMapRef and secretRef"},
		{name: "no ref", dataFrom: []hubv1alpha1.DataFromSource{{Prefix: "p-"}}, refused: "exactly one of configMapRef and secretRef"},
		{name: "a secretType on a Secret target", dataFrom: []hubv1alpha1.DataFromSource{{SecretRef: ref}},
			spec: secretTarget(configbundlev1alpha1.ConfigBundleSpec{SecretType: configbundlev1alpha1.SecretTypeDockerConfigJSON})},
		{name: "a secretType on a ConfigMap target", spec: &configbundlev1alpha1.ConfigBundleSpec{SecretType: configbundlev1alpha1.SecretTypeOpaque},
			refused: "secretType is set only with target Secret"},
		{name: "a secretRef on a ConfigMap target", dataFrom: []hubv1alpha1.DataFromSource{{SecretRef: ref}}, refused: "a Secret's data never lands in a ConfigMap"},
		{name: "a 17th source", dataFrom: sources(hubv1alpha1.MaxDataFromSources + 1), refused: "spec.dataFrom: Too many"},
		{name: "a prefix starting with ..", dataFrom: []hubv1alpha1.DataFromSource{{ConfigMapRef: ref, Prefix: "..x"}}, refused: "prefix must not start with '..'"},
		{name: "an invalid key", dataFrom: []hubv1alpha1.DataFromSource{{ConfigMapRef: ref, Keys: []string{"a/b"}}}, refused: "spec.dataFrom[0].keys[0]"},
		{name: "16 sources", dataFrom: sources(hubv1alpha1.MaxDataFromSources)},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("fb-%d", i)}, Spec: hubv1alpha1.FleetBundleSpec{
				ClusterSelector: selecting("test.admission/nobody"), DataFrom: tt.dataFrom, Overrides: tt.overrides,
			}}
			if tt.spec != nil {
				fb.Spec.Template.Spec = *tt.spec
			}
			err := hub.Create(context.Background(), fb, client.DryRunAll)
			if tt.refused == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tt.refused))
		})
	}
}

// TestDataFromKeyClashIsReported: a key that a source and the template both define is
// InvalidTemplate naming the key, and nothing is written to any member.
func TestDataFromKeyClashIsReported(t *testing.T) {
	g := NewWithT(t)
	const key = "test.sources/clash"
	ns := newNamespace(t, memberA)
	labelMember(t, memberA, key, "yes")
	putSource(t, ns, true, map[string]string{"ca.crt": "PEM-1"})
	fb := createSourced(t, ns, key, map[string]configbundlev1alpha1.DataValue{"ca.crt": "mine"})
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.InvalidTemplateReason),
		HaveField("Conditions", ContainElement(HaveField("Message", ContainSubstring(`"ca.crt"`))))))
	g.Consistently(placed(memberA, fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(BeNil(), "nothing is written")
}
