package e2e

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/config"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
)

// guardedMember is the member of TestGuardHoldsWhileTheHubIsStopped: it runs a garbage
// collector (a kube-controller-manager, as system:kube-controller-manager), which knows the
// ConfigBundle kind from the start.
const guardedMember = "guarded"

// TestGuardHoldsWhileTheHubIsStopped: the hub keeps its guard policy in a member it joins
// (Guarded=True). With the hub process stopped, `kubectl edit` and `kubectl delete` of a
// guarded ConfigMap by the member's admin are refused with a message naming the ConfigBundle,
// and deleting the bundle still removes the ConfigMap, through the garbage collector.
func TestGuardHoldsWhileTheHubIsStopped(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	crds, err := config.MemberCRDs()
	g.Expect(err).NotTo(HaveOccurred())
	start := time.Now()
	members, err := fl.AddMembers(ctx, controlplane.Plane{Name: guardedMember, Options: controlplane.Options{CRDs: crds, GarbageCollector: true}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("started member %s: %v", guardedMember, time.Since(start).Round(time.Millisecond))
	m := members[0]
	fl.MustRegister(t, guardedMember)
	t.Cleanup(func() {
		secretLabel(g, guardedMember, false)
		g.Eventually(memberClusterGone(guardedMember)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	})
	g.Eventually(fl.MemberCluster(guardedMember)).WithTimeout(joinTimeout).WithPolling(interval).Should(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason))
	g.Eventually(func(g Gomega) *metav1.Condition {
		return meta.FindStatusCondition(fl.MemberCluster(guardedMember)(g).Status.Conditions, hubv1alpha1.GuardedCondition)
	}).WithTimeout(timeout).WithPolling(interval).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", hubv1alpha1.GuardInstalledReason)))

	// A bundle whose ConfigMap carries the guard label, as the hub sets it for driftPolicy Guard.
	const ns = "guarded"
	ensureNamespace(g, guardedMember, ns)
	b := fleet.NewBundle(ns, "web", "v1")
	b.Labels = map[string]string{configbundlev1alpha1.GuardLabel: "true"}
	g.Expect(m.Client.Create(ctx, b)).To(Succeed())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: b.Name}}
	g.Eventually(func(g Gomega) map[string]string {
		g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
		return cm.Labels
	}).WithTimeout(timeout).WithPolling(interval).Should(HaveKeyWithValue(configbundlev1alpha1.GuardLabel, "true"))

	g.Eventually(func() error { // until the member's API server enforces the policy: a dry run goes through admission
		return m.Client.Update(ctx, cm.DeepCopy(), client.DryRunAll)
	}).WithTimeout(timeout).WithPolling(interval).Should(Satisfy(apierrors.IsForbidden))

	fl.StopHub(fleet.HubName, syscall.SIGTERM)
	t.Cleanup(func() { g.Expect(startHub()).To(Succeed()) })

	// The member's admin, not the hub, edits and deletes it: both refused, naming the bundle.
	edit := exec.Command(kubectl, "--kubeconfig", m.Plane.KubeconfigPath, "edit", "-n", ns, "configmap/"+b.Name)
	edit.Env = append(os.Environ(), "KUBE_EDITOR=sed -i 's/message: v1/message: edited/'")
	out, err := edit.CombinedOutput()
	t.Logf("kubectl edit: %s", out)
	g.Expect(err).To(HaveOccurred())
	g.Expect(string(out)).To(And(ContainSubstring("ConfigBundle web"), ContainSubstring("change the ConfigBundle web instead")))
	out, err = exec.Command(kubectl, "--kubeconfig", m.Plane.KubeconfigPath, "delete", "-n", ns, "configmap", b.Name).CombinedOutput()
	t.Logf("kubectl delete: %s", out)
	g.Expect(err).To(HaveOccurred())
	g.Expect(string(out)).To(ContainSubstring("ConfigBundle web"))
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue(configbundlev1alpha1.MessageKey, "v1"))

	// Deleting the bundle removes its ConfigMap: the garbage collector passes the guard.
	g.Expect(m.Client.Delete(ctx, b)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(m.Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the garbage collector deletes the guarded ConfigMap")
}
