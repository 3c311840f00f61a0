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
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	hubv1alpha1 "configbundle.dev/hub/pkg/fleet/api/v1alpha1"
)

// Defaults of Options.
const (
	DefaultNamespace        = "configbundle-system"
	DefaultLabel            = "sigs.k8s.io/multicluster-runtime-kubeconfig"
	DefaultKey              = "kubeconfig"
	DefaultProbeInterval    = 10 * time.Second
	DefaultProbeTimeout     = 3 * time.Second
	DefaultFailureThreshold = 2
	DefaultConnectTimeout   = 30 * time.Second
	DefaultQPS              = 50
	DefaultBurst            = 100
	DefaultRequestTimeout   = 10 * time.Second
	DefaultFieldOwner       = "configbundle-hub"
)

// ErrNotConnected is returned (wrapped) by Connected for a member that is not Ready.
var ErrNotConnected = errors.New("member cluster not connected")

// Options configure the Provider. Each field documents its default.
type Options struct {
	// Namespace is the hub namespace holding the kubeconfig Secrets. Defaults to
	// DefaultNamespace.
	Namespace string

	// Label is the label that makes a Secret a member, with the value "true". Defaults to
	// DefaultLabel, the convention of multicluster-runtime's kubeconfig provider.
	Label string

	// Key is the Secret data key holding the kubeconfig. Defaults to DefaultKey.
	Key string

	// ProbeInterval is how often each member is probed. Defaults to 10 seconds.
	ProbeInterval time.Duration

	// ProbeTimeout bounds one probe. Defaults to 3 seconds, or ProbeInterval if that is shorter.
	ProbeTimeout time.Duration

	// FailureThreshold is the number of consecutive failed probes after which a member is
	// Unreachable. Defaults to 2.
	FailureThreshold int

	// ConnectTimeout bounds a connection attempt: reaching the member, checking its identity,
	// installing CRDs and warming the caches. Defaults to 30 seconds.
	ConnectTimeout time.Duration

	// RetryMaxDelay caps the delay before a failed connection is tried again (it starts at 2
	// seconds and doubles). Defaults to 1 minute.
	RetryMaxDelay time.Duration

	// QPS and Burst limit each member client (a bundle costs two writes). Default to 50 and 100.
	QPS   float32
	Burst int

	// RequestTimeout bounds each request of a member client other than watches. Defaults to
	// 10 seconds.
	RequestTimeout time.Duration

	// CRDs are the CRDs a member must serve.
	CRDs []*apiextensionsv1.CustomResourceDefinition

	// InstallCRDs applies CRDs to each member on join (server-side apply). Where that is
	// forbidden and a CRD is absent, the member is not Ready (CRDMissing). Defaults to false.
	InstallCRDs bool

	// WarmTypes are the kinds whose informers are started and synced before a member is
	// engaged, so that no reconcile waits for a cold cache.
	WarmTypes []client.Object

	// ClusterOptions configure each member's cluster.Cluster (scheme, cache options).
	ClusterOptions []cluster.Option

	// FieldOwner is the field manager of the CRDs the provider applies. Defaults to
	// DefaultFieldOwner.
	FieldOwner string
}

func (o *Options) defaults() {
	o.Namespace = cmpOr(o.Namespace, DefaultNamespace)
	o.Label = cmpOr(o.Label, DefaultLabel)
	o.Key = cmpOr(o.Key, DefaultKey)
	o.ProbeInterval = cmpOr(o.ProbeInterval, DefaultProbeInterval)
	o.ProbeTimeout = cmpOr(o.ProbeTimeout, min(DefaultProbeTimeout, o.ProbeInterval))
	o.FailureThreshold = cmpOr(o.FailureThreshold, DefaultFailureThreshold)
	o.ConnectTimeout = cmpOr(o.ConnectTimeout, DefaultConnectTimeout)
	o.RetryMaxDelay = cmpOr(o.RetryMaxDelay, time.Minute)
	o.QPS = cmpOr(o.QPS, DefaultQPS)
	o.Burst = cmpOr(o.Burst, DefaultBurst)
	o.RequestTimeout = cmpOr(o.RequestTimeout, DefaultRequestTimeout)
	o.FieldOwner = cmpOr(o.FieldOwner, DefaultFieldOwner)
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// State is what the provider knows of one member.
type State struct {
	// Ready is true while the member is connected and answers its probes.
	Ready bool
	// Reason and Message explain Ready, with the reasons of the hub API
	// (hubv1alpha1.ConnectedReason, UnreachableReason, ...).
	Reason, Message string
	// KubernetesVersion is the member's gitVersion.
	KubernetesVersion string
	// ClusterID is the uid of the member's kube-system namespace.
	ClusterID string
	// LastSeen is when the member last answered.
	LastSeen time.Time
	// SecretNamespace and SecretName name the member's kubeconfig Secret.
	SecretNamespace, SecretName string
}

// Provider discovers members from kubeconfig Secrets and connects to them.
type Provider struct {
	opts Options
	log  logr.Logger
	hub  client.Client

	started chan struct{} // closed by Start
	ctx     context.Context
	aware   multicluster.Aware

	retries chan event.GenericEvent // Secrets to reconcile again after a failed attempt

	mu        sync.Mutex
	members   map[string]*member
	indexers  []index
	onChange  []func(name string)
	onReady   []func(name string)
	metricsMu sync.Mutex
}

type member struct {
	state    State
	active   *connection
	pending  string    // hash of the kubeconfig being connected
	failed   string    // hash of the kubeconfig that last failed
	retryAt  time.Time // when failed may be tried again; zero: never (refused input)
	backoff  time.Duration
	failures int // consecutive failed probes
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
		retries: make(chan event.GenericEvent, 64),
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
	return ctrl.NewControllerManagedBy(mgr.GetLocalManager()).
		Named("kubeconfig-secrets").
		For(&corev1.Secret{}, builder.WithPredicates(inNamespace)).
		WatchesRawSource(source.Channel(p.retries, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(p)
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
// and on recovery. fn must not block.
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
		p.remove(req.Name)
		return ctrl.Result{}, nil
	}
	return p.admit(secret), nil
}

// admit starts connecting with the Secret's kubeconfig, unless that very kubeconfig is
// connected, being connected, refused, or waiting to be tried again.
func (p *Provider) admit(secret *corev1.Secret) ctrl.Result {
	name, data := secret.Name, secret.Data[p.opts.Key]
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])

	p.mu.Lock()
	m, ok := p.members[name]
	if !ok {
		m = &member{state: State{Reason: hubv1alpha1.ConnectingReason, Message: "Connecting to the member"}}
		p.members[name] = m
	}
	m.state.SecretNamespace, m.state.SecretName = secret.Namespace, secret.Name
	switch {
	case m.active != nil && m.active.hash == hash, m.pending == hash:
		p.mu.Unlock()
		return ctrl.Result{}
	case m.failed == hash && m.retryAt.IsZero():
		p.mu.Unlock()
		return ctrl.Result{}
	case m.failed == hash && time.Now().Before(m.retryAt):
		wait := time.Until(m.retryAt)
		p.mu.Unlock()
		return ctrl.Result{RequeueAfter: wait}
	}
	p.mu.Unlock()

	cfg, err := p.restConfig(secret, data)
	if err != nil {
		reason, message := classify(err)
		p.log.Info("Kubeconfig refused", "cluster", name, "reason", reason, "message", message)
		p.failed(name, hash, err, false)
		return ctrl.Result{}
	}
	p.mu.Lock()
	m.pending = hash
	p.mu.Unlock()
	p.changed(name)
	go p.connect(name, hash, cfg)
	return ctrl.Result{}
}

func (p *Provider) restConfig(secret *corev1.Secret, data []byte) (*rest.Config, error) {
	if len(data) == 0 {
		return nil, &KubeconfigError{Reason: ReasonInvalidKubeconfig,
			Message: fmt.Sprintf("Secret %s/%s has no kubeconfig under the key %q", secret.Namespace, secret.Name, p.opts.Key)}
	}
	cfg, err := RESTConfigFromKubeconfig(data)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = p.opts.QPS, p.opts.Burst
	cfg.UserAgent = "configbundle-hub"
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
	if !ok || m.pending != hash { // superseded by a newer kubeconfig, or the member left
		p.mu.Unlock()
		if conn != nil {
			conn.cancel()
		}
		return
	}
	m.pending = ""
	if err == nil {
		err = p.duplicateLocked(name, conn.clusterID)
	}
	if err != nil {
		p.mu.Unlock()
		if conn != nil {
			conn.cancel()
		}
		log.Info("Connecting to member failed", "error", err.Error())
		p.failed(name, hash, err, true)
		return
	}
	old := m.active
	m.active, m.failed, m.backoff, m.failures = conn, "", 0, 0
	m.state = State{
		Ready: true, Reason: hubv1alpha1.ConnectedReason, Message: "Connected; reconciling its ConfigBundles",
		KubernetesVersion: conn.version, ClusterID: conn.clusterID, LastSeen: time.Now(),
		SecretNamespace: m.state.SecretNamespace, SecretName: m.state.SecretName,
	}
	p.mu.Unlock()

	if err := p.aware.Engage(conn.ctx, multicluster.ClusterName(name), conn.cluster); err != nil {
		log.Error(err, "Engaging member failed")
		p.mu.Lock()
		if m.active == conn {
			m.active = old
		}
		p.mu.Unlock()
		conn.cancel()
		p.failed(name, hash, err, true)
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

// failed records a failed kubeconfig. Refused input waits for the Secret to change; a failed
// connection is tried again with back-off. A member with a working connection keeps it.
func (p *Provider) failed(name, hash string, err error, retry bool) {
	reason, message := classify(err)
	p.mu.Lock()
	m, ok := p.members[name]
	if !ok {
		p.mu.Unlock()
		return
	}
	m.failed, m.retryAt = hash, time.Time{}
	if retry {
		m.backoff = min(max(2*m.backoff, 2*time.Second), p.opts.RetryMaxDelay)
		m.retryAt = time.Now().Add(m.backoff)
	}
	if m.active != nil {
		m.state.Reason = hubv1alpha1.RotationFailedReason
		m.state.Message = "The Secret's new kubeconfig failed (" + reason + ": " + message + "); still connected with the previous one"
	} else {
		m.state.Ready, m.state.Reason, m.state.Message = false, reason, message
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.state.SecretNamespace, Name: m.state.SecretName}}
	p.mu.Unlock()
	p.changed(name)
	if retry {
		go func() {
			select {
			case p.retries <- event.GenericEvent{Object: secret}:
			case <-p.ctx.Done():
			}
		}()
	}
}

// remove disengages a member whose Secret is gone or unlabelled. Nothing in the member changes.
func (p *Provider) remove(name string) {
	p.mu.Lock()
	m, ok := p.members[name]
	delete(p.members, name)
	p.mu.Unlock()
	if !ok {
		return
	}
	if m.active != nil {
		m.active.cancel()
	}
	p.log.Info("Member left", "cluster", name)
	p.changed(name)
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

// probe checks a member every ProbeInterval until its connection ends.
func (p *Provider) probe(name string, conn *connection) {
	ticker := time.NewTicker(p.opts.ProbeInterval)
	defer ticker.Stop()
	for {
		select {
		case <-conn.ctx.Done():
			return
		case <-ticker.C:
		}
		ctx, cancel := context.WithTimeout(conn.ctx, p.opts.ProbeTimeout)
		version, err := conn.serverVersion(ctx)
		cancel()
		if conn.ctx.Err() != nil {
			return
		}
		p.observe(name, conn, version, err)
	}
}

// observe records a probe's result.
func (p *Provider) observe(name string, conn *connection, version string, err error) {
	p.mu.Lock()
	m, ok := p.members[name]
	if !ok || m.active != conn {
		p.mu.Unlock()
		return
	}
	changed, recovered := false, false
	if err != nil {
		m.failures++
		if m.failures >= p.opts.FailureThreshold && m.state.Ready {
			m.state.Ready, m.state.Reason = false, hubv1alpha1.UnreachableReason
			m.state.Message = fmt.Sprintf("%d consecutive health probes failed; last: %v", m.failures, err)
			changed = true
			p.log.Info("Member unreachable", "cluster", name, "error", err.Error())
		}
	} else {
		m.failures = 0
		m.state.LastSeen = time.Now()
		if version != m.state.KubernetesVersion {
			m.state.KubernetesVersion, changed = version, true
		}
		if !m.state.Ready {
			m.state.Ready, m.state.Reason, m.state.Message = true, hubv1alpha1.ConnectedReason, "Connected; reconciling its ConfigBundles"
			changed, recovered = true, true
			p.log.Info("Member reachable again", "cluster", name)
		}
	}
	p.mu.Unlock()
	if changed {
		p.changed(name)
	}
	if recovered {
		p.ready(name)
	}
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
