package configbundle_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
)

// TestAdmissionRefusalIsRetried: a ValidatingAdmissionPolicy that refuses the hub's ConfigMap
// write with its default reason (Invalid) is not taken for the API server's own validation:
// the bundle says UpdateFailed and the write is retried with back-off, so that it goes through
// once the policy is removed, with no change to the bundle.
func TestAdmissionRefusalIsRetried(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	c := members[memberA]
	b := newBundle(newNamespace(t, memberA), "refused", "v1")
	cm := createSynced(ctx, g, c, b)

	// No reason: the API server refuses with Invalid, as a policy's author leaves it.
	policy, binding := updateRefusal("refuse-configmaps-"+b.Namespace,
		admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		[]admissionregistrationv1.MatchCondition{{Name: "this-namespace", Expression: "request.namespace == '" + b.Namespace + "'"}},
		admissionregistrationv1.Validation{Expression: "object.data.message != 'v2'", Message: "v2 is not allowed here"})
	g.Expect(c.Create(ctx, policy)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), policy) })
	g.Expect(c.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() { _ = client.IgnoreNotFound(c.Delete(context.Background(), binding)) })
	g.Eventually(func(g Gomega) { // policies load asynchronously: probe with a dry run
		probe := cm.DeepCopy()
		probe.Data = map[string]string{"message": "v2"}
		g.Expect(c.Update(ctx, probe, client.DryRunAll)).To(MatchError(ContainSubstring("v2 is not allowed here")))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	g.Expect(update(ctx, c, b, func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.Message = "v2" })).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(get(ctx, c, b)(g)).To(readyReason(metav1.ConditionFalse, configbundlev1alpha1.UpdateFailedReason))
		g.Expect(meta.FindStatusCondition(b.Status.Conditions, configbundlev1alpha1.ReadyCondition).Message).To(
			And(ContainSubstring("v2 is not allowed here"), ContainSubstring("(retrying)")))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "the refusal shows in the status, as one to retry")

	g.Expect(c.Delete(ctx, binding)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &corev1.ConfigMap{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), got)).To(Succeed())
		g.Expect(got.Data).To(Equal(map[string]string{"message": "v2"}))
		g.Expect(get(ctx, c, b)(g)).To(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "the write goes through once the policy is gone")
}
