package configbundle

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
)

// resyncListLimit is the page size of the live lists of a resync.
const resyncListLimit = 500

// versions are the resourceVersions of a bundle and of its ConfigMap; "" where there is none.
type versions struct {
	bundle, configMap string
}

// resyncSource hands Options.ResyncOn a function that resyncs a member, in the background.
func (r *Reconciler) resyncSource() source.TypedSource[mcreconcile.Request] {
	return source.TypedFunc[mcreconcile.Request](func(ctx context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
		r.opts.ResyncOn(func(name string) { go r.resync(ctx, multicluster.ClusterName(name), q) })
		return nil
	})
}

// resync enqueues every bundle of a member that is back: those its cache holds and those its API
// server holds now. A member's cache may still hold what it held before an outage (its informers
// re-list only after a back-off), so the bundles whose bundle or ConfigMap the cache has not
// caught up with are reconciled once on what a live read finds (ledger.noteVerifyLive), as
// urgent as any change; the others go behind the member's changes (handler.LowPriority). That
// costs two lists of metadata, and two reads per bundle that changed while the hub was away; if
// the lists fail, every bundle is read live.
func (r *Reconciler) resync(ctx context.Context, name multicluster.ClusterName, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
	log := r.manager.GetLogger().WithValues("controller", ControllerName, "cluster", name)
	cl, err := r.manager.GetCluster(ctx, name)
	if err != nil {
		return // gone: its bundles are resynced if it comes back
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.ReconcileTimeout)
	defer cancel()
	cached, err := cachedVersions(ctx, cl)
	if err != nil {
		log.Error(err, "Listing bundles to resync failed")
		return
	}
	live, err := liveVersions(ctx, cl.GetAPIReader())
	if err != nil {
		log.Error(err, "Listing bundles and ConfigMaps live failed: every bundle is read live")
	}
	all, stale := union(cached, live), 0
	for key := range all {
		req := mcreconcile.Request{Request: reconcile.Request{NamespacedName: key}, ClusterName: name}
		changed := live != nil && live[key] != cached[key]
		if live == nil || changed {
			r.ledger.noteVerifyLive(req)
			stale++
		}
		if changed { // while the hub was away: a change like any other
			q.Add(req)
			continue
		}
		addAt(q, req, handler.LowPriority) // behind the member's changes
	}
	log.V(1).Info("Resynced member", "bundles", len(all), "stale", stale)
}

// cachedVersions returns the versions of every bundle in the member's cache.
func cachedVersions(ctx context.Context, cl cluster.Cluster) (map[types.NamespacedName]versions, error) {
	bundles := &configbundlev1alpha1.ConfigBundleList{}
	if err := cl.GetCache().List(ctx, bundles, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing bundles from the cache: %w", err)
	}
	configMaps := &corev1.ConfigMapList{}
	if err := cl.GetCache().List(ctx, configMaps, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ConfigMaps from the cache: %w", err)
	}
	out := make(map[types.NamespacedName]versions, len(bundles.Items))
	for i := range bundles.Items {
		out[client.ObjectKeyFromObject(&bundles.Items[i])] = versions{bundle: bundles.Items[i].ResourceVersion}
	}
	for i := range configMaps.Items {
		key := client.ObjectKeyFromObject(&configMaps.Items[i])
		if v, ok := out[key]; ok {
			v.configMap = configMaps.Items[i].ResourceVersion
			out[key] = v
		}
	}
	return out, nil
}

// liveVersions returns the versions of every bundle the member's API server holds, from lists
// of metadata.
func liveVersions(ctx context.Context, reader client.Reader) (map[types.NamespacedName]versions, error) {
	bundles, err := liveResourceVersions(ctx, reader, configbundlev1alpha1.GroupVersion.WithKind("ConfigBundleList"))
	if err != nil {
		return nil, err
	}
	configMaps, err := liveResourceVersions(ctx, reader, corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err != nil {
		return nil, err
	}
	out := make(map[types.NamespacedName]versions, len(bundles))
	for key, rv := range bundles {
		out[key] = versions{bundle: rv, configMap: configMaps[key]}
	}
	return out, nil
}

// liveResourceVersions lists the metadata of every object of a list kind, a page at a time.
func liveResourceVersions(ctx context.Context, reader client.Reader, listKind schema.GroupVersionKind) (map[types.NamespacedName]string, error) {
	out := map[types.NamespacedName]string{}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(listKind)
	for {
		if err := reader.List(ctx, list, client.Limit(resyncListLimit), client.Continue(list.Continue)); err != nil {
			return nil, fmt.Errorf("listing %s: %w", listKind.Kind, err)
		}
		for i := range list.Items {
			out[client.ObjectKeyFromObject(&list.Items[i])] = list.Items[i].ResourceVersion
		}
		if list.Continue == "" {
			return out, nil
		}
	}
}

// union returns the keys of both maps.
func union(a, b map[types.NamespacedName]versions) map[types.NamespacedName]struct{} {
	out := make(map[types.NamespacedName]struct{}, len(a)+len(b))
	for key := range a {
		out[key] = struct{}{}
	}
	for key := range b {
		out[key] = struct{}{}
	}
	return out
}
