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
// FleetBundle that places ConfigMaps, a 17th source and an invalid prefix, each with a message
// naming the rule; it admits 16 sources.
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
	tests := []struct {
		name     string
		dataFrom []hubv1alpha1.DataFromSource
		refused  string // "" if admitted
	}{
		{"both refs in one entry", []hubv1alpha1.DataFromSource{{ConfigMapRef: ref, SecretRef: ref}}, "exactly one of configMapRef and secretRef"},
		{"no ref", []hubv1alpha1.DataFromSource{{Prefix: "p-"}}, "exactly one of configMapRef and secretRef"},
		{"a secretRef on a ConfigMap target", []hubv1alpha1.DataFromSource{{SecretRef: ref}}, "a Secret's data never lands in a ConfigMap"},
		{"a 17th source", sources(hubv1alpha1.MaxDataFromSources + 1), "spec.dataFrom: Too many"},
		{"a prefix starting with ..", []hubv1alpha1.DataFromSource{{ConfigMapRef: ref, Prefix: "..x"}}, "prefix must not start with '..'"},
		{"an invalid key", []hubv1alpha1.DataFromSource{{ConfigMapRef: ref, Keys: []string{"a/b"}}}, "spec.dataFrom[0].keys[0]"},
		{"16 sources", sources(hubv1alpha1.MaxDataFromSources), ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("fb-%d", i)}, Spec: hubv1alpha1.FleetBundleSpec{
				ClusterSelector: selecting("test.admission/nobody"), DataFrom: tt.dataFrom,
			}}
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
