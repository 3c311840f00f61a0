package configbundle_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/pkg/configbundle"
)

// readonlyMember is the member of TestFaultReadOnlyCredential.
const readonlyMember = "member-readonly"

// reconcileErrors is configbundle_reconcile_errors_total of readonlyMember and a reason.
func reconcileErrors(t *testing.T, reason string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != "configbundle_reconcile_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["cluster"] == readonlyMember && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestFaultReadOnlyCredential: a member whose credential may read but not write. The hub can neither
// create the bundle's ConfigMap nor report that in the bundle's status; the error and its log
// line and the metric name the create as the cause, not the status write that failed after it;
// the outcome the reconciler keeps for the hub's reports says Forbidden (the hub may not even
// report), its message leading with the create; and so do the metric and the outcome when only
// the status write is forbidden.
func TestFaultReadOnlyCredential(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const name = readonlyMember
	admin, err := client.New(hubConfig, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "configbundle-reader"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{configbundlev1alpha1.GroupVersion.Group}, Resources: []string{"configbundles"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	g.Expect(admin.Create(ctx, role)).To(Succeed())
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "configbundle-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "reader"}},
	}
	g.Expect(admin.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() { _ = admin.Delete(ctx, binding); _ = admin.Delete(ctx, role) })
	readerConfig, err := planes["hub"].AddUser("reader", nil)
	g.Expect(err).NotTo(HaveOccurred())

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "readonly-"}}
	g.Expect(admin.Create(ctx, ns)).To(Succeed())
	b := newBundle(ns.Name, "unwritable", "x")
	g.Expect(admin.Create(ctx, b)).To(Succeed())
	// The hub's control plane runs no namespace controller: the bundle goes by hand, so that
	// other members made of this control plane do not find it.
	t.Cleanup(func() { _ = admin.Delete(ctx, b) })

	cl, err := cluster.New(readerConfig, func(o *cluster.Options) {
		o.Scheme = scheme
		configbundle.ConfigureCache(&o.Cache)
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(provider.Add(ctx, name, cl)).To(Succeed())
	t.Cleanup(func() { provider.Remove(name) })

	// The metric counts the failure under the create's reason.
	g.Eventually(func() float64 { return reconcileErrors(t, configbundlev1alpha1.CreateFailedReason) }).
		WithTimeout(timeout).WithPolling(interval).Should(BeNumerically(">", 0))
	g.Expect(reconcileErrors(t, configbundlev1alpha1.StatusWriteFailedReason)).To(BeZero(), "the status write is not the cause")
	g.Expect(reconcileErrors(t, configbundlev1alpha1.ForbiddenReason)).To(BeZero(), "the status write is not the cause")

	// The error (and so the log line) leads with the create, and says the status was not written.
	req := mcreconcile.Request{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(b)}, ClusterName: multicluster.ClusterName(name)}
	g.Eventually(func() error {
		_, err = reconciler.Reconcile(ctx, req)
		return err
	}).WithTimeout(timeout).WithPolling(interval).Should(Satisfy(apierrors.IsForbidden))
	t.Logf("reconcile error: %v", err)
	g.Expect(err.Error()).To(And(HavePrefix("creating ConfigMap "+ns.Name+"/unwritable: "), ContainSubstring("status")))
	g.Expect(err.Error()).NotTo(ContainSubstring("\n"), "one line in the log")

	// The hub's reports find the outcome the status could not tell, Forbidden, with the create as
	// cause.
	unreported := reconciler.Unreported(name)
	g.Expect(unreported).To(HaveLen(1))
	g.Expect(unreported[0].Bundle).To(Equal(client.ObjectKeyFromObject(b)))
	g.Expect(unreported[0].Ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(unreported[0].Ready.Reason).To(Equal(configbundlev1alpha1.ForbiddenReason))
	g.Expect(unreported[0].Ready.Message).To(And(ContainSubstring("cannot create resource \"configmaps\""), ContainSubstring("status could not be written")))

	// Nothing was written: the ConfigMap does not exist, the bundle has no status.
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
	g.Expect(b.Status.Conditions).To(BeEmpty())
	g.Expect(apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(b), &corev1.ConfigMap{}))).To(BeTrue())

	// Allowed to write ConfigMaps but not the status, the hub creates the ConfigMap; then the
	// status write is the cause, Forbidden too.
	g.Expect(update(ctx, admin, role, func(role *rbacv1.ClusterRole) {
		role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "update"}})
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		unreported := reconciler.Unreported(name)
		g.Expect(unreported).To(HaveLen(1))
		g.Expect(unreported[0].Ready.Reason).To(Equal(configbundlev1alpha1.ForbiddenReason))
		g.Expect(unreported[0].Ready.Message).To(ContainSubstring("matches the bundle, but the status could not be written"))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Expect(reconcileErrors(t, configbundlev1alpha1.ForbiddenReason)).To(BeNumerically(">", 0))
	g.Expect(reconcileErrors(t, configbundlev1alpha1.StatusWriteFailedReason)).To(BeZero(), "a forbidden status write is Forbidden")
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(b), &corev1.ConfigMap{})).To(Succeed())

	// Given the rights, the hub reports the bundle in its status; then it is no longer
	// unreported.
	g.Expect(update(ctx, admin, role, func(role *rbacv1.ClusterRole) {
		role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{configbundlev1alpha1.GroupVersion.Group}, Resources: []string{"configbundles/status"}, Verbs: []string{"update"}})
	})).To(Succeed())
	g.Eventually(get(ctx, admin, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
	// The status lands on the API server a moment before the reconciler forgets the entry.
	g.Eventually(func() []configbundle.Unreported { return reconciler.Unreported(name) }).WithTimeout(timeout).WithPolling(interval).Should(BeEmpty())
}
