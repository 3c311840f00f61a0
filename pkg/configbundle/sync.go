package configbundle

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
)

// Sync is how far the reconciler has got with a member's first full reconcile since the member
// connected: every bundle its cache held then reconciled once, its outcome recorded in its
// status (or the bundle gone). Until that is done, a drift in a bundle not reconciled yet may
// still be there, unseen.
type Sync struct {
	// Connected is whether the reconciler is engaged with the member: it connected, and has not
	// left since. The counts are zero when it is not.
	Connected bool

	// Total is the number of bundles the member held when it connected.
	Total int

	// Left is the number of those not reconciled once since; 0: the member is synced.
	Left int
}

// Synced reports whether the first full reconcile since the member connected has finished.
func (s Sync) Synced() bool { return s.Connected && s.Left == 0 }

// Sync returns how far the first full reconcile of member name since it connected has got.
func (r *Reconciler) Sync(name multicluster.ClusterName) Sync {
	return r.ledger.sync(name)
}

// unsynced returns the bundles member name holds as it connects, from its cache, warm by then:
// each is to be reconciled once before the member is synced. A list that fails leaves nothing
// to wait for, rather than a member that never syncs.
func (r *Reconciler) unsynced(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) map[types.NamespacedName]struct{} {
	bundles := &configbundlev1alpha1.ConfigBundleList{}
	if err := cl.GetCache().List(ctx, bundles, client.UnsafeDisableDeepCopy); err != nil {
		r.manager.GetLogger().Error(fmt.Errorf("listing the bundles of a member that connected: %w", err),
			"Member counted as synced", "controller", ControllerName, "cluster", name)
		return nil
	}
	keys := make(map[types.NamespacedName]struct{}, len(bundles.Items))
	for i := range bundles.Items {
		keys[client.ObjectKeyFromObject(&bundles.Items[i])] = struct{}{}
	}
	return keys
}

// recorded reports whether a reconcile recorded the outcome of its bundle: it wrote (or needed
// not write) the bundle's status, or found the bundle gone or being deleted.
func recorded(s *scope, err error) bool {
	if s == nil {
		return err == nil
	}
	return s.statusErr == nil
}

// changedWhileAway reports whether a listed bundle, or its listed ConfigMap cm (nil: not
// looked at), changed since a hub last recorded them in the bundle's status: the status is not
// the one of the bundle's generation, or names another ConfigMap, or another resourceVersion of
// it. Such an item of an initial list is a change made while no hub watched (during a restart),
// as urgent as any other, not a mere re-reconcile.
func changedWhileAway(b *configbundlev1alpha1.ConfigBundle, cm client.Object) bool {
	if b.Status.ObservedGeneration != b.Generation {
		return true
	}
	if cm == nil {
		return false
	}
	ref := managedRef(b)
	return ref == nil || ref.UID != cm.GetUID() || ref.ResourceVersion != cm.GetResourceVersion()
}

// addAt adds req to q at priority, if q is a priority queue: handler.LowPriority for a
// reconcile of a bundle that has not changed, behind every change, as the items of an informer's
// initial list are queued; 0, the default, for a change, even when the handler would queue it
// at low priority. Another queue gets it as it comes.
func addAt(q workqueue.TypedRateLimitingInterface[mcreconcile.Request], req mcreconcile.Request, priority int) {
	if pq, ok := q.(priorityqueue.PriorityQueue[mcreconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(priority)}, req)
		return
	}
	q.Add(req)
}
