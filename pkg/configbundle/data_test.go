package configbundle_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/pkg/configbundle"
)

// someData is the spec.data of the tests of this file.
func someData() map[string]configbundlev1alpha1.DataValue {
	return map[string]configbundlev1alpha1.DataValue{"app.properties": "color=blue\nsize=3\n", "log-level": "debug", "EMPTY_VALUE": ""}
}

// newDataBundle returns a bundle with message and someData.
func newDataBundle(ns, name, message string) *configbundlev1alpha1.ConfigBundle {
	b := newBundle(ns, name, message)
	b.Spec.Data = someData()
	return b
}

// configMapData reads the data of a bundle's ConfigMap.
func configMapData(ctx context.Context, c client.Client, b *configbundlev1alpha1.ConfigBundle) func(Gomega) map[string]string {
	return func(g Gomega) map[string]string {
		cm := configMapOf(b)
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
		return cm.Data
	}
}

// TestDataIsPublished: every key of spec.data is in the ConfigMap's data beside data.message,
// and nothing else is; a change of spec.data (a value changed, a key added, a key removed, all of
// data dropped) reaches the ConfigMap in place, and following it is no heal.
func TestDataIsPublished(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	c := members[memberA]
	b := newDataBundle(newNamespace(t, memberA), "data", "hello")
	cm := createSynced(ctx, g, c, b)
	g.Expect(cm.Data).To(Equal(map[string]string{
		"message": "hello", "app.properties": "color=blue\nsize=3\n", "log-level": "debug", "EMPTY_VALUE": "",
	}))
	g.Expect(cm.BinaryData).To(BeEmpty())
	uid := cm.UID

	for _, step := range []struct {
		name string
		data map[string]configbundlev1alpha1.DataValue
		want map[string]string
	}{
		{"a value changed, a key added, a key removed",
			map[string]configbundlev1alpha1.DataValue{"app.properties": "color=red\n", "log-level": "debug", "new.key": "1"},
			map[string]string{"message": "hello", "app.properties": "color=red\n", "log-level": "debug", "new.key": "1"}},
		{"data dropped", nil, map[string]string{"message": "hello"}},
		{"data added again", map[string]configbundlev1alpha1.DataValue{"k": "v"}, map[string]string{"message": "hello", "k": "v"}},
	} {
		g.Expect(update(ctx, c, b, func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.Data = step.data })).To(Succeed(), step.name)
		g.Eventually(func(g Gomega) {
			g.Expect(configMapData(ctx, c, b)(g)).To(Equal(step.want))
			g.Expect(get(ctx, c, b)(g)).To(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), step.name)
	}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
	g.Expect(cm.UID).To(Equal(uid), "the ConfigMap is updated in place")
	g.Expect(b.Status.Heals).To(BeZero(), "following the spec is not healing")
}

// TestDataDriftIsHealed: in a bundle with data, a key added to the ConfigMap by someone else (a
// foreign key), a data key changed, emptied or removed by hand, and message removed by hand,
// are each data drift, healed in place: the ConfigMap is the bundle's again, one heal counted
// and a DriftHealed Event naming data.
func TestDataDriftIsHealed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		tamper func(*corev1.ConfigMap)
	}{
		{"a foreign key added", func(cm *corev1.ConfigMap) { cm.Data["foreign"] = "added by hand" }},
		{"a key changed by hand", func(cm *corev1.ConfigMap) { cm.Data["log-level"] = "trace" }},
		{"a key emptied by hand", func(cm *corev1.ConfigMap) { cm.Data["app.properties"] = "" }},
		{"a key removed by hand", func(cm *corev1.ConfigMap) { delete(cm.Data, "app.properties") }},
		{"an empty key removed by hand", func(cm *corev1.ConfigMap) { delete(cm.Data, "EMPTY_VALUE") }},
		{"message removed, the data kept", func(cm *corev1.ConfigMap) { delete(cm.Data, "message") }},
		{"all but a foreign key", func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"foreign": "only"} }},
	}
	c := members[memberA]
	ns := newNamespace(t, memberA)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, ctx := NewWithT(t), context.Background()
			b := newDataBundle(ns, fmt.Sprintf("data-drift-%02d", i), "desired")
			cm := createSynced(ctx, g, c, b)
			uid := cm.UID
			tt.tamper(cm)
			g.Expect(c.Update(ctx, cm)).To(Succeed())

			g.Eventually(func(g Gomega) {
				g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
				g.Expect(cm.Data).To(Equal(map[string]string{
					"message": "desired", "app.properties": "color=blue\nsize=3\n", "log-level": "debug", "EMPTY_VALUE": "",
				}))
				matchesBundle(g, b, cm)
				g.Expect(get(ctx, c, b)(g).Status.Heals).To(BeEquivalentTo(1))
			}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
			g.Expect(cm.UID).To(Equal(uid), "healing keeps the ConfigMap's identity")
			g.Expect(b).To(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
			g.Expect(b.Spec.Data).To(Equal(someData()), "the bundle's spec is the truth, not the ConfigMap")
			expectDriftHealedEvent(ctx, g, c, b, configbundle.DriftData, memberA)
		})
	}
}

// TestImmutableDataIsFrozen: an immutable bundle's data is in its immutable ConfigMap; admission
// refuses a change of its data (the CRD's rule, member-a), and the member's API server a change
// of the ConfigMap's data by hand; the ConfigMap stays the one published.
func TestImmutableDataIsFrozen(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	c := members[memberA]
	b := newDataBundle(newNamespace(t, memberA), "frozen-data", "original")
	b.Spec.Immutable = true
	cm := createSynced(ctx, g, c, b)
	g.Expect(ptr.Deref(cm.Immutable, false)).To(BeTrue())
	want := map[string]string{"message": "original", "app.properties": "color=blue\nsize=3\n", "log-level": "debug", "EMPTY_VALUE": ""}
	g.Expect(cm.Data).To(Equal(want))

	for name, change := range map[string]func(*configbundlev1alpha1.ConfigBundle){
		"a value changed": func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.Data["log-level"] = "trace" },
		"a key added":     func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.Data["new"] = "1" },
		"a key removed":   func(b *configbundlev1alpha1.ConfigBundle) { delete(b.Spec.Data, "log-level") },
		"data dropped":    func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.Data = nil },
	} {
		err := update(ctx, c, b, change)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: want Invalid, got %v", name, err)
		g.Expect(err.Error()).To(ContainSubstring("spec is immutable"), name)
		g.Expect(err.Error()).To(ContainSubstring("its message, data and immutable fields can no longer change"), name)
	}

	tampered := cm.DeepCopy()
	tampered.Data["log-level"] = "trace"
	g.Expect(apierrors.IsInvalid(c.Update(ctx, tampered))).To(BeTrue(), "the API server refuses to change an immutable ConfigMap's data")

	g.Consistently(func(g Gomega) {
		got := configMapOf(b)
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
		g.Expect(got.UID).To(Equal(cm.UID))
		g.Expect(got.Data).To(Equal(want))
		g.Expect(get(ctx, c, b)(g).Spec.Data).To(Equal(someData()))
	}).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())
	g.Expect(b.Status.Heals).To(BeZero())
}

// TestImmutableDataIsRestored shows the reconciler's own guard where the CRD lacks the
// immutability rule (member-b): a change of an immutable bundle's data (a value changed, a key
// added, a key removed, all of data dropped, with or without unfreezing) is undone by restoring
// the spec, data included, from the immutable ConfigMap, which is left alone.
func TestImmutableDataIsRestored(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	c := members[memberB]
	b := newDataBundle(newNamespace(t, memberB), "frozen-data", "original")
	b.Spec.Immutable = true
	cm := createSynced(ctx, g, c, b)
	g.Expect(ptr.Deref(cm.Immutable, false)).To(BeTrue())
	original := configbundlev1alpha1.ConfigBundleSpec{Message: "original", Immutable: true, Data: someData(), DriftPolicy: configbundlev1alpha1.DriftPolicyHeal, TakeOver: configbundlev1alpha1.TakeOverNever}

	changes := []func(*configbundlev1alpha1.ConfigBundleSpec){
		func(s *configbundlev1alpha1.ConfigBundleSpec) { s.Data["log-level"] = "trace" },
		func(s *configbundlev1alpha1.ConfigBundleSpec) { s.Data["new"] = "1" },
		func(s *configbundlev1alpha1.ConfigBundleSpec) { delete(s.Data, "app.properties") },
		func(s *configbundlev1alpha1.ConfigBundleSpec) { s.Data = nil },
		func(s *configbundlev1alpha1.ConfigBundleSpec) { s.Data["log-level"], s.Immutable = "unfrozen", false },
	}
	for i, change := range changes {
		g.Expect(update(ctx, c, b, func(b *configbundlev1alpha1.ConfigBundle) { change(&b.Spec) })).To(Succeed(), "member-b's CRD has no rule to refuse this")
		g.Eventually(func(g Gomega) {
			g.Expect(get(ctx, c, b)(g).Spec).To(Equal(original), "change %d", i)
			g.Expect(b).To(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	}

	got := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), got)).To(Succeed())
	g.Expect(got.UID).To(Equal(cm.UID), "the immutable ConfigMap is never replaced for a change of the spec")
	g.Expect(got.Data).To(Equal(cm.Data))
	g.Expect(b.Status.Heals).To(BeZero())
	// The recorder writes an Event, then a series of count 2, and the later counts of the series
	// only when it refreshes it (every half hour): two occurrences are all that can be seen.
	g.Eventually(func() (int32, error) { return occurrences(ctx, c, b, configbundlev1alpha1.SpecRestoredEvent) }).
		WithTimeout(timeout).WithPolling(interval).Should(BeEquivalentTo(2), "SpecRestored Events, in a series")
	g.Expect(events(ctx, c, b, configbundlev1alpha1.SpecRestoredEvent)).To(ConsistOf(ContainSubstring("restored the spec from it")))
}

// TestDataFrozenByHandIsReplaced: a mutable bundle's ConfigMap made immutable by hand with a
// foreign key and a data key changed can only be healed by a new ConfigMap, with every key of
// the bundle; the bundle's spec, not the frozen ConfigMap, is the truth.
func TestDataFrozenByHandIsReplaced(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	c := members[memberA]
	b := newDataBundle(newNamespace(t, memberA), "data-frozen-by-hand", "keep me mutable")
	cm := createSynced(ctx, g, c, b)
	oldUID := cm.UID

	cm.Immutable = ptr.To(true)
	cm.Data["foreign"] = "frozen by hand"
	cm.Data["log-level"] = "trace"
	g.Expect(c.Update(ctx, cm)).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
		g.Expect(cm.UID).NotTo(Equal(oldUID), "an immutable ConfigMap can only be healed by a new one")
		g.Expect(cm.Data).To(Equal(map[string]string{
			"message": "keep me mutable", "app.properties": "color=blue\nsize=3\n", "log-level": "debug", "EMPTY_VALUE": "",
		}))
		g.Expect(ptr.Deref(cm.Immutable, false)).To(BeFalse())
		g.Expect(get(ctx, c, b)(g).Status.ConfigMapRef.UID).To(Equal(cm.UID))
		g.Expect(b.Status.Heals).To(BeEquivalentTo(1))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Expect(b.Spec).To(Equal(configbundlev1alpha1.ConfigBundleSpec{Message: "keep me mutable", Data: someData(), DriftPolicy: configbundlev1alpha1.DriftPolicyHeal, TakeOver: configbundlev1alpha1.TakeOverNever}),
		"the bundle's spec is the truth, not the frozen ConfigMap")
}

// TestDataKeyMessageWhereTheCRDAllowsIt: where the CRD lacks the rule that refuses a data key
// message (member-b), spec.message is still data.message: the key of data is not published, and
// the ConfigMap, with the other keys, is steady (no write loop between message and the key).
func TestDataKeyMessageWhereTheCRDAllowsIt(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	c := members[memberB]
	b := newBundle(newNamespace(t, memberB), "data-key-message", "the message")
	b.Spec.Data = map[string]configbundlev1alpha1.DataValue{"message": "from data", "k": "v"}
	g.Expect(c.Create(ctx, b)).To(Succeed(), "member-b's CRD has no rule to refuse this")
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
	g.Expect(configMapData(ctx, c, b)(g)).To(Equal(map[string]string{"message": "the message", "k": "v"}))

	cm := configMapOf(b)
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
	g.Consistently(func(g Gomega) {
		got := configMapOf(b)
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
		g.Expect(got.ResourceVersion).To(Equal(cm.ResourceVersion), "the ConfigMap is not written again")
	}).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())
	g.Expect(get(ctx, c, b)(g).Status.Heals).To(BeZero())
}
