package configbundle_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
)

// handMade creates a ConfigMap as a user would, with kubectl create (its field manager), and
// returns it.
func handMade(g Gomega, c client.Client, ns, name string, data map[string]string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"team": "web"}}, Data: data}
	g.Expect(c.Create(context.Background(), cm, client.FieldOwner("kubectl-create"))).To(Succeed())
	return cm
}

// takeOverBundle is a bundle "web" with spec.takeOver.
func takeOverBundle(ns, message string, policy configbundlev1alpha1.TakeOver) *configbundlev1alpha1.ConfigBundle {
	b := newBundle(ns, "web", message)
	b.Spec.TakeOver = policy
	return b
}

// conflictMessage returns the message of a bundle's Ready condition.
func conflictMessage(b *configbundlev1alpha1.ConfigBundle) string {
	if c := meta.FindStatusCondition(b.Status.Conditions, configbundlev1alpha1.ReadyCondition); c != nil {
		return c.Message
	}
	return ""
}

// expectTakenOver waits until b is Synced with cm, the same ConfigMap (uid) now controlled by b
// and equal to what b asks for; a takeover is no heal, and its TakenOver Event names the field
// manager that made the ConfigMap.
func expectTakenOver(ctx context.Context, g Gomega, c client.Client, b *configbundlev1alpha1.ConfigBundle, cm *corev1.ConfigMap) {
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
	got := configMapOf(b)
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
	g.Expect(got.UID).To(Equal(cm.UID), "taken over, not replaced")
	g.Expect(metav1.GetControllerOf(got).UID).To(Equal(b.UID))
	matchesBundle(g, b, got)
	g.Expect(b.Status.Heals).To(BeZero(), "a takeover is no heal")
	g.Eventually(func() ([]string, error) { return events(ctx, c, b, configbundlev1alpha1.TakenOverEvent) }).WithTimeout(timeout).WithPolling(interval).
		Should(ConsistOf(And(ContainSubstring("kubectl-create Update"), ContainSubstring(memberA), ContainSubstring(b.Namespace+"/"+b.Name))))
	g.Expect(events(ctx, c, b, configbundlev1alpha1.DriftHealedEvent)).To(BeEmpty())
}

// TestTakeOverIfNoDiff: a bundle with takeOver IfNoDiff takes over a hand-made ConfigMap whose
// data equals its own (its labels become the bundle's); one whose data differs is a conflict naming
// the keys that differ, and is left untouched until its data matches.
func TestTakeOverIfNoDiff(t *testing.T) {
	t.Parallel()
	t.Run("identical", func(t *testing.T) {
		t.Parallel()
		g, ctx, c := NewWithT(t), context.Background(), members[memberA]
		ns := newNamespace(t, memberA)
		cm := handMade(g, c, ns, "web", map[string]string{"message": "hello", "port": "80"})
		b := takeOverBundle(ns, "hello", configbundlev1alpha1.TakeOverIfNoDiff)
		b.Spec.Data = map[string]configbundlev1alpha1.DataValue{"port": "80"}
		g.Expect(c.Create(ctx, b)).To(Succeed())
		expectTakenOver(ctx, g, c, b, cm)
	})
	t.Run("different", func(t *testing.T) {
		t.Parallel()
		g, ctx, c := NewWithT(t), context.Background(), members[memberA]
		ns := newNamespace(t, memberA)
		cm := handMade(g, c, ns, "web", map[string]string{"message": "hello", "port": "8080", "extra": "x"})
		b := takeOverBundle(ns, "hello", configbundlev1alpha1.TakeOverIfNoDiff)
		b.Spec.Data = map[string]configbundlev1alpha1.DataValue{"port": "80", "tls": "on"}
		g.Expect(c.Create(ctx, b)).To(Succeed())
		g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionFalse, configbundlev1alpha1.ConfigMapConflictReason))
		g.Expect(conflictMessage(b)).To(And(ContainSubstring("extra, port, tls"), ContainSubstring("IfNoDiff")))
		g.Expect(conflictMessage(b)).NotTo(ContainSubstring("message"))
		g.Consistently(get(ctx, c, cm)).WithTimeout(quietPeriod).WithPolling(interval).Should(HaveField("ResourceVersion", cm.ResourceVersion),
			"a ConfigMap that differs is never written")

		// Its owner makes it match: the bundle takes it over.
		g.Expect(update(ctx, c, cm, func(cm *corev1.ConfigMap) {
			cm.Data = map[string]string{"message": "hello", "port": "80", "tls": "on"}
		})).To(Succeed())
		expectTakenOver(ctx, g, c, b, cm)
	})
}

// TestTakeOverAlways: a bundle with takeOver Always takes over a hand-made ConfigMap and writes
// its own content to it, in one update of the same ConfigMap.
func TestTakeOverAlways(t *testing.T) {
	t.Parallel()
	g, ctx, c := NewWithT(t), context.Background(), members[memberA]
	ns := newNamespace(t, memberA)
	cm := handMade(g, c, ns, "web", map[string]string{"message": "theirs", "port": "8080"})
	b := takeOverBundle(ns, "ours", configbundlev1alpha1.TakeOverAlways)
	g.Expect(c.Create(ctx, b)).To(Succeed())
	expectTakenOver(ctx, g, c, b, cm)
	g.Expect(get(ctx, c, cm)(g).Data).To(Equal(map[string]string{"message": "ours"}))
}

// TestTakeOverNeverTakesAnotherControllersConfigMap: whatever the policy, a ConfigMap another
// object controls is a conflict naming that owner, never written.
func TestTakeOverNeverTakesAnotherControllersConfigMap(t *testing.T) {
	t.Parallel()
	for _, policy := range []configbundlev1alpha1.TakeOver{configbundlev1alpha1.TakeOverIfNoDiff, configbundlev1alpha1.TakeOverAlways} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			g, ctx, c := NewWithT(t), context.Background(), members[memberA]
			ns := newNamespace(t, memberA)
			owner := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}
			g.Expect(c.Create(ctx, owner)).To(Succeed())
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "Secret", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)},
			}}, Data: map[string]string{"message": "same"}}
			g.Expect(c.Create(ctx, cm)).To(Succeed())
			b := takeOverBundle(ns, "same", policy)
			g.Expect(c.Create(ctx, b)).To(Succeed())
			g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionFalse, configbundlev1alpha1.ConfigMapConflictReason))
			g.Expect(conflictMessage(b)).To(ContainSubstring("Secret owner (uid " + string(owner.UID) + ")"))
			g.Consistently(get(ctx, c, cm)).WithTimeout(quietPeriod).WithPolling(interval).Should(HaveField("ResourceVersion", cm.ResourceVersion))
			g.Expect(events(ctx, c, b, configbundlev1alpha1.TakenOverEvent)).To(BeEmpty())
		})
	}
}

// TestTakeOverAdmission: the CRD refuses an unknown takeOver, naming the values it allows.
func TestTakeOverAdmission(t *testing.T) {
	t.Parallel()
	g, ctx, c := NewWithT(t), context.Background(), members[memberA]
	ns := newNamespace(t, memberA)
	err := c.Create(ctx, takeOverBundle(ns, "x", "Sometimes"))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(And(ContainSubstring("spec.takeOver"), ContainSubstring(`"Never", "IfNoDiff", "Always"`)))
}
