package tenancy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/sharding"
	"configbundle.dev/hub/pkg/statusbudget"
)

// What the hub needs of the tenancy model: it reads ClusterSets and ClusterSetBindings (placement
// selects among the members of the sets bound to a FleetBundle's namespace) and writes their
// status.
// +kubebuilder:rbac:groups=hub.configbundle.dev,resources=clustersets;clustersetbindings,verbs=get;list;watch
// +kubebuilder:rbac:groups=hub.configbundle.dev,resources=clustersets/status;clustersetbindings/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hub.configbundle.dev,resources=fleetbundles,verbs=get;list;watch

// conflictRetry is how soon a status is computed again after a write lost to a newer version:
// the cache is about to catch up, this is no error.
const conflictRetry = 100 * time.Millisecond

// clusterSetReconciler keeps the status of each ClusterSet: how many MemberClusters its selector
// selects, and whether that selector is valid.
type clusterSetReconciler struct {
	hub     client.Client
	replica sharding.Replica
}

// clusterSetBindingReconciler keeps the status of each ClusterSetBinding: whether the set it
// binds exists.
type clusterSetBindingReconciler struct {
	hub     client.Client
	replica sharding.Replica
}

// SetupWithManager builds the ClusterSet and ClusterSetBinding status controllers of the hub's
// manager for replica. Like the Fleet's, they wait for the manager's leader election unless sharded; sharded, they run on every
// replica and write only on the one elected for the hub-wide work (Replica.Leading), which
// computes every status again each time it is elected.
func SetupWithManager(mgr manager.Manager, replica sharding.Replica) error {
	hub := mgr.GetClient()
	sets := &clusterSetReconciler{hub: hub, replica: replica}
	// Every set counts its members again when a member comes, goes or is relabelled; a status
	// write alone changes no set.
	err := ctrl.NewControllerManagedBy(mgr).
		Named("clusterset").
		For(&hubv1alpha1.ClusterSet{}).
		Watches(&hubv1alpha1.MemberCluster{}, handler.EnqueueRequestsFromMapFunc(sets.allSets), builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&hubv1alpha1.FleetBundle{}, handler.EnqueueRequestsFromMapFunc(sets.setsOfFleetBundle), builder.WithPredicates(clusterSetsChanged)).
		Watches(&hubv1alpha1.ClusterSetBinding{}, handler.EnqueueRequestsFromMapFunc(boundSet), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(electedSource(replica, hub, &hubv1alpha1.ClusterSetList{})).
		WithOptions(hubWideOptions(replica)).
		Complete(sets)
	if err != nil {
		return fmt.Errorf("building the clusterset controller: %w", err)
	}
	bindings := &clusterSetBindingReconciler{hub: hub, replica: replica}
	// A binding's status changes when its set is created, deleted or selects otherwise, and when
	// a member comes, goes or is relabelled (the members it lists).
	err = ctrl.NewControllerManagedBy(mgr).
		Named("clustersetbinding").
		For(&hubv1alpha1.ClusterSetBinding{}).
		Watches(&hubv1alpha1.ClusterSet{}, handler.EnqueueRequestsFromMapFunc(bindings.bindingsOf), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&hubv1alpha1.MemberCluster{}, handler.EnqueueRequestsFromMapFunc(bindings.allBindings), builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&hubv1alpha1.FleetBundle{}, handler.EnqueueRequestsFromMapFunc(bindings.bindingsIn), builder.WithPredicates(clusterSetsChanged)).
		WatchesRawSource(electedSource(replica, hub, &hubv1alpha1.ClusterSetBindingList{})).
		WithOptions(hubWideOptions(replica)).
		Complete(bindings)
	if err != nil {
		return fmt.Errorf("building the clustersetbinding controller: %w", err)
	}
	return nil
}

// hubWideOptions are the options of a controller of hub-wide work: it waits for the manager's
// leader election unless the replica is sharded.
func hubWideOptions(replica sharding.Replica) controller.Options {
	return controller.Options{
		NeedLeaderElection: ptr.To(!replica.Sharded()),
		RateLimiter:        statusbudget.RateLimiter[reconcile.Request](),
	}
}

// electedSource enqueues every object of list's kind each time this replica is elected for the
// hub-wide work (never unless sharded): what changed while another replica wrote their
// statuses, or none did, is caught up at once.
func electedSource(replica sharding.Replica, hub client.Client, list client.ObjectList) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		replica.OnElected(func() {
			if ctx.Err() != nil {
				return
			}
			list := list.DeepCopyObject().(client.ObjectList)
			if err := hub.List(ctx, list); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Listing on election failed; the statuses wait for their next event")
				return
			}
			_ = meta.EachListItem(list, func(o runtime.Object) error {
				if obj, ok := o.(client.Object); ok {
					q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
				}
				return nil
			})
		})
		return nil
	})
}

// allSets enqueues every ClusterSet.
func (r *clusterSetReconciler) allSets(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &hubv1alpha1.ClusterSetList{}
	if err := r.hub.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing ClusterSets failed; their member counts wait for their next event")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: list.Items[i].Name}})
	}
	return reqs
}

// allBindings enqueues every ClusterSetBinding.
func (r *clusterSetBindingReconciler) allBindings(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &hubv1alpha1.ClusterSetBindingList{}
	if err := r.hub.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing ClusterSetBindings failed; their member lists wait for their next event")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// bindingsOf enqueues the ClusterSetBindings of a set in all namespaces: those named after it.
func (r *clusterSetBindingReconciler) bindingsOf(ctx context.Context, set client.Object) []reconcile.Request {
	list := &hubv1alpha1.ClusterSetBindingList{}
	if err := r.hub.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing ClusterSetBindings failed; their status waits for their next event", "clusterSet", set.GetName())
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if b := &list.Items[i]; b.Name == set.GetName() || b.Spec.ClusterSet == set.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(b)})
		}
	}
	return reqs
}

// Reconcile computes a ClusterSet's status from the MemberClusters and writes it if it changed.
func (r *clusterSetReconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	if !r.replica.Leading() {
		return ctrl.Result{}, nil // another replica writes it; this one starts over when elected
	}
	set := &hubv1alpha1.ClusterSet{}
	if err := r.hub.Get(ctx, req.NamespacedName, set); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	members := &hubv1alpha1.MemberClusterList{}
	if err := r.hub.List(ctx, members); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing MemberClusters: %w", err)
	}
	want := ClusterSetStatus(set, members.Items)
	var err error
	if want.InUse, err = setInUse(ctx, r.hub, set.Name); err != nil {
		return ctrl.Result{}, err
	}
	if equality.Semantic.DeepEqual(want, set.Status) {
		return ctrl.Result{}, nil
	}
	updated := set.DeepCopy()
	updated.Status = want
	return writeStatus(ctx, r.hub, updated, "ClusterSet")
}

// Reconcile computes a ClusterSetBinding's status from the existence of its set and writes it
// if it changed.
func (r *clusterSetBindingReconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	if !r.replica.Leading() {
		return ctrl.Result{}, nil // another replica writes it; this one starts over when elected
	}
	binding := &hubv1alpha1.ClusterSetBinding{}
	if err := r.hub.Get(ctx, req.NamespacedName, binding); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	set := &hubv1alpha1.ClusterSet{}
	err := r.hub.Get(ctx, client.ObjectKey{Name: binding.Spec.ClusterSet}, set)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("reading ClusterSet %s: %w", binding.Spec.ClusterSet, err)
	}
	want := ClusterSetBindingStatus(binding, err == nil)
	if err == nil {
		members := &hubv1alpha1.MemberClusterList{}
		if err := r.hub.List(ctx, members); err != nil {
			return ctrl.Result{}, fmt.Errorf("listing MemberClusters: %w", err)
		}
		want.Clusters, want.ClusterCount = BoundClusters(set, members.Items)
	} else {
		want.Clusters, want.ClusterCount = nil, 0
	}
	fbs := &hubv1alpha1.FleetBundleList{}
	if err := r.hub.List(ctx, fbs, client.InNamespace(binding.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing FleetBundles: %w", err)
	}
	want.InUse = InUse(fbs.Items, binding.Spec.ClusterSet, false)
	if equality.Semantic.DeepEqual(want, binding.Status) {
		return ctrl.Result{}, nil
	}
	updated := binding.DeepCopy()
	updated.Status = want
	return writeStatus(ctx, r.hub, updated, "ClusterSetBinding")
}

// writeStatus writes obj's status; a conflict is computed again shortly, no error.
func writeStatus(ctx context.Context, hub client.Client, obj client.Object, kind string) (ctrl.Result, error) {
	if err := hub.Status().Update(ctx, obj, client.FieldOwner(hubv1alpha1.FieldOwner)); apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: conflictRetry}, nil // a newer object is on its way: compute again
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("writing %s status: %w", kind, err)
	}
	return ctrl.Result{}, nil
}

// ClusterSetStatus computes a ClusterSet's status among members, starting from its current one
// (which keeps the Ready condition's transition time): how many of them its clusterSelector
// selects, and Ready, True (Selecting) while that selector is valid, False (InvalidSelector),
// selecting none, while it is not.
func ClusterSetStatus(set *hubv1alpha1.ClusterSet, members []hubv1alpha1.MemberCluster) hubv1alpha1.ClusterSetStatus {
	st := *set.Status.DeepCopy()
	st.ObservedGeneration, st.Clusters = set.Generation, 0
	ready := metav1.Condition{Type: hubv1alpha1.ReadyCondition, ObservedGeneration: set.Generation}
	selector, err := metav1.LabelSelectorAsSelector(&set.Spec.ClusterSelector)
	if err != nil {
		ready.Status, ready.Reason = metav1.ConditionFalse, hubv1alpha1.InvalidSelectorReason
		ready.Message = fmt.Sprintf("spec.clusterSelector is not a valid label selector, so the set selects no member: %v", err)
		meta.SetStatusCondition(&st.Conditions, ready)
		return st
	}
	for i := range members {
		if selector.Matches(labels.Set(members[i].Labels)) {
			st.Clusters++
		}
	}
	ready.Status, ready.Reason = metav1.ConditionTrue, hubv1alpha1.ClusterSetSelectingReason
	ready.Message = fmt.Sprintf("The set selects %d members", st.Clusters)
	if st.Clusters == 1 {
		ready.Message = "The set selects 1 member"
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	return st
}

// BoundClusters returns the members set selects, sorted by name, as its bindings list them (the
// first MaxBoundClusters: names and labels), and how many it selects; none if its selector is
// invalid.
func BoundClusters(set *hubv1alpha1.ClusterSet, members []hubv1alpha1.MemberCluster) ([]hubv1alpha1.BoundCluster, int32) {
	selector, err := metav1.LabelSelectorAsSelector(&set.Spec.ClusterSelector)
	if err != nil {
		return nil, 0
	}
	var out []hubv1alpha1.BoundCluster
	for i := range members {
		if selector.Matches(labels.Set(members[i].Labels)) {
			out = append(out, hubv1alpha1.BoundCluster{Name: members[i].Name, Labels: maps.Clone(members[i].Labels)})
		}
	}
	slices.SortFunc(out, func(a, b hubv1alpha1.BoundCluster) int { return strings.Compare(a.Name, b.Name) })
	count := int32(len(out)) //nolint:gosec // a count of MemberClusters
	return out[:min(len(out), hubv1alpha1.MaxBoundClusters)], count
}

// ClusterSetBindingStatus computes a ClusterSetBinding's status, starting from its current one
// (which keeps the Ready condition's transition time): Ready True (Bound) if its set exists,
// False (ClusterSetNotFound) if not.
func ClusterSetBindingStatus(binding *hubv1alpha1.ClusterSetBinding, setExists bool) hubv1alpha1.ClusterSetBindingStatus {
	st := *binding.Status.DeepCopy()
	st.ObservedGeneration = binding.Generation
	ready := metav1.Condition{Type: hubv1alpha1.ReadyCondition, ObservedGeneration: binding.Generation}
	set := binding.Spec.ClusterSet
	if setExists {
		ready.Status, ready.Reason = metav1.ConditionTrue, hubv1alpha1.ClusterSetBoundReason
		ready.Message = fmt.Sprintf("ClusterSet %s is bound: the FleetBundles of namespace %s may place into its members", set, binding.Namespace)
	} else {
		ready.Status, ready.Reason = metav1.ConditionFalse, hubv1alpha1.ClusterSetNotFoundReason
		ready.Message = fmt.Sprintf("ClusterSet %s does not exist: the binding adds no member until it is created", set)
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	return st
}
