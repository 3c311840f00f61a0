package tenancy

import (
	"context"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// A ClusterSet or ClusterSetBinding says which FleetBundles place through it (status.inUse), so
// that whoever deletes it sees what the deletion would remove first.

// InUse names the FleetBundles of fbs that place through ClusterSet set (their spec.clusterSets
// is absent or names it), sorted, the first MaxInUse; as "namespace/name" if qualified, else by
// name. None: nil.
func InUse(fbs []hubv1alpha1.FleetBundle, set string, qualified bool) []string {
	var names []string
	for i := range fbs {
		fb := &fbs[i]
		if len(fb.Spec.ClusterSets) > 0 && !slices.Contains(fb.Spec.ClusterSets, set) {
			continue
		}
		name := fb.Name
		if qualified {
			name = fb.Namespace + "/" + fb.Name
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names[:min(len(names), hubv1alpha1.MaxInUse)]
}

// setInUse names the FleetBundles ("namespace/name") that place through ClusterSet set: those of
// the namespaces that bind it.
func setInUse(ctx context.Context, hub client.Reader, set string) ([]string, error) {
	ns, err := namespacesBinding(ctx, hub, set)
	if err != nil {
		return nil, err
	}
	var fbs []hubv1alpha1.FleetBundle
	for _, n := range ns {
		list := &hubv1alpha1.FleetBundleList{}
		if err := hub.List(ctx, list, client.InNamespace(n)); err != nil {
			return nil, fmt.Errorf("listing FleetBundles: %w", err)
		}
		fbs = append(fbs, list.Items...)
	}
	if len(fbs) == 0 {
		return nil, nil
	}
	return InUse(fbs, set, true), nil
}

// clusterSetsChanged passes a FleetBundle created or deleted, or whose spec.clusterSets changed:
// what moves the inUse of sets and bindings.
var clusterSetsChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	a, okA := e.ObjectOld.(*hubv1alpha1.FleetBundle)
	b, okB := e.ObjectNew.(*hubv1alpha1.FleetBundle)
	return !okA || !okB || !slices.Equal(a.Spec.ClusterSets, b.Spec.ClusterSets)
}}

// setsOfFleetBundle enqueues the ClusterSets bound to a FleetBundle's namespace.
func (r *clusterSetReconciler) setsOfFleetBundle(ctx context.Context, fb client.Object) []reconcile.Request {
	list := &hubv1alpha1.ClusterSetBindingList{}
	if err := r.hub.List(ctx, list, client.InNamespace(fb.GetNamespace())); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: list.Items[i].Spec.ClusterSet}})
	}
	return reqs
}

// boundSet enqueues the ClusterSet a ClusterSetBinding binds.
func boundSet(_ context.Context, binding client.Object) []reconcile.Request {
	b, ok := binding.(*hubv1alpha1.ClusterSetBinding)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: b.Spec.ClusterSet}}}
}

// bindingsIn enqueues the ClusterSetBindings of a FleetBundle's namespace.
func (r *clusterSetBindingReconciler) bindingsIn(ctx context.Context, fb client.Object) []reconcile.Request {
	list := &hubv1alpha1.ClusterSetBindingList{}
	if err := r.hub.List(ctx, list, client.InNamespace(fb.GetNamespace())); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
