package configbundle

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
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
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/pkg/fairqueue"
)

// What the reconciler needs in each member cluster.
// +kubebuilder:rbac:groups=configbundle.dev,resources=configbundles,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=configbundle.dev,resources=configbundles/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=configbundle.dev,resources=configbundles/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// ControllerName names the controller in logs and metrics.
const ControllerName = "configbundle"

// Reconciler reconciles ConfigBundles in every member cluster of a multicluster manager. It is
// also a runnable of that manager, engaged with every member, so that it forgets what it
// remembers of a member's bundles when the member leaves.
type Reconciler struct {
	manager mcmanager.Manager
	opts    Options
	ledger  ledger
	fenced  fencedRequests
}

var _ mcmanager.Runnable = &Reconciler{}

// SetupWithManager builds the ConfigBundle controller on mgr: it watches ConfigBundles,
// ConfigMaps and the Secrets of bundles with target Secret (SecretLabel) in every member cluster
// the manager's provider engages.
func SetupWithManager(mgr mcmanager.Manager, opts Options) (*Reconciler, error) {
	opts.defaults()
	r := &Reconciler{manager: mgr, opts: opts}
	// Added before the controller, so that a member is engaged with the Reconciler before its
	// events reach the controller.
	if err := mgr.Add(r); err != nil {
		return nil, fmt.Errorf("adding the %s reconciler to the manager: %w", ControllerName, err)
	}
	b := mcbuilder.ControllerManagedBy(mgr).
		Named(ControllerName).
		Watches(&configbundlev1alpha1.ConfigBundle{}, r.bundleEvents, mcbuilder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			predicate.LabelChangedPredicate{},
			predicate.AnnotationChangedPredicate{},
		))).
		Watches(&corev1.ConfigMap{}, r.configMapToBundle).
		Watches(&corev1.Secret{}, r.configMapToBundle).
		WithOptions(controller.TypedOptions[mcreconcile.Request]{
			MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
			ReconciliationTimeout:   opts.ReconcileTimeout,
			NeedLeaderElection:      ptr.To(!opts.Replica.Sharded()),
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[mcreconcile.Request](opts.RetryBaseDelay, opts.RetryMaxDelay),
			NewQueue:                opts.newQueue,
			LogConstructor: func(req *mcreconcile.Request) logr.Logger {
				log := mgr.GetLogger().WithValues("controller", ControllerName)
				if req != nil {
					log = log.WithValues("cluster", req.ClusterName, "namespace", req.Namespace, "name", req.Name)
				}
				return log
			},
		})
	if opts.ResyncOn != nil {
		b = b.WatchesRawSource(r.resyncSource())
	}
	if opts.Replica.Fenced() {
		b = b.WatchesRawSource(r.fencedSource())
	}
	if err := b.Complete(r); err != nil {
		return nil, fmt.Errorf("building the %s controller: %w", ControllerName, err)
	}
	return r, nil
}

// newQueue is the controller's work queue: fair across member clusters, so that one member's
// backlog does not delay another's heals (package fairqueue).
func (o Options) newQueue(name string, rateLimiter workqueue.TypedRateLimiter[mcreconcile.Request]) workqueue.TypedRateLimitingInterface[mcreconcile.Request] {
	return fairqueue.New(fairqueue.Options[mcreconcile.Request]{
		MemberOf:             func(req mcreconcile.Request) string { return string(req.ClusterName) },
		MaxInFlightPerMember: o.MaxConcurrentReconcilesPerMember,
		RateLimiter:          rateLimiter,
		Name:                 name,
		MemberMetrics:        queueMetrics{},
	})
}

// Start implements mcmanager.Runnable: the Reconciler has nothing to run of its own, it waits
// until ctx is done.
func (r *Reconciler) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Engage implements multicluster.Aware: the Reconciler remembers the bundles of member name
// until ctx, the engagement, ends, and which of those the member holds now it has not
// reconciled since (Sync).
func (r *Reconciler) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	r.engage(ctx, name, r.unsynced(ctx, name, cl))
	return nil
}

// engage starts the engagement ctx with member name, which holds the bundles unsynced.
func (r *Reconciler) engage(ctx context.Context, name multicluster.ClusterName, unsynced map[types.NamespacedName]struct{}) {
	e := r.ledger.engage(name, unsynced)
	context.AfterFunc(ctx, func() {
		r.ledger.forgetCluster(name, e)
		r.fenced.forget(name)
	})
}

// bundleEvents maps a bundle's events in a member to its request. The items of the member's
// initial list go behind its changes (handler.LowPriority, as controller-runtime's handlers queue
// them), except a bundle whose status is not current: its spec changed while no hub watched.
func (r *Reconciler) bundleEvents(name multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	type queue = workqueue.TypedRateLimitingInterface[mcreconcile.Request]
	request := func(o client.Object) mcreconcile.Request {
		return mcreconcile.Request{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)}, ClusterName: name}
	}
	return handler.TypedFuncs[client.Object, mcreconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q queue) {
			if b, ok := e.Object.(*configbundlev1alpha1.ConfigBundle); ok && e.IsInInitialList && changedWhileAway(b, nil) {
				addAt(q, request(e.Object), 0)
				return
			}
			q.Add(request(e.Object))
		},
		UpdateFunc:  func(_ context.Context, e event.TypedUpdateEvent[client.Object], q queue) { q.Add(request(e.ObjectNew)) },
		DeleteFunc:  func(_ context.Context, e event.TypedDeleteEvent[client.Object], q queue) { q.Add(request(e.Object)) },
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[client.Object], q queue) { q.Add(request(e.Object)) },
	}
}

// configMapToBundle maps a ConfigMap event in a member to the ConfigBundle of the same name, if
// there is one. The name is the link, not the ownerReference, so that a foreign ConfigMap in a
// bundle's way wakes the bundle when it goes away. A created or updated ConfigMap that is the
// reconciler's own last write wakes nobody; a deletion always wakes the bundle, even one reported
// by a re-list (a tombstone carrying the last state the hub saw, which may be its own write). It
// also notes when a change was seen, the start of the heal latency. The items of the member's
// initial list go behind its changes (handler.LowPriority), except a ConfigMap that changed
// while no hub watched (changedWhileAway).
func (r *Reconciler) configMapToBundle(name multicluster.ClusterName, cl cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	type queue = workqueue.TypedRateLimitingInterface[mcreconcile.Request]
	enqueue := func(ctx context.Context, cm client.Object, deleted, listed bool, q queue) {
		key := client.ObjectKeyFromObject(cm)
		bundle := &configbundlev1alpha1.ConfigBundle{}
		if configMap, ok := cm.(*corev1.ConfigMap); listed || !ok || !isControlledByBundle(configMap) {
			if err := cl.GetCache().Get(ctx, key, bundle); err != nil {
				return
			}
		}
		req := mcreconcile.Request{Request: reconcile.Request{NamespacedName: key}, ClusterName: name}
		if !deleted && r.ledger.isOwnWrite(req, cm.GetResourceVersion()) {
			return // the reconciler's own write: nothing to do
		}
		r.ledger.noteSeen(req)
		if listed && changedWhileAway(bundle, cm) {
			addAt(q, req, 0)
			return
		}
		q.Add(req)
	}
	return handler.TypedFuncs[client.Object, mcreconcile.Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[client.Object], q queue) {
			enqueue(ctx, e.Object, false, e.IsInInitialList, q)
		},
		// The old object is not looked at: it is never the reconciler's own last write. An update
		// that changes nothing (a re-list, a resync of the informer) wakes nobody either.
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
			if e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion() {
				enqueue(ctx, e.ObjectNew, false, false, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[client.Object], q queue) {
			enqueue(ctx, e.Object, true, false, q)
		},
		GenericFunc: func(ctx context.Context, e event.TypedGenericEvent[client.Object], q queue) {
			enqueue(ctx, e.Object, true, false, q)
		},
	}
}

// Reconcile converges one ConfigBundle in one member cluster and records the outcome.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	if r.opts.Connected != nil {
		switch err := r.opts.Connected(req.ClusterName); {
		case errors.Is(err, multicluster.ErrClusterNotFound):
			return ctrl.Result{}, nil // gone: its bundles are enqueued again if it comes back
		case err != nil:
			reconcilesTotal.WithLabelValues(string(req.ClusterName), "notConnected").Inc()
			return ctrl.Result{RequeueAfter: r.opts.NotConnectedRetry}, nil
		}
	}
	if !r.opts.Replica.MayWrite(string(req.ClusterName)) {
		// This replica cannot be sure it holds the member's fence now (the hub cluster is down
		// or cut off): the request waits, without back-off, until the fence is back.
		reconcilesTotal.WithLabelValues(string(req.ClusterName), "fenced").Inc()
		r.fenced.add(req)
		return ctrl.Result{}, nil
	}
	seenAt, seen := r.ledger.takeSeen(req)
	live := r.ledger.takeVerifyLive(req)
	s, res, err := r.reconcile(ctx, req, live)
	if err != nil && live {
		r.ledger.noteVerifyLive(req) // the retry reads live too
	}
	if recorded(s, err) {
		r.ledger.noteRecorded(req)
	}
	recordMetrics(req.ClusterName, s, seenAt, seen, err)
	return res, err
}

// reconcile converges one bundle, on what the cache holds, or on what the API server holds if
// live.
func (r *Reconciler) reconcile(ctx context.Context, req mcreconcile.Request, live bool) (*scope, ctrl.Result, error) {
	cl, err := r.manager.GetCluster(ctx, req.ClusterName)
	if err != nil {
		return nil, ctrl.Result{}, fmt.Errorf("getting cluster %q: %w", req.ClusterName, err)
	}

	bundle, live, err := r.readBundle(ctx, cl, req, live)
	if bundle == nil {
		return nil, ctrl.Result{}, err
	}
	// A bundle being deleted leaves its ConfigMap to the garbage collector.
	if !bundle.DeletionTimestamp.IsZero() {
		return nil, ctrl.Result{}, nil
	}

	r.ledger.observe(req, bundle.UID)
	s := &scope{req: req, member: cl, bundle: bundle, live: live, fieldOwner: r.opts.FieldOwner, healStatusDelay: r.opts.HealStatusDelay, ledger: &r.ledger,
		secret: bundle.Spec.TargetKind() == configbundlev1alpha1.TargetSecret, hubSources: r.opts.HubSources}
	// Neither error hides the other. A terminal sync error stays terminal only once the status
	// that tells the user what to fix is written; until then it is retried. An outcome the
	// status could not tell is kept for the hub's reports (Unreported).
	syncErr := s.sync(ctx)
	s.statusErr = s.writeStatus(ctx)
	if s.ready.Type != "" {
		r.ledger.noteUnreported(req, s.unreported())
	}
	if s.statusErr != nil && errors.Is(syncErr, reconcile.TerminalError(nil)) {
		if inner := errors.Unwrap(syncErr); inner != nil {
			syncErr = inner
		}
	}
	if err := outcomeError(syncErr, s.statusErr); err != nil {
		return s, ctrl.Result{}, err
	}
	if s.statusDue > 0 {
		return s, ctrl.Result{RequeueAfter: s.statusDue}, nil
	}
	// The periodic resync of a bundle that has not changed goes behind every change.
	return s, ctrl.Result{RequeueAfter: jitter(r.opts.ResyncPeriod), Priority: ptr.To(handler.LowPriority)}, nil
}

// readBundle reads the bundle of req from the cache; or from the API server if live, or if the
// cache has not caught up with what an earlier live read found (ledger.liveBundle), and then it
// says so. A bundle that is gone is forgotten and returned as nil.
func (r *Reconciler) readBundle(ctx context.Context, cl cluster.Cluster, req mcreconcile.Request, live bool) (*configbundlev1alpha1.ConfigBundle, bool, error) {
	bundle := &configbundlev1alpha1.ConfigBundle{}
	reader := client.Reader(cl.GetClient())
	if live {
		reader = cl.GetAPIReader()
	}
	err := reader.Get(ctx, req.NamespacedName, bundle)
	if err == nil && !live && r.ledger.cacheLagsBundle(req, bundle.ResourceVersion) {
		live, err = true, cl.GetAPIReader().Get(ctx, req.NamespacedName, bundle)
	}
	switch {
	case apierrors.IsNotFound(err):
		r.ledger.forgetBundle(req)
		return nil, live, nil
	case err != nil:
		return nil, live, err
	case live:
		r.ledger.noteLiveRead(req, bundle.ResourceVersion)
	}
	return bundle, live, nil
}

// outcomeError is the error of a reconcile, on one line: the sync's first, the cause, then the
// status write's.
func outcomeError(syncErr, statusErr error) error {
	switch {
	case syncErr == nil:
		return statusErr
	case statusErr == nil:
		return syncErr
	}
	return fmt.Errorf("%w (and the status could not tell it: %w)", syncErr, statusErr)
}

func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/10+1))
}
