package configbundle_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/pkg/configbundle"
)

// synced makes a bundle and waits until it is Synced; it returns the bundle and its ConfigMap.
func synced(g Gomega, c client.Client, ns, name, message string) (*configbundlev1alpha1.ConfigBundle, *corev1.ConfigMap) {
	ctx := context.Background()
	b := newBundle(ns, name, message)
	cm := createSynced(ctx, g, c, b)
	return b, cm
}

// deleteBundle deletes a bundle and waits until it is gone (the ConfigMap is left to the garbage
// collector, if the member has one).
func deleteBundle(g Gomega, c client.Client, b *configbundlev1alpha1.ConfigBundle) {
	ctx := context.Background()
	g.Expect(c.Delete(ctx, b, client.Preconditions{UID: &b.UID})).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(b), &configbundlev1alpha1.ConfigBundle{}))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
}

// notConflicting matches a bundle whose Ready condition is not ConfigMapConflict.
func notConflicting() OmegaMatcher {
	return WithTransform(func(b *configbundlev1alpha1.ConfigBundle) string {
		if c := meta.FindStatusCondition(b.Status.Conditions, configbundlev1alpha1.ReadyCondition); c != nil {
			return c.Reason
		}
		return ""
	}, Not(Equal(configbundlev1alpha1.ConfigMapConflictReason)))
}

// watchConflicts watches the bundles of namespace ns in a member until the test ends; the
// function it returns lists the ConfigMapConflict conditions seen so far.
func watchConflicts(t *testing.T, member, ns string) func() []string {
	t.Helper()
	wc, err := client.NewWithWatch(planes[member].Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(t.Context(), &configbundlev1alpha1.ConfigBundleList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	go func() {
		defer w.Stop()
		for e := range w.ResultChan() {
			b, ok := e.Object.(*configbundlev1alpha1.ConfigBundle)
			if !ok {
				continue
			}
			if c := meta.FindStatusCondition(b.Status.Conditions, configbundlev1alpha1.ReadyCondition); c != nil && c.Reason == configbundlev1alpha1.ConfigMapConflictReason {
				mu.Lock()
				seen = append(seen, string(b.UID)+": "+c.Message)
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// TestGarbageOfAnEarlierBundleIsAdopted: a bundle deleted and created again under the same name
// (a placed bundle removed and placed again) finds the ConfigMap of its earlier copy, which the
// garbage collector has not removed (member-c has none: the longest it could take). It adopts it
// (the same ConfigMap, updated to the new bundle and owned by it): no conflict, no heal.
func TestGarbageOfAnEarlierBundleIsAdopted(t *testing.T) {
	t.Parallel()
	g, ctx, c := NewWithT(t), context.Background(), members[memberC]
	ns := newNamespace(t, memberC)
	old, garbage := synced(g, c, ns, "web", "v1")
	deleteBundle(g, c, old)
	conflicts := watchConflicts(t, memberC, ns)

	b := newBundle(ns, "web", "v2")
	cm := createSynced(ctx, g, c, b)
	g.Expect(cm.UID).To(Equal(garbage.UID), "the ConfigMap is adopted, not replaced")
	g.Expect(metav1.GetControllerOf(cm).UID).To(Equal(b.UID))
	matchesBundle(g, b, cm)
	g.Expect(b.Status.Heals).To(BeZero(), "an adoption is no heal")
	g.Expect(conflicts()).To(BeEmpty(), "ConfigMapConflict reported")
	g.Expect(events(ctx, c, b, configbundlev1alpha1.DriftHealedEvent)).To(BeEmpty())
}

// TestImmutableGarbageIsReplaced: the immutable ConfigMap of an earlier bundle of the name, whose
// content the new bundle cannot take, is replaced (a preconditioned delete, a create): no
// conflict, no heal.
func TestImmutableGarbageIsReplaced(t *testing.T) {
	t.Parallel()
	g, ctx, c := NewWithT(t), context.Background(), members[memberC]
	ns := newNamespace(t, memberC)
	old := newBundle(ns, "frozen", "v1")
	old.Spec.Immutable = true
	g.Expect(c.Create(ctx, old)).To(Succeed())
	g.Eventually(get(ctx, c, old)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
	garbage := configMapOf(old)
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(garbage), garbage)).To(Succeed())
	deleteBundle(g, c, old)

	b := newBundle(ns, "frozen", "v2")
	cm := createSynced(ctx, g, c, b)
	g.Expect(cm.UID).NotTo(Equal(garbage.UID))
	g.Expect(metav1.GetControllerOf(cm).UID).To(Equal(b.UID))
	matchesBundle(g, b, cm)
	g.Expect(b.Status.Heals).To(BeZero())
}

// TestGarbageHeldByAFinalizerIsWaitedFor: the ConfigMap of an earlier bundle whose deletion a
// finalizer holds cannot be adopted (it goes once the finalizer does): the bundle waits, reporting
// no conflict, and makes its own ConfigMap once it is gone.
func TestGarbageHeldByAFinalizerIsWaitedFor(t *testing.T) {
	t.Parallel()
	g, ctx, c := NewWithT(t), context.Background(), members[memberC]
	const hold = "test.configbundle.dev/hold"
	ns := newNamespace(t, memberC)
	old, garbage := synced(g, c, ns, "held", "v1")
	g.Expect(update(ctx, c, garbage, func(cm *corev1.ConfigMap) { cm.Finalizers = []string{hold} })).To(Succeed())
	deleteBundle(g, c, old)
	g.Expect(c.Delete(ctx, garbage)).To(Succeed()) // as the garbage collector would: held by the finalizer

	b := newBundle(ns, "held", "v2")
	g.Expect(c.Create(ctx, b)).To(Succeed())
	g.Consistently(get(ctx, c, b)).WithTimeout(quietPeriod).WithPolling(interval).Should(notConflicting())
	g.Expect(get(ctx, c, garbage)(g).OwnerReferences[0].UID).To(Equal(old.UID), "a ConfigMap being deleted is not adopted")

	g.Expect(update(ctx, c, garbage, func(cm *corev1.ConfigMap) { cm.Finalizers = nil })).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
	cm := configMapOf(b)
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
	g.Expect(cm.UID).NotTo(Equal(garbage.UID))
	matchesBundle(g, b, cm)
	g.Expect(b.Status.Heals).To(BeZero())
}

// TestGarbageAdoptionRacesTheGarbageCollector: with a garbage collector (member-a), a bundle
// deleted and created again at once races the collector for its earlier ConfigMap, again and
// again: whichever wins (the adoption, a preconditioned update; or the deletion, preconditioned
// too), the bundle is Synced, owns its ConfigMap, reports no conflict and counts no heal; the
// collector never deletes an adopted ConfigMap.
func TestGarbageAdoptionRacesTheGarbageCollector(t *testing.T) {
	t.Parallel()
	g, ctx, c := NewWithT(t), context.Background(), members[memberA]
	ns := newNamespace(t, memberA)
	b, cm := synced(g, c, ns, "race", "v0")
	conflicts := watchConflicts(t, memberA, ns)
	adopted := 0
	for i := 1; i <= 10; i++ {
		g.Expect(c.Delete(ctx, b, client.Preconditions{UID: &b.UID})).To(Succeed())
		prev := b.UID
		b = newBundle(ns, "race", fmt.Sprintf("v%d", i))
		g.Eventually(func() error { return c.Create(ctx, b) }).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		g.Expect(b.UID).NotTo(Equal(prev))
		previous := cm.UID
		g.Eventually(func(g Gomega) {
			g.Expect(get(ctx, c, b)(g)).To(And(notConflicting(), readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason)))
			cm = configMapOf(b)
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
			g.Expect(metav1.GetControllerOf(cm).UID).To(Equal(b.UID))
			matchesBundle(g, b, cm)
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "round %d", i)
		if cm.UID == previous {
			adopted++
		}
		g.Expect(b.Status.Heals).To(BeZero(), "round %d", i)
	}
	g.Expect(conflicts()).To(BeEmpty(), "ConfigMapConflict reported")
	t.Logf("10 rounds: the bundle adopted its earlier ConfigMap %d times, the garbage collector won the others", adopted)
	g.Consistently(func(g Gomega) {
		got := configMapOf(b)
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
		g.Expect(got.UID).To(Equal(cm.UID), "the garbage collector leaves an adopted ConfigMap alone")
	}).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())
}

// TestConfigMapOfALiveOwnerIsAConflict: a ConfigMap of the bundle's name controlled by anything
// else that lives, another ConfigBundle or another kind, is still a conflict, left untouched.
func TestConfigMapOfALiveOwnerIsAConflict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		owner func(g Gomega, c client.Client, ns string) metav1.OwnerReference
	}{
		{name: "a ConfigBundle of another name", owner: func(g Gomega, c client.Client, ns string) metav1.OwnerReference {
			other, _ := synced(g, c, ns, "other", "x")
			return metav1.OwnerReference{APIVersion: configbundlev1alpha1.GroupVersion.String(), Kind: "ConfigBundle", Name: other.Name, UID: other.UID, Controller: ptr.To(true)}
		}},
		{name: "another kind", owner: func(g Gomega, c client.Client, ns string) metav1.OwnerReference {
			owner := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}
			g.Expect(c.Create(context.Background(), owner)).To(Succeed())
			return metav1.OwnerReference{APIVersion: "v1", Kind: "Secret", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, ctx, c := NewWithT(t), context.Background(), members[memberA]
			ns := newNamespace(t, memberA)
			taken := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web",
				OwnerReferences: []metav1.OwnerReference{tc.owner(g, c, ns)}}, Data: map[string]string{"k": "v"}}
			g.Expect(c.Create(ctx, taken)).To(Succeed())
			b := newBundle(ns, "web", "mine?")
			g.Expect(c.Create(ctx, b)).To(Succeed())
			g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionFalse, configbundlev1alpha1.ConfigMapConflictReason))
			g.Consistently(get(ctx, c, taken)).WithTimeout(quietPeriod).WithPolling(interval).Should(
				HaveField("ResourceVersion", taken.ResourceVersion), "a ConfigMap of a live owner is never written")
			g.Expect(configbundle.DesiredConfigMap(b).Name).To(Equal(taken.Name))
		})
	}
}
