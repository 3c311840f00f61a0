package configbundle_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/pkg/configbundle"
)

// readyReason returns a matcher for a bundle whose Ready condition has the given status and
// reason and is about the bundle's current generation.
func readyReason(status metav1.ConditionStatus, reason string) types.GomegaMatcher {
	return WithTransform(func(b *configbundlev1alpha1.ConfigBundle) string {
		c := meta.FindStatusCondition(b.Status.Conditions, configbundlev1alpha1.ReadyCondition)
		if c == nil || c.ObservedGeneration != b.Generation || b.Status.ObservedGeneration != b.Generation {
			return "not observed yet"
		}
		return string(c.Status) + "/" + c.Reason
	}, Equal(string(status)+"/"+reason))
}

// get returns a function that reads obj afresh, for Eventually.
func get[T client.Object](ctx context.Context, c client.Client, obj T) func(Gomega) T {
	return func(g Gomega) T {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		return obj
	}
}

func configMapOf(b *configbundlev1alpha1.ConfigBundle) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: b.Namespace}}
}

// expectDriftHealedEvent waits for a DriftHealed Event on b naming what drifted and the member.
func expectDriftHealedEvent(ctx context.Context, g Gomega, c client.Client, b *configbundlev1alpha1.ConfigBundle, drift, member string) {
	g.Eventually(func() ([]string, error) { return events(ctx, c, b, configbundlev1alpha1.DriftHealedEvent) }).
		WithTimeout(timeout).WithPolling(interval).Should(ContainElement(And(ContainSubstring(drift), ContainSubstring(member))))
}

// createSynced creates b in c, waits until it is Ready (Synced), and returns its ConfigMap.
func createSynced(ctx context.Context, g Gomega, c client.Client, b *configbundlev1alpha1.ConfigBundle) *corev1.ConfigMap {
	g.Expect(c.Create(ctx, b)).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
	cm := configMapOf(b)
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
	return cm
}

// matchesBundle asserts that cm is exactly what the bundle asks for.
func matchesBundle(g Gomega, b *configbundlev1alpha1.ConfigBundle, cm *corev1.ConfigMap) {
	want := configbundle.DesiredConfigMap(b)
	g.Expect(configbundle.Drift(want, cm)).To(BeEmpty(), "ConfigMap %s differs from bundle", cm.Name)
}

func TestCreate(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	c := members[memberA]
	ns := newNamespace(t, memberA)
	b := newBundle(ns, "web", "hello")
	b.Labels = map[string]string{"app": "web", "tier": "front"}
	b.Annotations = map[string]string{"owner": "team-a", "kubectl.kubernetes.io/last-applied-configuration": "{}"}
	g.Expect(c.Create(ctx, b)).To(Succeed())

	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
	cm := configMapOf(b)
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())

	g.Expect(cm.Data).To(Equal(map[string]string{"message": "hello"}))
	g.Expect(cm.BinaryData).To(BeEmpty())
	g.Expect(ptr.Deref(cm.Immutable, false)).To(BeFalse())
	g.Expect(cm.Labels).To(Equal(b.Labels))
	g.Expect(cm.Annotations).To(Equal(map[string]string{"owner": "team-a"}))
	g.Expect(cm.OwnerReferences).To(HaveLen(1))
	owner := cm.OwnerReferences[0]
	g.Expect(owner.Kind).To(Equal("ConfigBundle"))
	g.Expect(owner.APIVersion).To(Equal("configbundle.dev/v1alpha1"))
	g.Expect(owner.UID).To(Equal(b.UID))
	g.Expect(ptr.Deref(owner.Controller, false)).To(BeTrue())

	g.Expect(b.Status.ConfigMapRef).To(Equal(&configbundlev1alpha1.ConfigMapReference{Name: "web", UID: cm.UID, ResourceVersion: cm.ResourceVersion}))
	g.Expect(b.Status.Heals).To(BeZero())
	g.Expect(b.Status.LastHealTime).To(BeNil())

	// Steady state: no further writes to the bundle.
	rv := b.ResourceVersion
	g.Consistently(get(ctx, c, b)).WithTimeout(quietPeriod).WithPolling(interval).
		Should(WithTransform(func(b *configbundlev1alpha1.ConfigBundle) string { return b.ResourceVersion }, Equal(rv)))
}

func TestSpecUpdate(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	c := members[memberA]
	b := newBundle(newNamespace(t, memberA), "app", "v1")
	g.Expect(c.Create(ctx, b)).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
	uid := b.Status.ConfigMapRef.UID

	g.Expect(update(ctx, c, b, func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.Message = "v2" })).To(Succeed())
	g.Eventually(func(g Gomega) {
		cm := configMapOf(b)
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
		g.Expect(cm.Data["message"]).To(Equal("v2"))
		g.Expect(get(ctx, c, b)(g)).To(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
		g.Expect(b.Status.ConfigMapRef.ResourceVersion).To(Equal(cm.ResourceVersion))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	// mutable -> immutable together with a new message, in one update.
	g.Expect(update(ctx, c, b, func(b *configbundlev1alpha1.ConfigBundle) {
		b.Spec = configbundlev1alpha1.ConfigBundleSpec{Message: "v3", Immutable: true}
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		cm := configMapOf(b)
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
		g.Expect(cm.Data["message"]).To(Equal("v3"))
		g.Expect(ptr.Deref(cm.Immutable, false)).To(BeTrue())
		g.Expect(cm.UID).To(Equal(uid), "an update keeps the ConfigMap's identity")
		g.Expect(get(ctx, c, b)(g)).To(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Expect(b.Status.Heals).To(BeZero(), "following the spec is not healing")
}

func TestMetadataUpdate(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	c := members[memberA]
	b := newBundle(newNamespace(t, memberA), "meta", "m")
	b.Labels = map[string]string{"keep": "1", "change": "old", "remove": "x"}
	b.Annotations = map[string]string{"a-keep": "1", "a-remove": "x"}
	g.Expect(c.Create(ctx, b)).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))

	g.Expect(update(ctx, c, b, func(b *configbundlev1alpha1.ConfigBundle) {
		b.Labels = map[string]string{"keep": "1", "change": "new", "add": "y"}
		b.Annotations = map[string]string{"a-keep": "1", "a-add": "z"}
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		cm := configMapOf(b)
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
		g.Expect(cm.Labels).To(Equal(map[string]string{"keep": "1", "change": "new", "add": "y"}))
		g.Expect(cm.Annotations).To(Equal(map[string]string{"a-keep": "1", "a-add": "z"}))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	// All labels and annotations removed: they really disappear.
	g.Expect(update(ctx, c, b, func(b *configbundlev1alpha1.ConfigBundle) { b.Labels, b.Annotations = nil, nil })).To(Succeed())
	g.Eventually(func(g Gomega) {
		cm := configMapOf(b)
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
		g.Expect(cm.Labels).To(BeEmpty())
		g.Expect(cm.Annotations).To(BeEmpty())
		g.Expect(get(ctx, c, b)(g).Status.ConfigMapRef.ResourceVersion).To(Equal(cm.ResourceVersion))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Expect(b.Status.Heals).To(BeZero(), "following the bundle's metadata is not healing")
}

func TestDriftIsHealed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		tamper func(*corev1.ConfigMap)
		drift  string
	}{
		{"message changed", func(cm *corev1.ConfigMap) { cm.Data["message"] = "tampered" }, configbundle.DriftData},
		{"stray data key", func(cm *corev1.ConfigMap) { cm.Data["stray"] = "1" }, configbundle.DriftData},
		{"binary data added", func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"bin": {0, 1}} }, configbundle.DriftBinaryData},
		{"label added", func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{"app": "db", "extra": "1"} }, configbundle.DriftLabels},
		{"label removed", func(cm *corev1.ConfigMap) { cm.Labels = nil }, configbundle.DriftLabels},
		{"annotation added", func(cm *corev1.ConfigMap) { cm.Annotations = map[string]string{"by-hand": "1"} }, configbundle.DriftAnnotations},
		{"ownerReference removed", func(cm *corev1.ConfigMap) { cm.OwnerReferences = nil }, configbundle.DriftOwnerReferences},
		{"ownerReference demoted", func(cm *corev1.ConfigMap) { cm.OwnerReferences[0].Controller = ptr.To(false) }, configbundle.DriftOwnerReferences},
	}
	c := members[memberA]
	ns := newNamespace(t, memberA)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, ctx := NewWithT(t), context.Background()
			b := newBundle(ns, "drift-"+string(rune('a'+i)), "desired")
			b.Labels = map[string]string{"app": "web"}
			cm := createSynced(ctx, g, c, b)
			uid := cm.UID
			tt.tamper(cm)
			g.Expect(c.Update(ctx, cm)).To(Succeed())

			g.Eventually(func(g Gomega) {
				g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
				matchesBundle(g, b, cm)
				g.Expect(get(ctx, c, b)(g).Status.Heals).To(BeEquivalentTo(1))
			}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
			g.Expect(cm.UID).To(Equal(uid), "healing keeps the ConfigMap's identity")
			g.Expect(b.Status.LastHealTime).NotTo(BeNil())
			g.Expect(b).To(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
			expectDriftHealedEvent(ctx, g, c, b, tt.drift, memberA)
		})
	}
}

func TestFrozenByHandIsReplaced(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	c := members[memberA]
	b := newBundle(newNamespace(t, memberA), "frozen", "keep me mutable")
	cm := createSynced(ctx, g, c, b)
	oldUID := cm.UID

	cm.Immutable = ptr.To(true)
	cm.Data["message"] = "frozen by hand"
	g.Expect(c.Update(ctx, cm)).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
		g.Expect(cm.UID).NotTo(Equal(oldUID), "an immutable ConfigMap can only be healed by a new one")
		matchesBundle(g, b, cm)
		g.Expect(get(ctx, c, b)(g).Status.ConfigMapRef.UID).To(Equal(cm.UID))
		g.Expect(b.Status.Heals).To(BeEquivalentTo(1))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Expect(b.Spec).To(Equal(configbundlev1alpha1.ConfigBundleSpec{Message: "keep me mutable", DriftPolicy: configbundlev1alpha1.DriftPolicyHeal, TakeOver: configbundlev1alpha1.TakeOverNever}), "the bundle's spec is the truth, not the frozen ConfigMap")
}

func TestMissingConfigMapIsRecreated(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	c := members[memberA]
	b := newBundle(newNamespace(t, memberA), "gone", "come back")
	g.Expect(c.Create(ctx, b)).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
	oldUID := b.Status.ConfigMapRef.UID

	g.Expect(c.Delete(ctx, configMapOf(b))).To(Succeed())
	g.Eventually(func(g Gomega) {
		cm := configMapOf(b)
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
		g.Expect(cm.UID).NotTo(Equal(oldUID))
		matchesBundle(g, b, cm)
		g.Expect(get(ctx, c, b)(g).Status.ConfigMapRef.UID).To(Equal(cm.UID))
		g.Expect(b.Status.Heals).To(BeEquivalentTo(1))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Expect(events(ctx, c, b, configbundlev1alpha1.DriftHealedEvent)).To(ContainElement(ContainSubstring(configbundle.DriftDeleted)))
}

func TestDeletionIsLeftToGarbageCollection(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	c := members[memberA]
	b := newBundle(newNamespace(t, memberA), "bye", "x")
	g.Expect(c.Create(ctx, b)).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
	g.Expect(b.Finalizers).To(BeEmpty(), "the bundle carries no finalizer")

	g.Expect(c.Delete(ctx, b)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(b), &configbundlev1alpha1.ConfigBundle{}))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(b), &corev1.ConfigMap{}))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the garbage collector removes the ConfigMap through its ownerReference")
}

func TestDeletingTheConfigMapKeepsTheBundle(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	c := members[memberA]
	b := newBundle(newNamespace(t, memberA), "stay", "x")
	g.Expect(c.Create(ctx, b)).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
	g.Expect(c.Delete(ctx, configMapOf(b), client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
	g.Consistently(func() error { return c.Get(ctx, client.ObjectKeyFromObject(b), &configbundlev1alpha1.ConfigBundle{}) }).
		WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())
}

func TestForeignConfigMapIsNeverTouched(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	c := members[memberA]
	ns := newNamespace(t, memberA)
	foreign := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns, Labels: map[string]string{"mine": "yes"}},
		Data:       map[string]string{"message": "someone else's"},
	}
	g.Expect(c.Create(ctx, foreign)).To(Succeed())
	b := newBundle(ns, "taken", "mine now?")
	g.Expect(c.Create(ctx, b)).To(Succeed())

	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionFalse, configbundlev1alpha1.ConfigMapConflictReason))
	g.Expect(meta.FindStatusCondition(b.Status.Conditions, configbundlev1alpha1.ReadyCondition).Message).To(ContainSubstring("not managed by this ConfigBundle"))
	g.Expect(b.Status.ConfigMapRef).To(BeNil())
	got := &corev1.ConfigMap{}
	g.Consistently(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(foreign), got)).To(Succeed())
		g.Expect(got.ResourceVersion).To(Equal(foreign.ResourceVersion), "a foreign ConfigMap is never written")
	}).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())

	g.Expect(c.Delete(ctx, foreign)).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
	cm := configMapOf(b)
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
	matchesBundle(g, b, cm)
	g.Expect(b.Status.Heals).To(BeZero())
}

func TestQuotaFailureIsRetriedUntilItPasses(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	c := members[memberA]
	ns := newNamespace(t, memberA)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-configmaps", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceConfigMaps: resource.MustParse("0")}},
	}
	g.Expect(c.Create(ctx, quota)).To(Succeed())
	// The quota controller does not run here: publish the quota's usage as it would.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourceConfigMaps: resource.MustParse("0")}}
	g.Expect(c.Status().Update(ctx, quota)).To(Succeed())

	b := newBundle(ns, "quota", "later")
	g.Expect(c.Create(ctx, b)).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionFalse, configbundlev1alpha1.CreateFailedReason))
	g.Expect(meta.FindStatusCondition(b.Status.Conditions, configbundlev1alpha1.ReadyCondition).Message).To(ContainSubstring("exceeded quota"))

	// Retries back off and write nothing while nothing changes.
	rv := b.ResourceVersion
	g.Consistently(get(ctx, c, b)).WithTimeout(quietPeriod).WithPolling(interval).
		Should(WithTransform(func(b *configbundlev1alpha1.ConfigBundle) string { return b.ResourceVersion }, Equal(rv)))

	g.Expect(c.Delete(ctx, quota)).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
}

func TestUnmanagedConfigMapsAreCachedWithoutData(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	c := members[memberA]
	ns := newNamespace(t, memberA)
	unmanaged := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: ns, Labels: map[string]string{"a": "b"}},
		Data:       map[string]string{"payload": strings.Repeat("x", 100_000)},
	}
	g.Expect(c.Create(ctx, unmanaged)).To(Succeed())
	b := newBundle(ns, "managed", "kept whole")
	g.Expect(c.Create(ctx, b)).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))

	cached := caches[memberA].GetCache()
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(cached.Get(ctx, client.ObjectKeyFromObject(unmanaged), cm)).To(Succeed())
		g.Expect(cm.Data).To(BeEmpty())
		g.Expect(cm.Labels).To(BeEmpty())
		g.Expect(cm.UID).To(Equal(unmanaged.UID))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	cm := configMapOf(b)
	g.Expect(cached.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
	g.Expect(cm.Data).To(Equal(map[string]string{"message": "kept whole"}))
	g.Expect(cm.ManagedFields).To(HaveEach(HaveField("FieldsV1", BeNil())), "the hub's own entry keeps no fields")
}

func TestMembersAreIndependent(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	bundles := map[string]*configbundlev1alpha1.ConfigBundle{}
	for _, m := range []string{memberA, memberB} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "independence"}}
		g.Expect(members[m].Create(ctx, ns)).To(Succeed())
		bundles[m] = newBundle("independence", "same-name", "hello from "+m)
		g.Expect(members[m].Create(ctx, bundles[m])).To(Succeed())
	}
	for m, b := range bundles {
		g.Eventually(get(ctx, members[m], b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
		cm := configMapOf(b)
		g.Expect(members[m].Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
		g.Expect(cm.Data["message"]).To(Equal("hello from " + m))
		g.Expect(cm.OwnerReferences[0].UID).To(Equal(b.UID), "each member's ConfigMap is owned by that member's bundle")
	}

	// Tampering in one member heals there and leaves the other alone.
	cmB := configMapOf(bundles[memberB])
	g.Expect(members[memberB].Get(ctx, client.ObjectKeyFromObject(cmB), cmB)).To(Succeed())
	cmB.Data["message"] = "tampered"
	g.Expect(members[memberB].Update(ctx, cmB)).To(Succeed())
	g.Eventually(get(ctx, members[memberB], bundles[memberB])).WithTimeout(timeout).WithPolling(interval).
		Should(WithTransform(func(b *configbundlev1alpha1.ConfigBundle) int64 { return b.Status.Heals }, BeEquivalentTo(1)))
	g.Expect(get(ctx, members[memberA], bundles[memberA])(g).Status.Heals).To(BeZero())
}

// TestLeavingMemberIsForgotten: what the reconciler remembers of a member's bundles is forgotten
// when the member leaves. The hub's control plane joins as a third member, and leaves.
func TestLeavingMemberIsForgotten(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const name = multicluster.ClusterName("member-leaving")
	cl, err := cluster.New(hubConfig, func(o *cluster.Options) {
		o.Scheme = scheme
		configbundle.ConfigureCache(&o.Cache)
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(provider.Add(ctx, name, cl)).To(Succeed())
	t.Cleanup(func() { provider.Remove(name) })

	c, err := client.New(hubConfig, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "leaving-"}}
	g.Expect(c.Create(ctx, ns)).To(Succeed())
	b := newBundle(ns.Name, "remembered", "x")
	g.Expect(c.Create(ctx, b)).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
	g.Expect(reconciler.Remembered(name)).To(Equal(1), "the ConfigMap's write is remembered, to ignore its watch event")

	provider.Remove(name)
	g.Eventually(func() int { return reconciler.Remembered(name) }).WithTimeout(timeout).WithPolling(interval).
		Should(BeZero(), "the member left")
}

// update changes an object the way a careful client does: read, mutate, write, and again on a
// conflict (the reconciler writes status meanwhile).
func update[T client.Object](ctx context.Context, c client.Client, obj T, mutate func(T)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate(obj)
		return c.Update(ctx, obj)
	})
}
