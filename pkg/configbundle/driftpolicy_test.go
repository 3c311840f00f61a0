package configbundle_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/pkg/configbundle"
)

// editor is the field manager and User-Agent of the hand edits of these tests, as kubectl edit
// would name itself.
const editor = "kubectl-edit"

// driftStormEdits is how many edits the storm makes, each keeping the ConfigMap different.
const driftStormEdits = 100

// editorClient is a client of memberA whose writes its audit log tells from the hub's.
func editorClient(t *testing.T) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(planes[memberA].Config)
	cfg.UserAgent = editor
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return client.WithFieldOwner(c, editor)
}

// edit changes the bundle's ConfigMap as the editor, retrying on conflicts.
func edit(ctx context.Context, c client.Client, b *configbundlev1alpha1.ConfigBundle, mutate func(*corev1.ConfigMap)) error {
	cm := configMapOf(b)
	return update(ctx, c, cm, mutate)
}

// hubConfigMapWrites counts the writes of the bundle's ConfigMap that memberA served since since
// and that did not come from the editor.
func hubConfigMapWrites(t *testing.T, b *configbundlev1alpha1.ConfigBundle, since time.Time) int {
	t.Helper()
	n := 0
	for _, w := range writesSince(t, memberA, b.Namespace, since) {
		if w.Resource == "configmaps" && w.Name == b.Name && w.UserAgent != editor && w.Code < 300 {
			n++
		}
	}
	return n
}

// drifted matches a bundle reported Drifted at its generation, its status.drift naming field and
// the editor.
func drifted(field string) OmegaMatcher {
	return And(
		readyReason(metav1.ConditionFalse, configbundlev1alpha1.DriftedReason),
		HaveField("Status.Drift", And(
			Not(BeNil()),
			HaveField("Fields", ContainElement(field)),
			HaveField("ChangedBy", ContainSubstring(editor+" Update ")),
		)),
	)
}

// TestReportLeavesDriftAndReportsItOnce: with driftPolicy Report the hub never writes a
// ConfigMap someone else changed; it says what differs and who changed it, with one
// DriftDetected Event however many edits follow while it differs, and clears the drift when the
// ConfigMap matches again. A spec change is still published, and is no heal. Switching to Heal
// heals at once, with one write.
func TestReportLeavesDriftAndReportsItOnce(t *testing.T) {
	t.Parallel()
	g, ctx, c, ed := NewWithT(t), context.Background(), members[memberA], editorClient(t)
	b := newBundle(newNamespace(t, memberA), "report", "v1")
	b.Spec.Data = map[string]configbundlev1alpha1.DataValue{"keep": "1"}
	b.Spec.DriftPolicy = configbundlev1alpha1.DriftPolicyReport
	createSynced(ctx, g, c, b)

	start := time.Now()
	g.Expect(edit(ctx, ed, b, func(cm *corev1.ConfigMap) { cm.Data["message"] = "by hand" })).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(drifted("data.message changed"))
	ready := readyCondition(b)
	g.Expect(ready.Message).To(And(ContainSubstring("data.message changed"), ContainSubstring(editor+" Update ")))
	detected := b.Status.Drift.DetectedTime

	// A storm of edits that keep the ConfigMap different: no write, no second Event.
	for i := range driftStormEdits {
		g.Expect(edit(ctx, ed, b, func(cm *corev1.ConfigMap) {
			cm.Data["message"] = fmt.Sprintf("by hand %d", i)
			cm.Data["extra"] = fmt.Sprint(i)
		})).To(Succeed())
	}
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(drifted("data.extra added"))
	g.Consistently(func() (int32, error) { return occurrences(ctx, c, b, configbundlev1alpha1.DriftDetectedEvent) }).
		WithTimeout(quietPeriod).WithPolling(interval).Should(BeEquivalentTo(1), "one DriftDetected Event per drift")
	g.Expect(b.Status.Drift.DetectedTime).To(Equal(detected), "the drift was detected once")
	g.Expect(b.Status.Heals).To(BeZero())
	g.Expect(hubConfigMapWrites(t, b, start)).To(BeZero(), "the hub never writes a drifted ConfigMap")

	// Reverted by hand: the drift clears by itself.
	g.Expect(edit(ctx, ed, b, func(cm *corev1.ConfigMap) {
		cm.Data = map[string]string{"message": "v1", "keep": "1"}
	})).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(And(
		readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason), HaveField("Status.Drift", BeNil())))

	// A spec change is published: an update, not a heal.
	g.Expect(update(ctx, c, b, func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.Message = "v2" })).To(Succeed())
	g.Eventually(configMapData(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(HaveKeyWithValue("message", "v2"))
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
	g.Expect(b.Status.Heals).To(BeZero(), "following the spec is not healing")

	// Drifting again is a new drift, reported again.
	g.Expect(edit(ctx, ed, b, func(cm *corev1.ConfigMap) { cm.Data["keep"] = "0" })).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(drifted("data.keep changed"))
	g.Eventually(func() (int32, error) { return occurrences(ctx, c, b, configbundlev1alpha1.DriftDetectedEvent) }).
		WithTimeout(timeout).WithPolling(interval).Should(BeEquivalentTo(2))

	// Switched to Heal: healed at once, with one write, counted as a heal naming who changed it.
	switched := time.Now()
	g.Expect(update(ctx, c, b, func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.DriftPolicy = configbundlev1alpha1.DriftPolicyHeal })).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(And(
		readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason), HaveField("Status.Heals", BeEquivalentTo(1)), HaveField("Status.Drift", BeNil())))
	g.Expect(configMapData(ctx, c, b)(g)).To(Equal(map[string]string{"message": "v2", "keep": "1"}))
	expectDriftHealedEvent(ctx, g, c, b, configbundle.DriftData, editor+" Update ")
	g.Consistently(func() int { return hubConfigMapWrites(t, b, switched) }).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal(1), "one write heals")
}

// TestReportLeavesADeletedConfigMapDeleted: with driftPolicy Report a deleted ConfigMap is drift
// ("deleted"), reported and not recreated, until the bundle is switched to Heal.
func TestReportLeavesADeletedConfigMapDeleted(t *testing.T) {
	t.Parallel()
	g, ctx, c := NewWithT(t), context.Background(), members[memberA]
	b := newBundle(newNamespace(t, memberA), "report-deleted", "v1")
	b.Spec.DriftPolicy = configbundlev1alpha1.DriftPolicyReport
	createSynced(ctx, g, c, b)

	g.Expect(c.Delete(ctx, configMapOf(b))).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(And(
		readyReason(metav1.ConditionFalse, configbundlev1alpha1.DriftedReason),
		HaveField("Status.Drift", And(Not(BeNil()),
			HaveField("Fields", Equal([]string{configbundle.DriftDeleted})),
			HaveField("ChangedBy", Equal(configbundlev1alpha1.ChangedByDeleted))))))
	g.Consistently(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(b), configMapOf(b)))
	}).WithTimeout(quietPeriod).WithPolling(interval).Should(BeTrue(), "not recreated")

	g.Expect(update(ctx, c, b, func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.DriftPolicy = configbundlev1alpha1.DriftPolicyHeal })).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(And(
		readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason), HaveField("Status.Heals", BeEquivalentTo(1))))
	expectDriftHealedEvent(ctx, g, c, b, configbundle.DriftDeleted, "changed by "+configbundlev1alpha1.ChangedByDeleted)
}

// TestGuardLabelsTheConfigMapAndHeals: with driftPolicy Guard the ConfigMap carries the guard
// label, and drift is healed as with Heal, the Event naming who changed it; back to Heal, the
// label goes, with no heal.
func TestGuardLabelsTheConfigMapAndHeals(t *testing.T) {
	t.Parallel()
	g, ctx, c, ed := NewWithT(t), context.Background(), members[memberA], editorClient(t)
	b := newBundle(newNamespace(t, memberA), "guard", "v1")
	b.Spec.DriftPolicy = configbundlev1alpha1.DriftPolicyGuard
	cm := createSynced(ctx, g, c, b)
	g.Expect(cm.Labels).To(HaveKeyWithValue(configbundlev1alpha1.GuardLabel, "true"))

	g.Expect(edit(ctx, ed, b, func(cm *corev1.ConfigMap) { cm.Data["message"] = "by hand" })).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Status.Heals", BeEquivalentTo(1)))
	g.Expect(configMapData(ctx, c, b)(g)).To(HaveKeyWithValue("message", "v1"))
	expectDriftHealedEvent(ctx, g, c, b, configbundle.DriftData, editor+" Update ")

	g.Expect(update(ctx, c, b, func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.DriftPolicy = configbundlev1alpha1.DriftPolicyHeal })).To(Succeed())
	g.Eventually(func(g Gomega) map[string]string {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
		return cm.Labels
	}).WithTimeout(timeout).WithPolling(interval).ShouldNot(HaveKey(configbundlev1alpha1.GuardLabel))
	g.Expect(get(ctx, c, b)(g).Status.Heals).To(BeEquivalentTo(1), "following the spec is not healing")
}

// TestDriftPolicyAdmission: an unknown driftPolicy is refused, naming the values allowed; none
// is Heal.
func TestDriftPolicyAdmission(t *testing.T) {
	t.Parallel()
	g, ctx, c := NewWithT(t), context.Background(), members[memberA]
	ns := newNamespace(t, memberA)
	b := newBundle(ns, "unknown-policy", "x")
	b.Spec.DriftPolicy = "Ignore"
	err := c.Create(ctx, b)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(And(ContainSubstring("spec.driftPolicy"), ContainSubstring(`"Heal", "Report", "Guard"`)))

	d := newBundle(ns, "default-policy", "x")
	g.Expect(c.Create(ctx, d)).To(Succeed())
	g.Expect(d.Spec.DriftPolicy).To(Equal(configbundlev1alpha1.DriftPolicyHeal))
}

func readyCondition(b *configbundlev1alpha1.ConfigBundle) metav1.Condition {
	for _, c := range b.Status.Conditions {
		if c.Type == configbundlev1alpha1.ReadyCondition {
			return c
		}
	}
	return metav1.Condition{}
}
