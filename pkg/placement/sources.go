package placement

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleetbundle"
	"configbundle.dev/hub/pkg/template"
)

// A FleetBundle's spec.dataFrom sources are hub ConfigMaps of its namespace labelled
// SourceLabel: the hub's cache holds no other (rollout.SourceCacheOptions), and
// rollout.ResolveDefinition reads them into the definition of its next revision. While they
// cannot be resolved, its Ready condition says why and nothing moves in any member.

// reportSourceError makes a status's Ready condition say why the FleetBundle's sources cannot be
// resolved, if err says so and its selector is valid (InvalidSelector comes first).
func reportSourceError(fb *hubv1alpha1.FleetBundle, st *hubv1alpha1.FleetBundleStatus, err *template.SourceError) {
	if err == nil || selectorError(fb.Spec.ClusterSelector) != nil {
		return
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: hubv1alpha1.ReadyCondition, Status: metav1.ConditionFalse, ObservedGeneration: fb.Generation, Reason: err.Reason,
		Message: fleetbundle.Truncate(err.Message + ": nothing is placed, removed or changed in any member until it is fixed"),
	})
}

// sourceUsers returns the FleetBundles of a source ConfigMap's or Secret's namespace that name it
// in spec.dataFrom.
func sourceUsers(ctx context.Context, hub client.Reader, o client.Object) []client.ObjectKey {
	list := &hubv1alpha1.FleetBundleList{}
	if err := hub.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []client.ObjectKey
	for i := range list.Items {
		fb := &list.Items[i]
		if slices.ContainsFunc(fb.Spec.DataFrom, func(s hubv1alpha1.DataFromSource) bool {
			if _, secret := o.(*corev1.Secret); secret {
				return s.SecretRef != nil && s.SecretRef.Name == o.GetName()
			}
			return s.ConfigMapRef != nil && s.ConfigMapRef.Name == o.GetName()
		}) {
			out = append(out, client.ObjectKeyFromObject(fb))
		}
	}
	return out
}

// isSourceSecret passes the events of the hub Secrets labelled SourceLabel=true: the cache also
// holds the members' kubeconfig Secrets and the hub's snapshots.
var isSourceSecret = predicate.NewPredicateFuncs(func(o client.Object) bool {
	return o.GetLabels()[hubv1alpha1.SourceLabel] == "true"
})

// sourceToPairs maps a source ConfigMap or Secret to the pairs of the FleetBundles that name it with every
// member.
func (r *Reconciler) sourceToPairs(_ multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []mcreconcile.Request {
		return withEveryMember(ctx, r.hub, sourceUsers(ctx, r.hub, o))
	})
}

// sourceToFleetBundles maps a source ConfigMap or Secret to the FleetBundles that name it, and
// counts the ConfigMaps or Secrets of the hub's cache (cachedConfigMaps, cachedSecrets) on every
// change of one: of a Secret, whatever it is.
func (r *StatusReconciler) sourceToFleetBundles(_ multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []mcreconcile.Request {
		if _, secret := o.(*corev1.Secret); secret {
			if secrets := (&corev1.SecretList{}); r.hub.List(ctx, secrets, client.UnsafeDisableDeepCopy) == nil {
				cachedSecrets.Set(float64(len(secrets.Items)))
			}
			if !isSourceSecret.Generic(event.GenericEvent{Object: o}) {
				return nil // a kubeconfig Secret, or a snapshot: counted only
			}
		} else if cached := (&corev1.ConfigMapList{}); r.hub.List(ctx, cached, client.UnsafeDisableDeepCopy) == nil {
			cachedConfigMaps.Set(float64(len(cached.Items)))
		}
		var reqs []mcreconcile.Request
		for _, key := range sourceUsers(ctx, r.hub, o) {
			reqs = append(reqs, request("", key))
		}
		return reqs
	})
}
