package fleet_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

func TestSample(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	scrape := "# HELP x y\n" +
		`configbundle_heals_total{cluster="m1"} 10` + "\n" +
		`configbundle_heals_total{cluster="m10"} 3` + "\n" +
		"go_goroutines 42\n"
	g.Expect(fleet.Sample(scrape, `configbundle_heals_total{cluster="m1"}`)).To(Equal(10.0))
	g.Expect(fleet.Sample(scrape, "go_goroutines")).To(Equal(42.0))
	g.Expect(fleet.Sample(scrape, `configbundle_heals_total{cluster="m2"}`)).To(Equal(-1.0), "a series the scrape lacks")
}

func TestReadyIs(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	mc := &hubv1alpha1.MemberCluster{Status: hubv1alpha1.MemberClusterStatus{Conditions: []metav1.Condition{
		{Type: hubv1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: hubv1alpha1.UnreachableReason},
	}}}
	g.Expect(mc).To(fleet.ReadyIs(metav1.ConditionFalse, hubv1alpha1.UnreachableReason))
	g.Expect(mc).NotTo(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason))
	g.Expect(&hubv1alpha1.Fleet{}).NotTo(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.AllReadyReason), "no Ready condition")
}

func TestBlackHoleKubeconfig(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(fleet.BlackHoleKubeconfig("127.0.0.1:4321"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Host).To(Equal("https://127.0.0.1:4321"))
	g.Expect(cfg.Insecure).To(BeTrue())
	g.Expect(cfg.BearerToken).To(Equal("t"))
}
