package configbundle_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/pkg/configbundle"
)

// Sizes and bounds of TestChangesGoAheadOfTheInitialList.
const (
	// listedBundles are the bundles the member holds when it connects again.
	listedBundles = 1500
	// changedWhileAway of their ConfigMaps are tampered with while it is away, and as many of their
	// specs changed right after it connected.
	changedWhileAway = 5
	// listTimeout bounds the creation and the reconciles of listedBundles.
	listTimeout = 3 * time.Minute
	// healPoll is how often the drifted ConfigMaps are read back.
	healPoll = 10 * time.Millisecond
)

// TestChangesGoAheadOfTheInitialList: a member that connects again (as after a hub restart)
// holds 1,500 bundles whose ConfigMaps were all deleted while no hub watched: each listed bundle
// is reconciled once, at low priority, and recreates its ConfigMap. Five ConfigMaps tampered
// with while the member was away, and five bundles whose spec changes right after it connected,
// go ahead of them: all ten are converged while most of the list is still left. The member's Sync
// counts the bundles left until every one of them has been reconciled. Were the initial list's
// items as urgent as the changes, first in first out, the ten would all be converged before half
// of the list about once in a thousand runs. The hub's control plane joins as the member.
func TestChangesGoAheadOfTheInitialList(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	// The member is connected again under another name: the clusters provider stops a removed
	// cluster in the background, and then removes whatever cluster has its name.
	const first, name = multicluster.ClusterName("member-before-restart"), multicluster.ClusterName("member-restarted")
	c, err := client.New(hubConfig, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	connect(t, first)
	g.Eventually(func() bool { return reconciler.Sync(first).Synced() }).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	before := reconciler.Sync(first) // the bundles other tests left in the hub's control plane

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "initial-list-"}}
	g.Expect(c.Create(ctx, ns)).To(Succeed())
	t.Cleanup(func() { g.Expect(fleet.DeleteBundles(ctx, c, ns.Name, listTimeout)).To(Succeed()) })
	g.Expect(fleet.CreateBundles(ctx, c, ns.Name, "b", "desired", listedBundles, 16)).To(Succeed())
	g.Eventually(func(g Gomega) int { return readyIn(ctx, g, c, ns.Name) }).WithTimeout(listTimeout).WithPolling(time.Second).
		Should(Equal(listedBundles))
	g.Expect(reconciler.Sync(first)).To(Equal(before), "bundles created since it connected are not its backlog")

	provider.Remove(first)
	g.Eventually(func() configbundle.Sync { return reconciler.Sync(first) }).WithTimeout(timeout).WithPolling(interval).Should(BeZero())
	g.Expect(c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns.Name))).To(Succeed())
	bundle := func(i int) *configbundlev1alpha1.ConfigBundle {
		b := &configbundlev1alpha1.ConfigBundle{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: fmt.Sprintf("b-%05d", i)}, b)).To(Succeed())
		return b
	}
	var tampered, changed []*configbundlev1alpha1.ConfigBundle
	for i := range changedWhileAway { // the hub's ConfigMap, tampered with
		b := bundle(i * listedBundles / changedWhileAway)
		cm := configbundle.DesiredConfigMap(b)
		cm.Data[configbundlev1alpha1.MessageKey] = "tampered"
		g.Expect(c.Create(ctx, cm)).To(Succeed())
		tampered = append(tampered, b)
	}

	connect(t, name)
	// Once a listed bundle is reconciled, the member's sources are started: changes are events.
	g.Eventually(func() int { return reconciler.Sync(name).Left }).WithTimeout(timeout).WithPolling(time.Millisecond).
		Should(BeNumerically("<", before.Total+listedBundles))
	for i := range changedWhileAway {
		b := bundle(listedBundles - 1 - i*listedBundles/changedWhileAway)
		g.Expect(update(ctx, c, b, func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.Message = "changed" })).To(Succeed())
		changed = append(changed, b)
	}
	g.Eventually(func(g Gomega) {
		for bundles, want := range map[*[]*configbundlev1alpha1.ConfigBundle]string{&tampered: "desired", &changed: "changed"} {
			for _, b := range *bundles {
				cm := &corev1.ConfigMap{}
				g.Expect(c.Get(ctx, client.ObjectKeyFromObject(b), cm)).To(Succeed())
				g.Expect(cm.Data).To(HaveKeyWithValue(configbundlev1alpha1.MessageKey, want), b.Name)
			}
		}
	}).WithTimeout(timeout).WithPolling(healPoll).Should(Succeed())
	s := reconciler.Sync(name)
	t.Logf("%d changes converged with %d of %d listed bundles left to reconcile", 2*changedWhileAway, s.Left, s.Total)
	g.Expect(s.Total).To(Equal(before.Total + listedBundles))
	g.Expect(s.Left).To(BeNumerically(">=", listedBundles/2), "the changes went ahead of the initial list")

	g.Eventually(func() configbundle.Sync { return reconciler.Sync(name) }).WithTimeout(listTimeout).WithPolling(interval).
		Should(Equal(configbundle.Sync{Connected: true, Total: before.Total + listedBundles}), "every listed bundle reconciled once")
	g.Expect(readyIn(ctx, g, c, ns.Name)).To(Equal(listedBundles))
}

// connect engages the hub's control plane as member name, its caches warm before it is engaged,
// as the provider does; it leaves when the test ends.
func connect(t *testing.T, name multicluster.ClusterName) {
	t.Helper()
	cl, err := cluster.New(hubConfig, func(o *cluster.Options) {
		o.Scheme = scheme
		configbundle.ConfigureCache(&o.Cache)
	})
	if err != nil {
		t.Fatalf("connecting to %s: %v", name, err)
	}
	for _, obj := range []client.Object{&configbundlev1alpha1.ConfigBundle{}, &corev1.ConfigMap{}} {
		if _, err := cl.GetCache().GetInformer(context.Background(), obj, cache.BlockUntilSynced(false)); err != nil {
			t.Fatalf("warming the cache of %s: %v", name, err)
		}
	}
	if err := provider.Add(context.Background(), name, cl); err != nil {
		t.Fatalf("adding %s: %v", name, err)
	}
	t.Cleanup(func() { provider.Remove(name) })
}

// readyIn counts the bundles of namespace ns that are Ready.
func readyIn(ctx context.Context, g Gomega, c client.Client, ns string) int {
	list := &configbundlev1alpha1.ConfigBundleList{}
	g.Expect(c.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	n := 0
	for _, b := range list.Items {
		if meta.IsStatusConditionTrue(b.Status.Conditions, configbundlev1alpha1.ReadyCondition) {
			n++
		}
	}
	return n
}
