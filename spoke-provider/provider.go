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
	"k8s.io/client-go/tools/events"
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
	"configbundle.dev/hub/pkg/version"
)

// ErrNotConnected is returned (wrapped) by Connected for a member that is not Ready.
var ErrNotConnected = errors.New("member cluster not connected")

// Provider discovers members from kubeconfig Secrets and connects to them.
//
// Concurrency: the Secret controller's workqueue never hands one Secret to two workers at
// once, so one member's kubeconfig is admitted by one Reconcile at a time. Connecting, probing
// and engaging run in goroutines of their own; each works for one connection attempt (a
// kubeconfig hash) or one connection, and applies its result only if that attempt or
// connection is still the member's current one.
type Provider struct {
	opts Options
	log  logr.Logger
	hub  client.Client

	// recorder records Events on the hub: on the MemberClusters, about their members' CRDs.
	recorder events.EventRecorder

	started chan struct{} // closed by Start, which sets ctx and aware
	ctx     context.Context
	aware   multicluster.Aware

	// queue is the Secret controller's workqueue, through which a failed connection is
	// retried (AddAfter); set (under mu, for Rebalance) when the controller starts, before any
	// Reconcile.
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
	// crdQueue is the member-crds controller's workqueue (requests named after members), set
	// (under mu) when that controller starts; nil before.
	crdQueue workqueue.TypedRateLimitingInterface[reconcile.Request]

	// mu guards members (and every field of each member), indexers, onChange, onReady, crdQueue
	// and the setting of queue (read without mu once set: it is set before any Reconcile). It is held for short critical sections that never block: never across
	// a network call, the manager's Engage, or an OnChange or OnReady callback, which run once
	// it is released. A method named xLocked is called with mu held; every other method that
	// reads or writes what mu guards takes it once, with defer, for its whole body.
	mu       sync.Mutex
	members  map[string]*member // by member name (the Secret's name)
	indexers []index
	onChange []func(name string)
	onReady  []func(name string)

	// metricsMu serialises the updates of the members gauge; it is taken before mu, never
	// after.
	metricsMu sync.Mutex
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

// SetupWithManager watches the kubeconfig Secrets through the hub (local) cluster of mgr, and
// sets up the member-crds controller, which keeps the CRDs of the connected members (keepCRDs).
// The manager's cache should be restricted to Options.Namespace and Options.Label for Secrets
// (see SecretCacheOptions), so that the hub reads no other Secret.
func (p *Provider) SetupWithManager(mgr mcmanager.Manager) error {
	local := mgr.GetLocalManager()
	p.hub = local.GetClient()
	p.recorder = local.GetEventRecorder(p.opts.FieldOwner)
	inNamespace := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == p.opts.Namespace })
	keepQueue := source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		p.setQueue(q)
		return nil
	})
	opts := controller.Options{MaxConcurrentReconciles: p.opts.MaxConcurrentReconciles, NeedLeaderElection: ptr.To(p.NeedLeaderElection())}
	err := ctrl.NewControllerManagedBy(local).
		Named("kubeconfig-secrets").
		For(&corev1.Secret{}, builder.WithPredicates(inNamespace)).
		WatchesRawSource(keepQueue).
		WithOptions(opts).
		Complete(p)
	if err != nil {
		return err
	}
	keepCRDQueue := source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		p.setCRDQueue(q)
		return nil
	})
	return ctrl.NewControllerManagedBy(local).
		Named("member-crds").
		WatchesRawSource(keepCRDQueue).
		WithOptions(opts).
		Complete(reconcile.Func(p.keepMember))
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: a provider that shards members
// between replicas (a sharded Options.Replica) runs on each of them; otherwise only on the
// elected one.
func (p *Provider) NeedLeaderElection() bool { return !p.opts.Replica.Sharded() }

// Rebalance has every member's Secret reconciled again, so that the provider lets go of the
// members it no longer owns and connects the ones it now owns. Call it when the answers of
// Options.Replica.Owns may have changed (the peer replicas changed).
func (p *Provider) Rebalance(ctx context.Context) error {
	queue := p.secretQueue()
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
	p.disconnectAll()
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
	var errs []error
	for _, cl := range p.addIndex(index{obj: obj, field: field, extract: extract}) {
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
	if !p.opts.Replica.Owns(req.Name) {
		p.remove(req.Name, "Member handed over to another replica")
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: p.admit(secret)}, nil
}

// admit starts connecting with the Secret's kubeconfig, unless that very kubeconfig is
// connected, being connected, refused, or waiting to be tried again (then it returns how long
// until it may be).
func (p *Provider) admit(secret *corev1.Secret) time.Duration {
	name := secret.Name
	sum := sha256.Sum256(secret.Data[p.opts.Key])
	hash := hex.EncodeToString(sum[:])
	a := p.startAttempt(secret, hash)
	switch {
	case a.refused:
		p.log.Info("Kubeconfig refused", "cluster", name, "reason", a.reason, "message", a.message)
		p.notifyChanged(name)
	case a.cfg != nil:
		if a.changed {
			p.notifyChanged(name)
		}
		go p.connect(name, hash, a.cfg)
	}
	return a.retryIn
}

// admission is what startAttempt decided about a Secret's kubeconfig: connect with cfg (nil:
// do not), refused (with why), or nothing until retryIn, if ever.
type admission struct {
	cfg             *rest.Config
	changed         bool // the member's State changed, or the member is new
	refused         bool
	reason, message string // why it was refused
	retryIn         time.Duration
}

// startAttempt starts an attempt with the Secret's kubeconfig hash, unless next says to wait,
// or refuses the kubeconfig.
func (p *Provider) startAttempt(secret *corev1.Secret, hash string) admission {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.startAttemptLocked(secret, hash)
}

func (p *Provider) startAttemptLocked(secret *corev1.Secret, hash string) admission {
	m, ok := p.members[secret.Name]
	if !ok {
		m = newMember(secret.Namespace, secret.Name)
		if p.opts.InstallGuard {
			m.state.Guard = guardPending
		}
		p.members[secret.Name] = m
	}
	connect, retryIn := m.next(hash, time.Now())
	if !connect {
		return admission{retryIn: retryIn}
	}
	cfg, err := p.restConfig(secret, secret.Data[p.opts.Key])
	if err != nil {
		reason, message := classify(err)
		m.refuse(hash, reason, message)
		return admission{refused: true, reason: reason, message: message}
	}
	before := m.state
	m.startAttempt(hash)
	return admission{cfg: cfg, changed: !ok || m.state != before} // a new member is news, even in its initial state
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
	cfg.UserAgent = version.UserAgent(p.opts.Replica.ID) // audit logs name the hub, its version and replica
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

	now := time.Now()
	m, old, err := p.activate(name, hash, conn, err, now)
	if m == nil || err != nil {
		if conn != nil {
			conn.cancel()
		}
		if err != nil {
			log.Info("Connecting to member failed", "error", err.Error())
			p.failAttempt(name, hash, err)
		}
		return
	}
	recordAnswer(name, now)

	if err := p.aware.Engage(conn.ctx, multicluster.ClusterName(name), conn.cluster); err != nil {
		log.Error(err, "Engaging member failed")
		p.undoActivate(m, conn, old)
		conn.cancel()
		p.failAttempt(name, hash, err)
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
	p.enqueueCRDs(name)
	p.notifyChanged(name)
	p.notifyReady(name)
}

// activate makes conn, dialled at now for the attempt with hash, the member's active
// connection, and returns the member and the connection conn replaces. It returns no member if
// the attempt is no longer wanted (the member left, or its Secret moved on), and an error if
// dialling failed (dialErr) or the cluster is already another member.
func (p *Provider) activate(name, hash string, conn *connection, dialErr error, now time.Time) (*member, *connection, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.activateLocked(name, hash, conn, dialErr, now)
}

func (p *Provider) activateLocked(name, hash string, conn *connection, dialErr error, now time.Time) (*member, *connection, error) {
	m, ok := p.members[name]
	if !ok || !m.attempting(hash) {
		return nil, nil, nil
	}
	if dialErr == nil {
		dialErr = p.duplicateLocked(name, conn.clusterID)
	}
	if dialErr != nil {
		return m, nil, dialErr
	}
	return m, m.activate(conn, now), nil
}

// undoActivate makes old the member's active connection again, after the manager refused to
// engage conn.
func (p *Provider) undoActivate(m *member, conn, old *connection) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m.undoActivate(conn, old)
}

// failAttempt records a failed attempt, unless the member left or its Secret moved on
// meanwhile, and has the Secret reconciled again after the back-off. A member with a working
// connection keeps it.
func (p *Provider) failAttempt(name, hash string, err error) {
	reason, message := classify(err)
	var refused time.Time
	if cerr := (*connectError)(nil); errors.As(err, &cerr) {
		refused = cerr.expiry
	}
	retryIn, ok := p.backOff(name, hash, reason, message, refused)
	if !ok {
		return
	}
	p.notifyChanged(name)
	p.queue.AddAfter(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: p.opts.Namespace, Name: name}}, retryIn)
}

// backOff records the failure of the attempt with hash and returns the delay before the next
// one, or false if the attempt is no longer wanted.
func (p *Provider) backOff(name, hash, reason, message string, refusedExpiry time.Time) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.members[name]
	if !ok || !m.attempting(hash) {
		return 0, false
	}
	return m.failAttempt(hash, reason, message, refusedExpiry, time.Now(), p.opts.RetryMaxDelay), true
}

// remove disengages a member whose Secret is gone or unlabelled, or that another replica now
// manages, and logs why. Nothing in the member changes.
func (p *Provider) remove(name, why string) {
	active, duplicates, ok := p.deleteMember(name)
	if !ok {
		return
	}
	if active != nil {
		active.cancel()
	}
	forgetMemberMetrics(name)
	p.log.Info(why, "cluster", name)
	p.notifyChanged(name)
	// A member refused as a duplicate may be the cluster that just left: try it now, not after
	// its back-off.
	for _, d := range duplicates {
		p.queue.Add(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: p.opts.Namespace, Name: d}})
	}
}

// deleteMember forgets a member and returns its active connection, if any, and the members
// refused as duplicates, or false if there was no such member.
func (p *Provider) deleteMember(name string) (active *connection, duplicates []string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.members[name]
	if !ok {
		return nil, nil, false
	}
	delete(p.members, name)
	return m.active, p.duplicatesLocked(), true
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

// notifyChanged recounts the members gauge and calls the OnChange callbacks with name.
func (p *Provider) notifyChanged(name string) {
	fns := p.callbacks(&p.onChange)
	p.updateMetrics()
	for _, fn := range fns {
		fn(name)
	}
}

// notifyReady calls the OnReady callbacks with name.
func (p *Provider) notifyReady(name string) {
	for _, fn := range p.callbacks(&p.onReady) {
		fn(name)
	}
}

// callbacks returns a copy of the callbacks fns (onChange or onReady), to be called without mu.
func (p *Provider) callbacks(fns *[]func(name string)) []func(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(*fns)
}

// setQueue keeps the Secret controller's workqueue.
func (p *Provider) setQueue(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = q
}

// setCRDQueue keeps the member-crds controller's workqueue.
func (p *Provider) setCRDQueue(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.crdQueue = q
}

// crdsQueue returns the member-crds controller's workqueue, nil before the controller starts.
func (p *Provider) crdsQueue() workqueue.TypedRateLimitingInterface[reconcile.Request] {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.crdQueue
}

// secretQueue returns the Secret controller's workqueue, nil before the controller starts.
func (p *Provider) secretQueue() workqueue.TypedRateLimitingInterface[reconcile.Request] {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.queue
}

// disconnectAll ends every member's active connection.
func (p *Provider) disconnectAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.members {
		if m.active != nil {
			m.active.cancel()
		}
	}
}

// addIndex records an index for the members to come and returns the clusters of the members
// connected now, to index.
func (p *Provider) addIndex(i index) []cluster.Cluster {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.indexers = append(p.indexers, i)
	var clusters []cluster.Cluster
	for _, m := range p.members {
		if m.active != nil {
			clusters = append(clusters, m.active.cluster)
		}
	}
	return clusters
}

// indexes returns the indexes to set on a member's new cluster.
func (p *Provider) indexes() []index {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.indexers
}
