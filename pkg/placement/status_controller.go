package placement

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleetbundle"
	"configbundle.dev/hub/pkg/rollout"
	"configbundle.dev/hub/pkg/statusbudget"
	"configbundle.dev/hub/pkg/tenancy"
)

// conflictRetry is how soon a status is computed again after a write lost to a newer version:
// the cache is about to catch up, this is no error.
const conflictRetry = 100 * time.Millisecond

// StatusReconciler writes a FleetBundle's status and owns its finalizer: one request per
// FleetBundle, on the hub (mcreconcile.Request with an empty ClusterName).
type StatusReconciler struct {
	manager mcmanager.Manager
	hub     client.Client
	members Members
	opts    Options
	ledger  *ledger
	// workloads watches the workloads that read bundles whose rollout judges them.
	workloads *workloadWatches
	// transitions records the Events of the members' failures and recoveries.
	transitions *transitions

	// writes spaces out the status writes of each FleetBundle that change only its counts;
	// shareWrites the writes of this replica's share of it (sharded replicas).
	writes, shareWrites statusbudget.Budget[types.NamespacedName]
}

func (r *StatusReconciler) setup(n *notifier) error {
	hubOnly := []mcbuilder.WatchesOption{mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithEngageWithProviderClusters(false)}
	b := mcbuilder.ControllerManagedBy(r.manager).
		Named(StatusControllerName).
		Watches(&hubv1alpha1.FleetBundle{}, r.toItself, hubOnly...).
		Watches(&corev1.ConfigMap{}, r.sourceToFleetBundles, hubOnly...).
		Watches(&corev1.Secret{}, r.sourceToFleetBundles, hubOnly...).
		Watches(&hubv1alpha1.MemberCluster{}, r.toEveryFleetBundle, append(hubOnly, mcbuilder.WithPredicates(memberChanged))...).
		Watches(&hubv1alpha1.ClusterSet{}, r.clusterSetToFleetBundles, append(hubOnly, mcbuilder.WithPredicates(predicate.GenerationChangedPredicate{}))...).
		Watches(&hubv1alpha1.ClusterSetBinding{}, r.bindingToFleetBundles, append(hubOnly, mcbuilder.WithPredicates(predicate.GenerationChangedPredicate{}))...).
		Watches(&configbundlev1alpha1.ConfigBundle{}, r.placedToFleetBundle, mcbuilder.WithEngageWithLocalCluster(false), mcbuilder.WithEngageWithProviderClusters(true)).
		WatchesRawSource(n.source())
	if r.opts.Replica.Sharded() { // the elected replica takes over the totals of every FleetBundle
		b = b.WatchesRawSource(r.electedSource())
	}
	err := b.WithOptions(controller.TypedOptions[mcreconcile.Request]{
		MaxConcurrentReconciles: r.opts.StatusMaxConcurrentReconciles,
		ReconciliationTimeout:   r.opts.ReconcileTimeout,
		NeedLeaderElection:      ptr.To(!r.opts.Replica.Sharded()),
		RateLimiter:             statusbudget.RateLimiter[mcreconcile.Request](),
		LogConstructor:          logConstructor(r.manager, StatusControllerName),
	}).Complete(r)
	if err != nil {
		return fmt.Errorf("building the %s controller: %w", StatusControllerName, err)
	}
	return nil
}

// Reconcile adds the finalizer to a FleetBundle, writes its status if it changed, or, once it
// is being deleted and no connected member holds its bundle, removes the finalizer.
func (r *StatusReconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	fb := &hubv1alpha1.FleetBundle{}
	switch err := r.hub.Get(ctx, req.NamespacedName, fb); {
	case apierrors.IsNotFound(err):
		r.workloads.keepOnly(req.NamespacedName, nil)
		r.writes.Forget(req.NamespacedName)
		r.shareWrites.Forget(req.NamespacedName)
		r.transitions.forget(req.NamespacedName)
		deleteFleetBundleMetrics(req.NamespacedName)
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading FleetBundle: %w", err)
	}
	if r.opts.Replica.Sharded() {
		return r.reconcileShare(ctx, fb)
	}
	setFleetBundleMetrics(fb)
	if !fb.DeletionTimestamp.IsZero() {
		return r.release(ctx, fb)
	}
	if !controllerutil.ContainsFinalizer(fb, hubv1alpha1.PlacementFinalizer) {
		controllerutil.AddFinalizer(fb, hubv1alpha1.PlacementFinalizer)
		return r.patchFinalizers(ctx, fb) // the update comes back as an event
	}
	pending := r.ledger.pendingHeals(fb.UID)
	boundary, err := tenancy.ReadBoundary(ctx, r.hub, fb)
	if err != nil {
		return ctrl.Result{}, err
	}
	selected, holds, err := r.selectedMembers(ctx, fb, boundary)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := metav1.Now()
	ro, err := r.rolloutOf(ctx, fb, r.rolloutMembers(fb, selected, now.Time), now.Time, nil)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.decideRemovals(ctx, fb, boundary, ro, now.Time); err != nil {
		return ctrl.Result{}, err
	}
	ro.keepHeld(holds)
	health := judgeAll(ro.next, ro.byNumber(), selected, ro.decision.Failed)
	r.transitions.observe(fb, health)
	want := statusOf(ro.next, boundary, health, pending, now)
	reportSourceError(fb, &want, ro.sourceErr)
	res, written, err := r.writeStatus(ctx, fb, want, ro)
	if written {
		r.ledger.noteHealsWritten(fb.UID, pending)
	}
	return res, err
}

// writeStatus writes a FleetBundle's status if it changed (at once if its Ready condition or
// its rollout moved, otherwise within the status budget), records the rollout's Events once it
// is written, and prunes the revisions no longer kept.
func (r *StatusReconciler) writeStatus(ctx context.Context, fb *hubv1alpha1.FleetBundle, want hubv1alpha1.FleetBundleStatus, ro *rolloutState) (res ctrl.Result, written bool, err error) {
	if !equality.Semantic.DeepEqual(want, fb.Status) {
		if wait := r.writes.Take(client.ObjectKeyFromObject(fb), readyChanged(want, fb.Status) || rolloutChanged(want, fb.Status)); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, false, nil
		}
		updated := fb.DeepCopy()
		updated.Status = want
		if err := r.hub.Status().Update(ctx, updated, client.FieldOwner(r.opts.FieldOwner)); apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: conflictRetry}, false, nil
		} else if err != nil {
			return ctrl.Result{}, false, fmt.Errorf("writing FleetBundle status: %w", err)
		}
		written = true
		if ro.sourceErr != nil && readyChanged(want, fb.Status) {
			r.transitions.recorder.Eventf(fleetBundleReference(fb), nil, corev1.EventTypeWarning, ro.sourceErr.Reason, "ResolveSources", "%s", ro.sourceErr.Message)
		}
		for _, e := range ro.decision.Events {
			// The revision's ControllerRevision as the related object and the stage as the
			// action: the recorder makes one series of the Events alike in those, never one of
			// two revisions' or two stages'.
			related := &corev1.ObjectReference{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "ControllerRevision",
				Namespace: fb.Namespace, Name: rollout.RevisionName(fb.Name, e.Revision)}
			r.transitions.recorder.Eventf(fleetBundleReference(fb), related, e.Type, e.Reason, e.Stage, "%s", e.Note)
		}
	}
	if err := rollout.PruneRevisions(ctx, r.hub, ro.next, ro.revisions, ro.held); err != nil {
		return ctrl.Result{}, written, err
	}
	return ctrl.Result{RequeueAfter: ro.decision.RequeueAfter}, written, nil
}

// readyChanged reports whether the Ready condition's status or reason differs between two
// statuses.
func readyChanged(a, b hubv1alpha1.FleetBundleStatus) bool {
	ca, cb := meta.FindStatusCondition(a.Conditions, hubv1alpha1.ReadyCondition), meta.FindStatusCondition(b.Conditions, hubv1alpha1.ReadyCondition)
	if ca == nil || cb == nil {
		return ca != cb
	}
	return ca.Status != cb.Status || ca.Reason != cb.Reason
}

// selectedMembers returns what the status needs of each member the FleetBundle selects (within
// boundary) that this replica manages (every one, unless sharded), and the revisions those
// members and the paused ones it does not select hold (a paused member keeps what it holds,
// healed from that revision), as seen or last seen: none of them is pruned.
func (r *StatusReconciler) selectedMembers(ctx context.Context, fb *hubv1alpha1.FleetBundle, boundary tenancy.Boundary) ([]MemberView, map[int64]bool, error) {
	list := &hubv1alpha1.MemberClusterList{}
	if err := r.hub.List(ctx, list); err != nil {
		return nil, nil, fmt.Errorf("listing MemberClusters: %w", err)
	}
	key := client.ObjectKeyFromObject(fb)
	var views []MemberView
	holds, watched := map[int64]bool{}, map[string]bool{}
	for _, mc := range list.Items {
		selected := boundary.Selects(fb, mc.Labels)
		if !r.opts.Replica.Owns(mc.Name) || (!selected && !mc.Spec.Paused) { // what it holds is removed
			continue
		}
		p := pair{member: mc.Name, fb: key}
		v := MemberView{Name: mc.Name, NotReady: r.notReady(mc.Name), Placement: r.ledger.outcome(p), Labels: mc.Labels, Paused: mc.Spec.Paused}
		seen := false
		if v.NotReady.Reason == "" {
			b, err := r.readBundle(ctx, mc.Name, key)
			v.Bundle, seen = b, err == nil
		}
		r.noteHeld(holds, p, fb, v.Bundle, seen)
		if selected && seen && !mc.Spec.Paused && rollout.JudgesWorkloads(fb.Spec.Rollout) {
			v.Workloads, watched[mc.Name] = r.workloadsOf(ctx, mc.Name, fb), true
		}
		if selected {
			views = append(views, v)
		}
	}
	r.workloads.keepOnly(key, watched) // a member no longer selected, or not seen, is not watched
	return views, holds, nil
}

// noteHeld adds to holds the revision of FleetBundle fb a pair's member holds: from its bundle b
// if seen (read from its cache), otherwise those it may hold (ledger.heldUnseen).
func (r *StatusReconciler) noteHeld(holds map[int64]bool, p pair, fb *hubv1alpha1.FleetBundle, b *configbundlev1alpha1.ConfigBundle, seen bool) {
	if !seen {
		for _, n := range r.ledger.heldUnseen(p, fb.Status.HeldRevisions) {
			holds[n] = true
		}
		return
	}
	n := int64(0)
	if OwnershipOf(b, p.fb, fb.UID) == Own {
		n = rollout.HeldRevision(b)
	}
	r.ledger.noteSeenHeld(p, n)
	holds[n] = true
}

// workloadsOf returns where the consumers of a FleetBundle's bundle in a member stand.
func (r *StatusReconciler) workloadsOf(ctx context.Context, member string, fb *hubv1alpha1.FleetBundle) *rollout.Workloads {
	cl, err := r.manager.GetCluster(ctx, multicluster.ClusterName(member))
	if err != nil {
		return &rollout.Workloads{Problem: err.Error()}
	}
	return r.workloads.workloadsOf(ctx, member, cl, fb)
}

// notReady says why a member cannot be reached, or nothing if it can.
func (r *StatusReconciler) notReady(name string) Outcome {
	err := r.members.Connected(multicluster.ClusterName(name))
	if err == nil {
		return Outcome{}
	}
	state, known := r.members.State(name)
	if !known || state.Reason == "" || (errors.Is(err, multicluster.ErrClusterNotFound) && state.Ready) {
		return Outcome{Reason: hubv1alpha1.NotJoinedReason, Message: fmt.Sprintf("member %s has not joined yet", name)}
	}
	return Outcome{Reason: state.Reason, Message: state.Message}
}

// readBundle reads the bundle of key in a member's cache: nil if there is none, an error if the
// cache could not tell.
func (r *StatusReconciler) readBundle(ctx context.Context, member string, key client.ObjectKey) (*configbundlev1alpha1.ConfigBundle, error) {
	cl, err := r.manager.GetCluster(ctx, multicluster.ClusterName(member))
	if err != nil {
		return nil, fmt.Errorf("getting member %q: %w", member, err)
	}
	b := &configbundlev1alpha1.ConfigBundle{}
	switch err := cl.GetClient().Get(ctx, key, b); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the placed bundle in member %q: %w", member, err)
	}
	return b, nil
}

// release removes the finalizer of a FleetBundle being deleted once no connected member holds a
// bundle it placed. A member that is not connected does not hold the FleetBundle back: what it
// holds is removed when it is Ready again (its placed bundle names a FleetBundle that is gone);
// nor does a paused member, which keeps what it holds until it is resumed.
func (r *StatusReconciler) release(ctx context.Context, fb *hubv1alpha1.FleetBundle) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(fb, hubv1alpha1.PlacementFinalizer) {
		return ctrl.Result{}, nil
	}
	list := &hubv1alpha1.MemberClusterList{}
	if err := r.hub.List(ctx, list); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing MemberClusters: %w", err)
	}
	key := client.ObjectKeyFromObject(fb)
	for _, mc := range list.Items {
		if mc.Spec.Paused || r.members.Connected(multicluster.ClusterName(mc.Name)) != nil {
			continue
		}
		b, err := r.readBundle(ctx, mc.Name, key)
		if err != nil {
			return ctrl.Result{}, err // unknown is not absent: the finalizer stays
		}
		if OwnershipOf(b, key, fb.UID) == Own && !orphaning(b) {
			// Its removal comes back as an event; the requeue is a safety net.
			return ctrl.Result{RequeueAfter: r.opts.NotConnectedRetry}, nil
		}
	}
	controllerutil.RemoveFinalizer(fb, hubv1alpha1.PlacementFinalizer)
	res, err := r.patchFinalizers(ctx, fb)
	if err == nil {
		r.ledger.forgetFleetBundle(key, fb.UID)
		ctrl.LoggerFrom(ctx).Info("Released FleetBundle")
	}
	return res, err
}

// patchFinalizers writes fb.Finalizers, and nothing else, as a JSON merge patch of
// metadata.finalizers that carries fb's resourceVersion as an optimistic lock. An Update would
// send the whole object back, and with it a spec re-serialised by this version of the API types
// (a generation bump, and fields the hub's field manager would own): the hub never writes a
// spec it does not own.
func (r *StatusReconciler) patchFinalizers(ctx context.Context, fb *hubv1alpha1.FleetBundle) (ctrl.Result, error) {
	patch, err := finalizersPatch(fb.ResourceVersion, fb.Finalizers)
	if err != nil {
		return ctrl.Result{}, err
	}
	err = r.hub.Patch(ctx, fb, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(r.opts.FieldOwner))
	switch {
	case apierrors.IsConflict(err):
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("patching FleetBundle finalizers: %w", err)
	}
	return ctrl.Result{}, nil
}

// finalizersPatch is the JSON merge patch that sets an object's finalizers (none: null, which
// removes the field) on the condition that its resourceVersion is still resourceVersion.
func finalizersPatch(resourceVersion string, finalizers []string) ([]byte, error) {
	if len(finalizers) == 0 {
		finalizers = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers, "resourceVersion": resourceVersion}})
	if err != nil {
		return nil, fmt.Errorf("encoding the finalizers patch: %w", err)
	}
	return patch, nil
}

// toItself maps a FleetBundle to its own status request.
func (r *StatusReconciler) toItself(_ multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []mcreconcile.Request {
		return []mcreconcile.Request{{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)}}}
	})
}

// toEveryFleetBundle maps a MemberCluster to every FleetBundle's status.
func (r *StatusReconciler) toEveryFleetBundle(_ multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []mcreconcile.Request {
		return pairsOf(ctx, r.hub, "")
	})
}

// clusterSetToFleetBundles maps a ClusterSet to the statuses of the FleetBundles of the
// namespaces that bind it.
func (r *StatusReconciler) clusterSetToFleetBundles(_ multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []mcreconcile.Request {
		return statusRequests(tenancy.FleetBundlesOfSet(ctx, r.hub, o.GetName()))
	})
}

// bindingToFleetBundles maps a ClusterSetBinding to the statuses of the FleetBundles of its
// namespace.
func (r *StatusReconciler) bindingToFleetBundles(_ multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []mcreconcile.Request {
		return statusRequests(tenancy.FleetBundlesIn(ctx, r.hub, o.GetNamespace()))
	})
}

// statusRequests are the status requests of FleetBundles fbs.
func statusRequests(fbs []client.ObjectKey) []mcreconcile.Request {
	reqs := make([]mcreconcile.Request, 0, len(fbs))
	for _, fb := range fbs {
		reqs = append(reqs, mcreconcile.Request{Request: reconcile.Request{NamespacedName: fb}})
	}
	return reqs
}

// placedToFleetBundle maps a placed bundle's event (its status included) to its FleetBundle's
// status, and any other bundle of a FleetBundle's name too (a Conflict that goes away).
func (r *StatusReconciler) placedToFleetBundle(_ multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []mcreconcile.Request {
		key := client.ObjectKeyFromObject(o)
		if fb, ok := fleetbundle.KeyOf(o.GetLabels()[hubv1alpha1.FleetBundleLabel]); !ok || fb != key {
			return nil
		}
		return []mcreconcile.Request{{Request: reconcile.Request{NamespacedName: key}}}
	})
}
