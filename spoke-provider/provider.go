package spokeprovider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/kubeconfig"
)

// ErrNotConnected is returned (wrapped) by Connected for a member that is not Ready.
var ErrNotConnected = errors.New("member cluster not connected")

// Provider discovers members from kubeconfig Secrets and connects to them.
//
// Concurrency: the Secret controller's workqueue never hands one Secret to two workers at
// once, so one member's kubeconfig is admitted by one Reconcile at a time. Connecting, probing
// and engaging run in goroutines of their own; each works for one connection attempt (a
// kubeconfig hash) or one connection, and applies its result only if that attempt or
// connection is still the member's current one. mu guards members, indexers and the
// callbacks, and is never held across a network call or a callback.
type Provider struct {
	opts Options
	log  logr.Logger
	hub  client.Client

	started chan struct{} // closed by Start, which sets ctx and aware
	ctx     context.Context
	aware   multicluster.Aware

	// queue is the Secret controller's workqueue, through which a failed connection is
	// retried (AddAfter); set (under mu, for Rebalance) when the controller starts, before any
	// Reconcile.
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]

	mu        sync.Mutex
	members   map[string]*member // by member name (the Secret's name)
	indexers  []index
	onChange  []func(name string)
	onReady   []func(name string)
	metricsMu sync.Mutex // serialises metric updates
}

type index struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
)

// New returns a Provider. Call SetupWithManager before starting the manager.
func New(opts Options) *Provider {
	opts.defaults()
	return &Provider{
		opts:    opts,
		log:     ctrl.Log.WithName("spoke-provider"),
		started: make(chan struct{}),
		members: map[string]*member{},
	}
}

// Options returns the provider's options, defaults applied.
func (p *Provider) Options() Options { return p.opts }

// SetupWithManager watches the kubeconfig Secrets through the hub (local) cluster of mgr. The
// manager's cache should be restricted to Options.Namespace and Options.Label for Secrets (see
// SecretCacheOptions), so that the hub reads no other Secret.
func (p *Provider) SetupWithManager(mgr mcmanager.Manager) error {
	p.hub = mgr.GetLocalManager().GetClient()
	inNamespace := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == p.opts.Namespace })
	keepQueue := source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		p.mu.Lock()
		p.queue = q
		p.mu.Unlock()
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr.GetLocalManager()).
		Named("kubeconfig-secrets").
		For(&corev1.Secret{}, builder.WithPredicates(inNamespace)).
		WatchesRawSource(keepQueue).
		WithOptions(controller.Options{MaxConcurrentReconciles: p.opts.MaxConcurrentReconciles, NeedLeaderElection: ptr.To(p.NeedLeaderElection())}).
		Complete(p)
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: a provider that shards members
// between replicas (a sharded Options.Replica) runs on each of them; otherwise only on the
// elected one.
func (p *Provider) NeedLeaderElection() bool { return !p.opts.Replica.Sharded() }

// Owns reports whether this replica manages the member: always, unless Options.Replica shards
// the members between replicas.
func (p *Provider) Owns(name string) bool { return p.opts.Replica.Owns(name) }

// Rebalance has every member's Secret reconciled again, so that the provider lets go of the
// members it no longer owns and connects the ones it now owns. Call it when the answers of
// Options.Replica.Owns may have changed (the peer replicas changed).
func (p *Provider) Rebalance(ctx context.Context) error {
	p.mu.Lock()
	queue := p.queue
	p.mu.Unlock()
	if queue == nil {
		return nil // not started yet: every Secret is reconciled when it starts
	}
	secrets := &corev1.SecretList{}
	if err := p.hub.List(ctx, secrets, client.InNamespace(p.opts.Namespace), client.MatchingLabels{p.opts.Label: "true"}); err != nil {
		return fmt.Errorf("listing the kubeconfig Secrets: %w", err)
	}
	for _, s := range secrets.Items {
		queue.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&s)})
	}
	return nil
}

// Start implements multicluster.ProviderRunnable: it records the manager to engage members
// with and, when ctx ends, disconnects every member.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.ctx, p.aware = ctx, aware
	close(p.started)
	<-ctx.Done()
	p.mu.Lock()
	for _, m := range p.members {
		if m.active != nil {
			m.active.cancel()
		}
	}
	p.mu.Unlock()
	return nil
}

// Get returns the connected cluster of a member, or multicluster.ErrClusterNotFound.
func (p *Provider) Get(_ context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, ok := p.members[string(name)]; ok && m.active != nil {
		return m.active.cluster, nil
	}
	return nil, fmt.Errorf("member %q: %w", name, multicluster.ErrClusterNotFound)
}

// IndexField indexes a field on every member's cache, present and future.
func (p *Provider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	p.mu.Lock()
	p.indexers = append(p.indexers, index{obj: obj, field: field, extract: extract})
	var clusters []cluster.Cluster
	for _, m := range p.members {
		if m.active != nil {
			clusters = append(clusters, m.active.cluster)
		}
	}
	p.mu.Unlock()
	var errs []error
	for _, cl := range clusters {
		errs = append(errs, cl.GetFieldIndexer().IndexField(ctx, obj, field, extract))
	}
	return errors.Join(errs...)
}

// Connected returns nil if the member is connected and answering; an error wrapping
// ErrNotConnected if it is engaged but does not answer (try again later); and an error wrapping
// multicluster.ErrClusterNotFound if it is not engaged at all (drop the request: when it is
// engaged, its objects are enqueued anew). Reconcilers call it before touching a member, so that
// they back off from an unreachable member instead of blocking on it.
func (p *Provider) Connected(name multicluster.ClusterName) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.members[string(name)]
	switch {
	case !ok || m.active == nil:
		return fmt.Errorf("member %q: %w", name, multicluster.ErrClusterNotFound)
	case !m.state.Ready:
		return fmt.Errorf("member %q is %s: %w", name, m.state.Reason, ErrNotConnected)
	}
	return nil
}

// State returns what the provider knows of a member, and false if no labelled Secret names it.
func (p *Provider) State(name string) (State, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.members[name]
	if !ok {
		return State{}, false
	}
	return m.state, true
}

// OnChange registers fn to be called with a member's name whenever its State changes or it
// leaves. fn must not block.
func (p *Provider) OnChange(fn func(name string)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onChange = append(p.onChange, fn)
}

// OnReady registers fn to be called with a member's name whenever it becomes Ready, on join
// and on recovery, and when it answers a probe again after failing some, too few to be
// Unreachable: its watches may have broken meanwhile. fn must not block.
func (p *Provider) OnReady(fn func(name string)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onReady = append(p.onReady, fn)
}

// Reconcile brings the provider's view of one member in line with its Secret.
func (p *Provider) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	select {
	case <-p.started:
	case <-ctx.Done():
		return ctrl.Result{}, ctx.Err()
	}
	secret := &corev1.Secret{}
	if err := p.hub.Get(ctx, req.NamespacedName, secret); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("reading Secret: %w", err)
	} else if err != nil || secret.Labels[p.opts.Label] != "true" || !secret.DeletionTimestamp.IsZero() {
		p.remove(req.Name, "Member left")
		return ctrl.Result{}, nil
	}
	if !p.Owns(req.Name) {
		p.remove(req.Name, "Member handed over to another replica")
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: p.admit(secret)}, nil
}

// admit starts connecting with the Secret's kubeconfig, unless that very kubeconfig is
// connected, being connected, refused, or waiting to be tried again (then it returns how long
// until it may be).
func (p *Provider) admit(secret *corev1.Secret) time.Duration {
	name, data := secret.Name, secret.Data[p.opts.Key]
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])

	p.mu.Lock()
	m, ok := p.members[name]
	if !ok {
		m = newMember(secret.Namespace, secret.Name)
		p.members[name] = m
	}
	connect, retryIn := m.next(hash, time.Now())
	if !connect {
		p.mu.Unlock()
		return retryIn
	}
	cfg, err := p.restConfig(secret, data)
	if err != nil {
		reason, message := classify(err)
		m.refused(hash, reason, message)
		p.mu.Unlock()
		p.log.Info("Kubeconfig refused", "cluster", name, "reason", reason, "message", message)
		p.changed(name)
		return 0
	}
	before := m.state
	m.connecting(hash)
	changed := !ok || m.state != before // a new member is news, even in its initial state
	p.mu.Unlock()
	if changed {
		p.changed(name)
	}
	go p.connect(name, hash, cfg)
	return 0
}

func (p *Provider) restConfig(secret *corev1.Secret, data []byte) (*rest.Config, error) {
	if len(data) == 0 {
		return nil, &kubeconfig.Error{Reason: hubv1alpha1.InvalidKubeconfigReason,
			Message: fmt.Sprintf("Secret %s/%s has no kubeconfig under the key %q", secret.Namespace, secret.Name, p.opts.Key)}
	}
	cfg, err := kubeconfig.RESTConfig(data)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = p.opts.QPS, p.opts.Burst
	cfg.UserAgent = hubv1alpha1.UserAgent
	return cfg, nil
}

// connect dials a member in the background and, if it works, engages it in place of the
// previous connection.
func (p *Provider) connect(name, hash string, cfg *rest.Config) {
	log := p.log.WithValues("cluster", name)
	ctx, cancel := context.WithTimeout(p.ctx, p.opts.ConnectTimeout)
	defer cancel()
	start := time.Now()
	conn, err := p.dial(ctx, name, hash, cfg)
	dialed := time.Now()

	p.mu.Lock()
	m, ok := p.members[name]
	if !ok || !m.attempting(hash) { // the member left, or its Secret moved on
		p.mu.Unlock()
		if conn != nil {
			conn.cancel()
		}
		return
	}
	if err == nil {
		err = p.duplicateLocked(name, conn.clusterID)
	}
	if err != nil {
		p.mu.Unlock()
		if conn != nil {
			conn.cancel()
		}
		log.Info("Connecting to member failed", "error", err.Error())
		p.connectFailed(name, hash, err)
		return
	}
	now := time.Now()
	old := m.connected(conn, now)
	p.mu.Unlock()
	answered(name, now)

	if err := p.aware.Engage(conn.ctx, multicluster.ClusterName(name), conn.cluster); err != nil {
		log.Error(err, "Engaging member failed")
		p.mu.Lock()
		m.engageFailed(conn, old)
		p.mu.Unlock()
		conn.cancel()
		p.connectFailed(name, hash, err)
		return
	}
	took := []any{"dial", dialed.Sub(start).String(), "engage", time.Since(dialed).String()}
	if old != nil {
		old.cancel()
		log.Info("Member credentials rotated", took...)
	} else {
		log.Info("Member joined", append(took, "kubernetesVersion", conn.version)...)
	}
	go p.probe(name, conn)
	p.changed(name)
	p.ready(name)
}

// connectFailed records a failed attempt, unless the member left or its Secret moved on
// meanwhile, and has the Secret reconciled again after the back-off. A member with a working
// connection keeps it.
func (p *Provider) connectFailed(name, hash string, err error) {
	reason, message := classify(err)
	var refused time.Time
	if cerr := (*connectError)(nil); errors.As(err, &cerr) {
		refused = cerr.expiry
	}
	p.mu.Lock()
	m, ok := p.members[name]
	ok = ok && m.attempting(hash)
	var retryIn time.Duration
	if ok {
		retryIn = m.connectFailed(hash, reason, message, refused, time.Now(), p.opts.RetryMaxDelay)
	}
	p.mu.Unlock()
	if !ok {
		return
	}
	p.changed(name)
	p.queue.AddAfter(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: p.opts.Namespace, Name: name}}, retryIn)
}

// remove disengages a member whose Secret is gone or unlabelled, or that another replica now
// manages, and logs why. Nothing in the member changes.
func (p *Provider) remove(name, why string) {
	p.mu.Lock()
	m, ok := p.members[name]
	delete(p.members, name)
	var active *connection
	var duplicates []string
	if ok {
		active = m.active
		duplicates = p.duplicatesLocked()
	}
	p.mu.Unlock()
	if !ok {
		return
	}
	if active != nil {
		active.cancel()
	}
	forgetMemberMetrics(name)
	p.log.Info(why, "cluster", name)
	p.changed(name)
	// A member refused as a duplicate may be the cluster that just left: try it now, not after
	// its back-off.
	for _, d := range duplicates {
		p.queue.Add(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: p.opts.Namespace, Name: d}})
	}
}

// duplicatesLocked returns the members refused as duplicates of another.
func (p *Provider) duplicatesLocked() []string {
	var names []string
	for name, m := range p.members {
		if m.phase == phaseBackingOff && m.failReason == hubv1alpha1.DuplicateClusterReason {
			names = append(names, name)
		}
	}
	return names
}

// duplicateLocked refuses a cluster that another member already is.
func (p *Provider) duplicateLocked(name, clusterID string) error {
	for other, m := range p.members {
		if other != name && m.active != nil && m.active.clusterID == clusterID {
			return &connectError{reason: hubv1alpha1.DuplicateClusterReason,
				err: fmt.Errorf("this cluster (kube-system uid %s) is already member %q; it is managed once, under that name", clusterID, other)}
		}
	}
	return nil
}

func (p *Provider) changed(name string) {
	p.mu.Lock()
	fns := slices.Clone(p.onChange)
	p.mu.Unlock()
	p.updateMetrics()
	for _, fn := range fns {
		fn(name)
	}
}

func (p *Provider) ready(name string) {
	p.mu.Lock()
	fns := slices.Clone(p.onReady)
	p.mu.Unlock()
	for _, fn := range fns {
		fn(name)
	}
}
