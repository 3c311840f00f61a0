package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/pkg/registration"
)

// TestFaultRBACLossIsForbidden: a reproduction of a defect once shipped. The ClusterRoleBinding that grants the
// hub its rights in a member is deleted (kubectl delete clusterrolebinding
// configbundle-hub-member-<member>) and a managed ConfigMap tampered with: within about one probe
// the MemberCluster is Ready=False Forbidden, naming the verbs and resources refused, the Fleet is
// not Ready and `hub status` fails. `hub register` again restores the binding: the member is
// Connected again and the ConfigMap tampered with meanwhile is healed.
func TestFaultRBACLossIsForbidden(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const name = "m2"
	joined(t, name)
	defer fl.MustRegister(t, name) // whatever happens, the next tests find the member allowed
	b := createBundle(g, name, "rbac-loss", "greeting", "hello")
	defer func() { g.Expect(client.IgnoreNotFound(fl.Member(name).Client.Delete(ctx, b))).To(Succeed()) }()

	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: registration.ClusterRoleBindingName(name)}}
	g.Expect(fl.Member(name).Client.Delete(ctx, binding)).To(Succeed())
	lost := time.Now()
	tamper(g, name, b)

	g.Eventually(fl.MemberCluster(name)).WithTimeout(timeout).WithPolling(interval).Should(
		fleet.ReadyIs(metav1.ConditionFalse, hubv1alpha1.ForbiddenReason))
	took := time.Since(lost)
	t.Logf("Forbidden %v after the ClusterRoleBinding's deletion (probe interval %v)", took.Round(time.Millisecond), probeInterval)
	g.Expect(took).To(BeNumerically("<", 2*probeInterval+time.Second), "within about one probe")
	mc := fl.MemberCluster(name)(g)
	ready := meta.FindStatusCondition(mc.Status.Conditions, hubv1alpha1.ReadyCondition)
	g.Expect(ready.Message).To(And(HavePrefix("the hub's credential may not "),
		ContainSubstring("update configmaps"), ContainSubstring("update configbundles.configbundle.dev/status")))
	t.Logf("failed bundles meanwhile: %+v", mc.Status.FailedBundles)

	g.Eventually(fl.Fleet).WithTimeout(timeout).WithPolling(interval).Should(
		fleet.ReadyIs(metav1.ConditionFalse, hubv1alpha1.MembersNotReadyReason))
	g.Expect(meta.FindStatusCondition(fl.Fleet(g).Status.Conditions, hubv1alpha1.ReadyCondition).Message).To(
		ContainSubstring(name + " (" + hubv1alpha1.ForbiddenReason + ")"))
	code, stdout, stderr := hubCommand(t, "status", "--hub-kubeconfig", fl.HubPlane.KubeconfigPath)
	g.Expect(code).NotTo(BeZero(), "hub status fails:\n%s%s", stdout, stderr)
	g.Expect(stdout).To(MatchRegexp(name + `\s+False\s+` + hubv1alpha1.ForbiddenReason))
	g.Expect(fl.Member(name).Message(b)(g)).To(Equal("tampered"), "the hub may not heal it")

	fl.MustRegister(t, name)
	registered := time.Now()
	g.Eventually(fl.MemberCluster(name)).WithTimeout(timeout).WithPolling(interval).Should(
		fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason))
	g.Eventually(fl.Member(name).Message(b)).WithTimeout(timeout).WithPolling(interval).Should(Equal("hello"), "healed once allowed again")
	t.Logf("Connected and healed %v after registering again", time.Since(registered).Round(time.Millisecond))
	g.Eventually(func(g Gomega) []hubv1alpha1.FailedBundle { return fl.MemberCluster(name)(g).Status.FailedBundles }).
		WithTimeout(timeout).WithPolling(interval).Should(BeEmpty())
}
