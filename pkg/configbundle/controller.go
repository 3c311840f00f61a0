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
	"k8s.io/client-go/util/workqueue"
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

	"configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// What the reconciler needs in each member cluster.
// +kubebuilder:rbac:groups=configbundle.dev,resources=configbundles,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=configbundle.dev,resources=configbundles/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=configbundle.dev,resources=configbundles/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// ControllerName names the controller in logs and metrics.
const ControllerName = "configbundle"

// DefaultFieldOwner is the default Options.FieldOwner: the hub's.
const DefaultFieldOwner = hubv1alpha1.FieldOwner

// Options configure the Reconciler. The zero value is ready to use; each field documents its
// default.
type Options struct {
	// ResyncPeriod is how often a bundle is reconciled with no event, a safety net under the
	// watches (each bundle gets up to 10% jitter). Defaults to 10 minutes.
	ResyncPeriod time.Duration

	// RetryBaseDelay is the delay before a failed reconcile of a bundle is retried; it doubles
	// with every further failure of that bundle. Defaults to 3 seconds.
	RetryBaseDelay time.Duration

	// RetryMaxDelay caps the retry delay. Defaults to 1 minute.
	RetryMaxDelay time.Duration

	// MaxConcurrentReconciles is the number of workers shared by all member clusters.
	// Defaults to 8.
	MaxConcurrentReconciles int

	// ReconcileTimeout bounds one reconcile, so that a hanging member cannot hold a worker.
	// Defaults to 30 seconds.
	ReconcileTimeout time.Duration

	// FieldOwner is the field manager of the reconciler's writes and the reporting controller of
	// its Events. Defaults to DefaultFieldOwner.
	FieldOwner string

	// Connected, if set, is asked before each reconcile whether the member can be reached. While
	// it returns an error the member is left alone and the bundle is retried after
	// NotConnectedRetry, so that no worker waits on an unreachable member; an error wrapping
	// multicluster.ErrClusterNotFound drops the request instead. Defaults to nil: every member is
	// assumed reachable.
	Connected func(multicluster.ClusterName) error

	// NotConnectedRetry is the delay before a bundle of an unreachable member is tried again.
	// Defaults to 10 seconds.
	NotConnectedRetry time.Duration

	// ResyncOn, if set, is called once, when the controller starts, with a function that
	// enqueues every bundle of a member cluster; the caller calls it whenever a member's bundles
	// must all be reconciled now, so that a member that comes back after an outage is healed at
	// once (the hub passes its provider's OnReady). The function does not block. Defaults to nil.
	ResyncOn func(resync func(name string))
}

func (o *Options) defaults() {
	if o.ResyncPeriod <= 0 {
		o.ResyncPeriod = 10 * time.Minute
	}
	if o.RetryBaseDelay <= 0 {
		o.RetryBaseDelay = 3 * time.Second
	}
	if o.RetryMaxDelay <= 0 {
		o.RetryMaxDelay = time.Minute
	}
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = 8
	}
	if o.ReconcileTimeout <= 0 {
		o.ReconcileTimeout = 30 * time.Second
	}
	if o.FieldOwner == "" {
		o.FieldOwner = DefaultFieldOwner
	}
	if o.NotConnectedRetry <= 0 {
		o.NotConnectedRetry = 10 * time.Second
	}
}

// Reconciler reconciles ConfigBundles in every member cluster of a multicluster manager. It is
// also a runnable of that manager, engaged with every member, so that it forgets what it
// remembers of a member's bundles when the member leaves.
type Reconciler struct {
	manager mcmanager.Manager
	opts    Options
	memory  memory
}

var _ mcmanager.Runnable = &Reconciler{}

// SetupWithManager builds the ConfigBundle controller on mgr: it watches ConfigBundles and
// ConfigMaps in every member cluster the manager's provider engages.
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
		For(&v1alpha1.ConfigBundle{}, mcbuilder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			predicate.LabelChangedPredicate{},
			predicate.AnnotationChangedPredicate{},
		))).
		Watches(&corev1.ConfigMap{}, r.configMapToBundle).
		WithOptions(controller.TypedOptions[mcreconcile.Request]{
			MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
			ReconciliationTimeout:   opts.ReconcileTimeout,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[mcreconcile.Request](opts.RetryBaseDelay, opts.RetryMaxDelay),
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
	if err := b.Complete(r); err != nil {
		return nil, fmt.Errorf("building the %s controller: %w", ControllerName, err)
	}
	return r, nil
}

// Start implements mcmanager.Runnable: the Reconciler has nothing to run of its own, it waits
// until ctx is done.
func (r *Reconciler) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Engage implements multicluster.Aware: the Reconciler remembers the bundles of member name
// until ctx, the engagement, ends.
func (r *Reconciler) Engage(ctx context.Context, name multicluster.ClusterName, _ cluster.Cluster) error {
	e := r.memory.engage(name)
	context.AfterFunc(ctx, func() { r.memory.forgetCluster(name, e) })
	return nil
}

// configMapToBundle maps a ConfigMap event in a member to the ConfigBundle of the same name, if
// there is one. The name is the link, not the ownerReference, so that a foreign ConfigMap in a
// bundle's way wakes the bundle when it goes away. It also notes when a managed ConfigMap's
// change was seen, the start of the heal latency.
func (r *Reconciler) configMapToBundle(name multicluster.ClusterName, cl cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, cm client.Object) []mcreconcile.Request {
		key := client.ObjectKeyFromObject(cm)
		if !isControlledByBundle(cm.(*corev1.ConfigMap)) {
			if err := cl.GetCache().Get(ctx, key, &v1alpha1.ConfigBundle{}); err != nil {
				return nil
			}
		}
		req := mcreconcile.Request{Request: reconcile.Request{NamespacedName: key}, ClusterName: name}
		if r.memory.isOwnWrite(req, cm.GetResourceVersion()) {
			return nil // the reconciler's own write: nothing to do
		}
		r.memory.seen(req)
		return []mcreconcile.Request{req}
	})
}

// resyncSource hands Options.ResyncOn a function that enqueues every bundle of a member.
func (r *Reconciler) resyncSource() source.TypedSource[mcreconcile.Request] {
	return source.TypedFunc[mcreconcile.Request](func(ctx context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
		r.opts.ResyncOn(func(name string) { r.enqueueAll(ctx, multicluster.ClusterName(name), q) })
		return nil
	})
}

func (r *Reconciler) enqueueAll(ctx context.Context, name multicluster.ClusterName, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
	cl, err := r.manager.GetCluster(ctx, name)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.ReconcileTimeout)
	defer cancel()
	bundles := &v1alpha1.ConfigBundleList{}
	if err := cl.GetCache().List(ctx, bundles, client.UnsafeDisableDeepCopy); err != nil {
		r.manager.GetLogger().Error(err, "Listing bundles to resync failed", "cluster", name)
		return
	}
	for _, b := range bundles.Items {
		q.Add(mcreconcile.Request{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&b)}, ClusterName: name})
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
	seenAt, seen := r.memory.take(req)
	s, res, err := r.reconcile(ctx, req)
	recordMetrics(req.ClusterName, s, seenAt, seen, err)
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context, req mcreconcile.Request) (*scope, ctrl.Result, error) {
	cl, err := r.manager.GetCluster(ctx, req.ClusterName)
	if err != nil {
		return nil, ctrl.Result{}, fmt.Errorf("getting cluster %q: %w", req.ClusterName, err)
	}

	bundle := &v1alpha1.ConfigBundle{}
	if err := cl.GetClient().Get(ctx, req.NamespacedName, bundle); err != nil {
		if apierrors.IsNotFound(err) {
			r.memory.forgetBundle(req)
		}
		return nil, ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// A bundle being deleted leaves its ConfigMap to the garbage collector.
	if !bundle.DeletionTimestamp.IsZero() {
		return nil, ctrl.Result{}, nil
	}

	s := &scope{req: req, member: cl, bundle: bundle, fieldOwner: r.opts.FieldOwner, memory: &r.memory}
	// Neither error hides the other. A terminal sync error stays terminal only once the status
	// that tells the user what to fix is written; until then it is retried.
	syncErr := s.sync(ctx)
	statusErr := s.writeStatus(ctx)
	if statusErr != nil && errors.Is(syncErr, reconcile.TerminalError(nil)) {
		if inner := errors.Unwrap(syncErr); inner != nil {
			syncErr = inner
		}
	}
	if err := errors.Join(syncErr, statusErr); err != nil {
		return s, ctrl.Result{}, err
	}
	return s, ctrl.Result{RequeueAfter: jitter(r.opts.ResyncPeriod)}, nil
}

func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/10+1))
}
