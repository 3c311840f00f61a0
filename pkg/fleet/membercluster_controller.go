package fleet

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
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
	"configbundle.dev/hub/pkg/statusbudget"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// What the hub needs on the hub cluster for its health reports, and the Events it records on
// MemberClusters (cluster-scoped objects, whose Events go to the namespace default).
// +kubebuilder:rbac:groups=hub.configbundle.dev,resources=memberclusters;fleets,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=hub.configbundle.dev,resources=memberclusters/status;fleets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// conflictRetry is how soon a status is computed again after a write lost to a newer version:
// the cache is about to catch up, this is no error.
const conflictRetry = 100 * time.Millisecond

// Members is what the reports need from the provider (*spokeprovider.Provider).
type Members interface {
	State(name string) (spokeprovider.State, bool)
	Get(ctx context.Context, name multicluster.ClusterName) (cluster.Cluster, error)
	OnChange(fn func(name string))
}

// MemberClusterReconciler keeps one MemberCluster per member.
type MemberClusterReconciler struct {
	hub             client.Client
	members         Members
	opts            Options
	secretNamespace string

	recorder events.EventRecorder

	// writes spaces out the status writes of each member that change only its counts.
	writes statusbudget.Budget[string]
}

// SetupWithManager builds the MemberCluster and Fleet controllers. secretNamespace is the namespace of the kubeconfig Secrets.
func SetupWithManager(mgr mcmanager.Manager, members Members, secretNamespace string, opts Options) error {
	opts.defaults()
	r := &MemberClusterReconciler{
		hub: mgr.GetLocalManager().GetClient(), members: members, opts: opts,
		secretNamespace: secretNamespace, writes: statusbudget.Budget[string]{Interval: opts.MinWriteInterval},
		recorder: mgr.GetLocalManager().GetEventRecorder(hubv1alpha1.FieldOwner),
	}
	byMemberName := func(name multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
		return handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []mcreconcile.Request {
			if name == "" { // the hub: a MemberCluster, or a Secret, named after its member
				return []mcreconcile.Request{{Request: reconcile.Request{NamespacedName: client.ObjectKey{Name: o.GetName()}}}}
			}
			return []mcreconcile.Request{{Request: reconcile.Request{NamespacedName: client.ObjectKey{Name: string(name)}}}}
		})
	}
	hubOnly := []mcbuilder.WatchesOption{mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithEngageWithProviderClusters(false)}
	err := mcbuilder.ControllerManagedBy(mgr).
		Named("membercluster").
		Watches(&hubv1alpha1.MemberCluster{}, byMemberName, hubOnly...).
		Watches(&corev1.Secret{}, byMemberName, append(hubOnly, mcbuilder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == secretNamespace // the cache holds source Secrets too
		})))...).
		Watches(&configbundlev1alpha1.ConfigBundle{}, byMemberName, mcbuilder.WithEngageWithLocalCluster(false), mcbuilder.WithEngageWithProviderClusters(true)).
		WatchesRawSource(r.stateChanges()).
		WithOptions(controller.TypedOptions[mcreconcile.Request]{
			MaxConcurrentReconciles: opts.MaxConcurrentReconciles, ReconciliationTimeout: opts.ReconcileTimeout,
			NeedLeaderElection: ptr.To(!opts.Replica.Sharded()),
			RateLimiter:        statusbudget.RateLimiter[mcreconcile.Request](),
		}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("building the membercluster controller: %w", err)
	}
	return setupFleet(mgr.GetLocalManager(), opts)
}

// stateChanges enqueues a member whenever the provider's view of it changes.
func (r *MemberClusterReconciler) stateChanges() source.TypedSource[mcreconcile.Request] {
	return source.TypedFunc[mcreconcile.Request](func(_ context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
		r.members.OnChange(func(name string) {
			q.Add(mcreconcile.Request{Request: reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}})
		})
		return nil
	})
}

// Reconcile writes one member's MemberCluster from the provider's state and the member's
// bundles, or deletes it when the member's Secret is gone.
func (r *MemberClusterReconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	name := req.Name
	if !r.opts.Replica.Owns(name) { // another replica manages it, and reports it
		r.writes.Forget(name)
		deleteMemberMetrics(name)
		return ctrl.Result{}, nil
	}
	if gone, err := r.secretGone(ctx, name); err != nil || gone {
		return ctrl.Result{}, r.deleteStale(ctx, name, err)
	}
	state, known := r.members.State(name)
	if !known { // the provider has not admitted the Secret yet; it will say when it does
		return ctrl.Result{}, nil
	}
	mc, err := r.getOrCreate(ctx, name, state)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := time.Now()
	setCredentialsMetric(name, state.CredentialsExpiry)
	want := r.status(ctx, mc, state, now)
	setMemberMetrics(name, want)
	if equality.Semantic.DeepEqual(want, mc.Status) {
		return r.requeue(state, want, now), nil
	}
	// A change of a condition or of the managing replica is written at once; counts and
	// lastSeenTime wait for the budget.
	transition := !equality.Semantic.DeepEqual(conditionsOf(want), conditionsOf(mc.Status)) || want.Replica != mc.Status.Replica
	if wait := r.writes.Take(name, transition); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	updated := mc.DeepCopy()
	updated.Status = want
	if err := r.hub.Status().Update(ctx, updated, client.FieldOwner(hubv1alpha1.FieldOwner)); apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: conflictRetry}, nil // a newer MemberCluster is on its way: compute again
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("writing MemberCluster status: %w", err)
	}
	r.recordTransitions(mc, updated)
	return r.requeue(state, want, now), nil
}

// getOrCreate reads the member's MemberCluster, creating it if it does not exist. The hub never
// changes an existing MemberCluster's metadata: labels set by users and by `hub register
// --label` stay.
func (r *MemberClusterReconciler) getOrCreate(ctx context.Context, name string, state spokeprovider.State) (*hubv1alpha1.MemberCluster, error) {
	mc := &hubv1alpha1.MemberCluster{}
	err := r.hub.Get(ctx, client.ObjectKey{Name: name}, mc)
	if err == nil {
		return mc, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading MemberCluster: %w", err)
	}
	mc = &hubv1alpha1.MemberCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{hubv1alpha1.ManagedByLabel: hubv1alpha1.FieldOwner}},
		Spec:       hubv1alpha1.MemberClusterSpec{SecretRef: hubv1alpha1.SecretReference{Namespace: state.SecretNamespace, Name: state.SecretName}},
	}
	if err := r.hub.Create(ctx, mc, client.FieldOwner(hubv1alpha1.FieldOwner)); err != nil {
		return nil, fmt.Errorf("creating MemberCluster: %w", err)
	}
	return mc, nil
}

// recordTransitions records an Event on the MemberCluster for each condition whose status or
// reason the write changed: Normal when it became True or its reason is a routine step of a join
// (hubv1alpha1.RoutineReasons), Warning otherwise; and a Normal Event when the member was paused
// or resumed (recordPause).
func (r *MemberClusterReconciler) recordTransitions(before, after *hubv1alpha1.MemberCluster) {
	r.recordPause(before, after)
	for _, t := range []string{hubv1alpha1.ReadyCondition, hubv1alpha1.CredentialsValidCondition} {
		was, now := meta.FindStatusCondition(before.Status.Conditions, t), meta.FindStatusCondition(after.Status.Conditions, t)
		if now == nil || (was != nil && was.Status == now.Status && was.Reason == now.Reason) {
			continue
		}
		eventType := corev1.EventTypeWarning
		if now.Status == metav1.ConditionTrue || slices.Contains(hubv1alpha1.RoutineReasons, now.Reason) {
			eventType = corev1.EventTypeNormal
		}
		r.recorder.Eventf(after, nil, eventType, now.Reason, t, "Member %s: %s is %s (%s): %s", after.Name, t, now.Status, now.Reason, now.Message)
	}
}

// recordPause records a Normal Event on the MemberCluster when the write changed its Paused
// condition: reason Paused when it became True, Resumed when it went from True to False. A member
// that starts unpaused (no Paused condition before) gets none.
func (r *MemberClusterReconciler) recordPause(before, after *hubv1alpha1.MemberCluster) {
	was := meta.IsStatusConditionTrue(before.Status.Conditions, hubv1alpha1.PausedCondition)
	now := meta.FindStatusCondition(after.Status.Conditions, hubv1alpha1.PausedCondition)
	switch {
	case now == nil:
	case !was && now.Status == metav1.ConditionTrue:
		r.recorder.Eventf(after, nil, corev1.EventTypeNormal, hubv1alpha1.PausedReason, hubv1alpha1.PausedCondition,
			"Member %s paused: placement writes nothing to it until it is resumed; its bundles are still enforced and healed", after.Name)
	case was && now.Status != metav1.ConditionTrue:
		r.recorder.Eventf(after, nil, corev1.EventTypeNormal, hubv1alpha1.ResumedReason, hubv1alpha1.PausedCondition,
			"Member %s resumed: placement brings it up to date", after.Name)
	}
}

// secretGone reports whether the member's labelled Secret is gone (the hub's cache holds only
// labelled Secrets of the namespace).
func (r *MemberClusterReconciler) secretGone(ctx context.Context, name string) (bool, error) {
	err := r.hub.Get(ctx, client.ObjectKey{Namespace: r.secretNamespace, Name: name}, &corev1.Secret{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

func (r *MemberClusterReconciler) deleteStale(ctx context.Context, name string, err error) error {
	if err != nil {
		return fmt.Errorf("reading the member's Secret: %w", err)
	}
	mc := &hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := r.hub.Delete(ctx, mc); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting stale MemberCluster: %w", err)
	}
	r.writes.Forget(name)
	deleteMemberMetrics(name)
	return nil
}

// requeue comes back to count a counted member's bundles again (every MinWriteInterval while
// the status st says it is Syncing, for the count left and the end of it), and when the
// member's credential enters the warning window or expires.
func (r *MemberClusterReconciler) requeue(state spokeprovider.State, st hubv1alpha1.MemberClusterStatus, now time.Time) ctrl.Result {
	var next time.Duration
	switch {
	case counted(state) && syncing(st):
		next = r.opts.MinWriteInterval
	case counted(state):
		next = r.opts.RecountInterval
	}
	if exp := state.CredentialsExpiry; !exp.IsZero() {
		for _, at := range []time.Time{exp.Add(-r.opts.CredentialsExpiryWarning), exp} {
			if d := at.Sub(now) + time.Second; d > time.Second && (next == 0 || d < next) {
				next = d
			}
		}
	}
	return ctrl.Result{RequeueAfter: next}
}
