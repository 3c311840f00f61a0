package placement

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleetbundle"
	"configbundle.dev/hub/pkg/rollout"
	"configbundle.dev/hub/pkg/statusbudget"
	"configbundle.dev/hub/pkg/template"
	"configbundle.dev/hub/pkg/tenancy"
)

// What placement needs in each member cluster, besides the ConfigBundle reconciler's rules:
// creating and deleting the ConfigBundles it places, and creating the namespace of a FleetBundle
// with spec.createNamespace (never deleting one). Only that FleetBundle needs the namespace
// right: a member that refuses it still connects (memberRights leaves it out).
// +kubebuilder:rbac:groups=configbundle.dev,resources=configbundles,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=create

// Names of the controllers, in logs and metrics.
const (
	ControllerName       = "placement"
	StatusControllerName = "fleetbundle-status"
)

// Reconciler places one FleetBundle in one member per request: mcreconcile.Request{ClusterName:
// the member, NamespacedName: the FleetBundle}.
type Reconciler struct {
	manager mcmanager.Manager
	// workloads watches the workloads that read bundles whose rollout judges them.
	workloads *workloadWatches
	hub       client.Client
	members   Members
	opts      Options
	ledger    *ledger
	notify    func(types.NamespacedName)
	recorder  events.EventRecorder
}

// SetupWithManager builds the placement and FleetBundle status controllers on mgr.
func SetupWithManager(mgr mcmanager.Manager, members Members, opts Options) error {
	opts.defaults()
	shared, n, pairs := newLedger(), &notifier{}, &notifier{}
	// A change of a watched workload moves the status of the FleetBundles reading it, and
	// brings their pairs back to placement (a consumer that appeared is restarted).
	watches := newWorkloadWatches(func(member string, fbs []types.NamespacedName) {
		for _, fb := range fbs {
			n.notify(fb)
			pairs.add(request(member, fb))
		}
	})
	local := mgr.GetLocalManager()
	if err := local.Add(watches); err != nil { // stops the watches with the manager
		return fmt.Errorf("adding the workload watches: %w", err)
	}
	r := &Reconciler{
		manager: mgr, hub: local.GetClient(), members: members, opts: opts, ledger: shared, workloads: watches,
		notify: n.notify, recorder: local.GetEventRecorder(opts.FieldOwner),
	}
	if err := r.setup(pairs); err != nil {
		return err
	}
	s := &StatusReconciler{manager: mgr, hub: local.GetClient(), members: members, opts: opts, ledger: shared, workloads: watches,
		transitions: newTransitions(r.recorder),
		writes:      statusbudget.Budget[types.NamespacedName]{Interval: opts.MinStatusInterval},
		shareWrites: statusbudget.Budget[types.NamespacedName]{Interval: opts.MinStatusInterval}}
	return s.setup(n)
}

func (r *Reconciler) setup(pairs *notifier) error {
	hubOnly := []mcbuilder.WatchesOption{mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithEngageWithProviderClusters(false)}
	err := mcbuilder.ControllerManagedBy(r.manager).
		Named(ControllerName).
		Watches(&hubv1alpha1.FleetBundle{}, r.fleetBundleToPairs, append(hubOnly, mcbuilder.WithPredicates(specOrDeletionChanged))...).
		Watches(&corev1.ConfigMap{}, r.sourceToPairs, hubOnly...).
		Watches(&corev1.Secret{}, r.sourceToPairs, append(hubOnly, mcbuilder.WithPredicates(isSourceSecret))...).
		Watches(&hubv1alpha1.MemberCluster{}, r.memberToPairs, append(hubOnly, mcbuilder.WithPredicates(memberChanged))...).
		Watches(&hubv1alpha1.ClusterSet{}, r.clusterSetToPairs, append(hubOnly, mcbuilder.WithPredicates(predicate.GenerationChangedPredicate{}))...).
		Watches(&hubv1alpha1.ClusterSetBinding{}, r.bindingToPairs, append(hubOnly, mcbuilder.WithPredicates(predicate.GenerationChangedPredicate{}))...).
		Watches(&configbundlev1alpha1.ConfigBundle{}, r.bundleToPair, mcbuilder.WithEngageWithLocalCluster(false),
			mcbuilder.WithEngageWithProviderClusters(true), mcbuilder.WithPredicates(predicate.Or(
				predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WatchesRawSource(r.resyncSource()).
		WatchesRawSource(pairs.source()).
		WithOptions(controller.TypedOptions[mcreconcile.Request]{
			MaxConcurrentReconciles: r.opts.MaxConcurrentReconciles,
			ReconciliationTimeout:   r.opts.ReconcileTimeout,
			NeedLeaderElection:      ptr.To(!r.opts.Replica.Sharded()),
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[mcreconcile.Request](r.opts.RetryBaseDelay, r.opts.RetryMaxDelay),
			LogConstructor:          logConstructor(r.manager, ControllerName),
		}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("building the %s controller: %w", ControllerName, err)
	}
	return nil
}

// logConstructor names the member ("cluster") and the FleetBundle in every log line of a
// request.
func logConstructor(mgr mcmanager.Manager, name string) func(*mcreconcile.Request) logr.Logger {
	return func(req *mcreconcile.Request) logr.Logger {
		log := mgr.GetLogger().WithValues("controller", name)
		if req != nil {
			if req.ClusterName != "" {
				log = log.WithValues("cluster", req.ClusterName)
			}
			log = log.WithValues("namespace", req.Namespace, "name", req.Name)
		}
		return log
	}
}

// Reconcile places, updates, restores or removes one member's bundle of one FleetBundle.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	switch err := r.members.Connected(req.ClusterName); {
	case errors.Is(err, multicluster.ErrClusterNotFound):
		return ctrl.Result{}, nil // not engaged: its pairs are enqueued when it is
	case err != nil:
		return ctrl.Result{RequeueAfter: r.opts.NotConnectedRetry}, nil
	}
	s, err := r.newScope(ctx, req)
	if s == nil || err != nil {
		return ctrl.Result{}, err
	}
	res, err := s.converge(ctx)
	if r.ledger.setOutcome(s.pair, s.outcome) || s.healed != nil {
		r.notify(s.pair.fb)
	}
	return res, err
}

// newScope reads what a pair's reconcile needs from the hub's cache: the MemberCluster, the
// FleetBundle and the ClusterSets bound to its namespace, and from them whether the FleetBundle
// selects the member. It returns no scope when nothing may be written to the member: it has no
// MemberCluster (it is leaving the fleet, or its MemberCluster is being recreated), or the
// FleetBundle's selector or template is invalid.
func (r *Reconciler) newScope(ctx context.Context, req mcreconcile.Request) (*scope, error) {
	// The cluster's identity is read before and after the cluster, so that what is placed is
	// remembered of the very cluster it is written to (a member name moves to another cluster
	// with hub register --force).
	id := r.clusterID(req.ClusterName)
	member, err := r.manager.GetCluster(ctx, req.ClusterName)
	if err != nil {
		return nil, fmt.Errorf("getting member %q: %w", req.ClusterName, err)
	}
	if r.clusterID(req.ClusterName) != id {
		return nil, fmt.Errorf("member %q: %w: its cluster changed while it was read", req.ClusterName, rollout.ErrStale)
	}
	s := &scope{pair: pair{member: string(req.ClusterName), fb: req.NamespacedName}, member: member, cluster: id, r: r}
	mc := &hubv1alpha1.MemberCluster{}
	switch err := r.hub.Get(ctx, client.ObjectKey{Name: s.pair.member}, mc); {
	case apierrors.IsNotFound(err):
		return nil, nil // its create event brings the pair back
	case err != nil:
		return nil, fmt.Errorf("reading MemberCluster: %w", err)
	}
	s.memberCluster = mc
	fb := &hubv1alpha1.FleetBundle{}
	switch err := r.hub.Get(ctx, req.NamespacedName, fb); {
	case apierrors.IsNotFound(err):
		return s, nil // gone: whatever it placed goes
	case err != nil:
		return nil, fmt.Errorf("reading FleetBundle: %w", err)
	}
	if specError(fb) != nil && fb.DeletionTimestamp.IsZero() {
		return nil, nil // reported on the FleetBundle; its fix is a spec change, which brings the pair back
	}
	if len(fb.Spec.DataFrom) > 0 && fb.DeletionTimestamp.IsZero() {
		switch _, err := rollout.ResolveDefinition(ctx, r.hub, fb); {
		case errors.As(err, new(*template.SourceError)):
			return nil, nil // reported on the FleetBundle; a change of its sources or its spec brings the pair back
		case err != nil:
			return nil, err
		}
	}
	s.fb = fb
	boundary, err := tenancy.ReadBoundary(ctx, r.hub, fb)
	if err != nil {
		return nil, err
	}
	s.placing = places(fb, mc, boundary)
	return s, nil
}

// clusterID is the identity of a member's cluster as the provider knows it (the uid of its
// kube-system namespace), "" if it does not.
func (r *Reconciler) clusterID(name multicluster.ClusterName) string {
	state, _ := r.members.State(string(name))
	return state.ClusterID
}

// places reports whether a FleetBundle places a bundle in a member: it is not being deleted, its
// name fits in FleetBundleLabel, and it selects the member (boundary is where it may place).
func places(fb *hubv1alpha1.FleetBundle, mc *hubv1alpha1.MemberCluster, boundary tenancy.Boundary) bool {
	if !fb.DeletionTimestamp.IsZero() || !fleetbundle.LabelFits(client.ObjectKeyFromObject(fb)) {
		return false
	}
	return boundary.Selects(fb, mc.Labels)
}

// revision reads revision n of the pair's FleetBundle: from the hub's cache, or from the API
// server if the cache has not seen it yet (the status that names it can arrive first).
func (r *Reconciler) revision(ctx context.Context, fb *hubv1alpha1.FleetBundle, n int64) (*rollout.Revision, error) {
	rev, err := rollout.ReadRevision(ctx, r.hub, fb, n)
	if apierrors.IsNotFound(err) {
		rev, err = rollout.ReadRevision(ctx, r.manager.GetLocalManager().GetAPIReader(), fb, n)
	}
	return rev, err
}

// fleetBundleToPairs maps a FleetBundle to its pairs with every member.
func (r *Reconciler) fleetBundleToPairs(_ multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []mcreconcile.Request {
		return withEveryMember(ctx, r.hub, []client.ObjectKey{client.ObjectKeyFromObject(o)})
	})
}

// clusterSetToPairs maps a ClusterSet to the pairs of the FleetBundles of the namespaces that
// bind it with every member.
func (r *Reconciler) clusterSetToPairs(_ multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []mcreconcile.Request {
		return withEveryMember(ctx, r.hub, tenancy.FleetBundlesOfSet(ctx, r.hub, o.GetName()))
	})
}

// bindingToPairs maps a ClusterSetBinding to the pairs of the FleetBundles of its namespace with
// every member.
func (r *Reconciler) bindingToPairs(_ multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []mcreconcile.Request {
		return withEveryMember(ctx, r.hub, tenancy.FleetBundlesIn(ctx, r.hub, o.GetNamespace()))
	})
}

// withEveryMember returns the pairs of FleetBundles fbs with every member.
func withEveryMember(ctx context.Context, hub client.Reader, fbs []client.ObjectKey) []mcreconcile.Request {
	if len(fbs) == 0 {
		return nil
	}
	list := &hubv1alpha1.MemberClusterList{}
	if err := hub.List(ctx, list); err != nil {
		return nil
	}
	reqs := make([]mcreconcile.Request, 0, len(list.Items)*len(fbs))
	for _, fb := range fbs {
		for _, mc := range list.Items {
			reqs = append(reqs, request(mc.Name, fb))
		}
	}
	return reqs
}

// memberToPairs maps a MemberCluster to its pairs with every FleetBundle, and to the pairs of
// the bundles the hub placed in the member whose FleetBundle may be gone: a member resumed
// (spec.paused cleared) has them removed then.
func (r *Reconciler) memberToPairs(_ multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []mcreconcile.Request {
		reqs := pairsOf(ctx, r.hub, o.GetName())
		placed, err := r.placedPairs(ctx, o.GetName())
		if err != nil {
			return reqs // not engaged, or its cache cannot tell: its resync enqueues them when it is Ready
		}
		return append(reqs, placed...)
	})
}

// pairsOf returns a member's pairs with every FleetBundle; member "" gives the status
// controller's requests, one per FleetBundle.
func pairsOf(ctx context.Context, hub client.Reader, member string) []mcreconcile.Request {
	list := &hubv1alpha1.FleetBundleList{}
	if err := hub.List(ctx, list); err != nil {
		return nil
	}
	reqs := make([]mcreconcile.Request, 0, len(list.Items))
	for _, fb := range list.Items {
		reqs = append(reqs, request(member, client.ObjectKeyFromObject(&fb)))
	}
	return reqs
}

// bundleToPair maps a ConfigBundle in a member to the pair of the FleetBundle of its namespace
// and name: one the hub placed (FleetBundleLabel), even if its FleetBundle is gone, so that it
// is removed; or any other, if such a FleetBundle exists, so that a Conflict resolves when the
// foreign bundle goes.
func (r *Reconciler) bundleToPair(name multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []mcreconcile.Request {
		key := client.ObjectKeyFromObject(o)
		if _, placed := o.GetLabels()[hubv1alpha1.FleetBundleLabel]; !placed {
			if err := r.hub.Get(ctx, key, &hubv1alpha1.FleetBundle{}); err != nil {
				return nil
			}
		}
		return []mcreconcile.Request{request(string(name), key)}
	})
}

// resyncSource enqueues every pair of a member that becomes Ready (the provider's OnReady), and
// the pairs of the bundles the hub placed there whose FleetBundle may be gone: a FleetBundle
// deleted while the member was away leaves a bundle whose removal no event announces.
func (r *Reconciler) resyncSource() source.TypedSource[mcreconcile.Request] {
	return source.TypedFunc[mcreconcile.Request](func(ctx context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
		r.members.OnReady(func(name string) {
			go r.resync(ctx, name, q)
		})
		return nil
	})
}

func (r *Reconciler) resync(ctx context.Context, name string, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
	for _, req := range pairsOf(ctx, r.hub, name) {
		q.Add(req)
	}
	placed, err := r.placedPairs(ctx, name)
	if err != nil {
		if !errors.Is(err, multicluster.ErrClusterNotFound) { // gone: resynced when it comes back
			r.manager.GetLogger().WithValues("controller", ControllerName, "cluster", name).Error(err, "Listing placed bundles to resync failed")
		}
		return
	}
	for _, req := range placed {
		q.Add(req)
	}
}

// placedPairs returns the pairs of the bundles the hub placed in a member, from its cache.
func (r *Reconciler) placedPairs(ctx context.Context, name string) ([]mcreconcile.Request, error) {
	member, err := r.manager.GetCluster(ctx, multicluster.ClusterName(name))
	if err != nil {
		return nil, err
	}
	placed := &configbundlev1alpha1.ConfigBundleList{}
	if err := member.GetClient().List(ctx, placed, client.HasLabels{hubv1alpha1.FleetBundleLabel}); err != nil {
		return nil, fmt.Errorf("listing the placed bundles: %w", err)
	}
	reqs := make([]mcreconcile.Request, 0, len(placed.Items))
	for _, b := range placed.Items {
		reqs = append(reqs, request(name, client.ObjectKeyFromObject(&b)))
	}
	return reqs, nil
}

func request(member string, fb types.NamespacedName) mcreconcile.Request {
	return mcreconcile.Request{ClusterName: multicluster.ClusterName(member), Request: reconcile.Request{NamespacedName: fb}}
}

// notifier hands the placement controller's outcome changes to the status controller's queue.
type notifier struct {
	queue workqueue.TypedRateLimitingInterface[mcreconcile.Request]
	ready chan struct{}
}

// source is the status controller's source of notifications: it keeps the queue.
func (n *notifier) source() source.TypedSource[mcreconcile.Request] {
	n.ready = make(chan struct{})
	return source.TypedFunc[mcreconcile.Request](func(_ context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
		n.queue = q
		close(n.ready)
		return nil
	})
}

// notify enqueues a FleetBundle's status; before the status controller starts it does nothing
// (the status controller computes every status when it starts).
func (n *notifier) notify(fb types.NamespacedName) {
	n.add(mcreconcile.Request{Request: reconcile.Request{NamespacedName: fb}})
}

// add enqueues a request; before its controller starts it does nothing (a controller handles
// everything when it starts).
func (n *notifier) add(req mcreconcile.Request) {
	select {
	case <-n.ready:
		n.queue.Add(req)
	default:
	}
}

// Predicates of the watches on the hub.
var (
	// specOrDeletionChanged passes a FleetBundle update that changes its spec, starts its
	// deletion or moves its rollout on: a status write that changes only counts wakes no
	// placement.
	specOrDeletionChanged = predicate.Funcs{UpdateFunc: func(e eventUpdate) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
			e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero() ||
			rolloutMoved(e.ObjectOld, e.ObjectNew)
	}}
	// memberChanged passes a MemberCluster update that changes its labels, its spec.paused or
	// its Ready condition's status or reason (the reason is what a FleetBundle's failedClusters
	// says of a member that is not Ready): counts wake nobody.
	memberChanged = predicate.Funcs{UpdateFunc: func(e eventUpdate) bool {
		return !equalLabels(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) || readiness(e.ObjectOld) != readiness(e.ObjectNew) ||
			isPaused(e.ObjectOld) != isPaused(e.ObjectNew)
	}}
)

type eventUpdate = event.UpdateEvent

// rolloutMoved reports whether what TargetRevision reads of a FleetBundle's status differs.
func rolloutMoved(a, b client.Object) bool {
	fa, okA := a.(*hubv1alpha1.FleetBundle)
	fb, okB := b.(*hubv1alpha1.FleetBundle)
	if !okA || !okB {
		return false
	}
	return fa.Status.UpdateRevision != fb.Status.UpdateRevision || fa.Status.CurrentRevision != fb.Status.CurrentRevision ||
		!equality.Semantic.DeepEqual(targetFacts(fa.Status.Rollout), targetFacts(fb.Status.Rollout))
}

// targetFacts is what TargetRevision reads of a rollout's status.
func targetFacts(ro *hubv1alpha1.RolloutStatus) hubv1alpha1.RolloutStatus {
	if ro == nil {
		return hubv1alpha1.RolloutStatus{}
	}
	gates := ro.Phase == hubv1alpha1.RolloutHalted || ro.Phase == hubv1alpha1.RolloutPaused
	out := hubv1alpha1.RolloutStatus{Stage: ro.Stage, FailedRevision: ro.FailedRevision, AdmittedThrough: ro.AdmittedThrough,
		PassedWhilePaused: ro.PassedWhilePaused}
	if rm := ro.Removals; rm != nil { // what RemovalAdmitted reads
		out.Removals = &hubv1alpha1.RemovalStatus{Held: rm.Held, Members: rm.Members, Stage: rm.Stage}
	}
	if gates {
		out.Phase = ro.Phase // Progressing, Soaking and Complete give every member the same
	}
	return out
}

func equalLabels(a, b map[string]string) bool { return maps.Equal(a, b) }

// isPaused reports whether an object is a MemberCluster whose spec.paused is set.
func isPaused(o client.Object) bool {
	mc, ok := o.(*hubv1alpha1.MemberCluster)
	return ok && mc.Spec.Paused
}

// readiness is the status of a MemberCluster's Ready condition ("" if it has none).
func readiness(o client.Object) string {
	mc, ok := o.(*hubv1alpha1.MemberCluster)
	if !ok {
		return ""
	}
	if c := meta.FindStatusCondition(mc.Status.Conditions, hubv1alpha1.ReadyCondition); c != nil {
		return string(c.Status) + "/" + c.Reason
	}
	return ""
}
