// Package hubmanager assembles the hub: the multicluster manager on the hub cluster, the
// kubeconfig-Secret provider, the ConfigBundle reconciler for every member, the health reports
// and FleetBundle placement. The hub binary runs it (its flags are Options.BindFlags), and so
// can a test that needs the hub in-process.
package hubmanager

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	goruntime "runtime"
	"slices"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/config"
	"configbundle.dev/hub/pkg/configbundle"
	"configbundle.dev/hub/pkg/fleet"
	"configbundle.dev/hub/pkg/placement"
	"configbundle.dev/hub/pkg/registration"
	"configbundle.dev/hub/pkg/rollout"
	"configbundle.dev/hub/pkg/sharding"
	"configbundle.dev/hub/pkg/sharding/election"
	"configbundle.dev/hub/pkg/tenancy"
	"configbundle.dev/hub/pkg/version"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// Defaults of Options that are not the provider's, the controllers' or sharding's own.
const (
	// DefaultMetricsBindAddress is the default of Options.MetricsBindAddress.
	DefaultMetricsBindAddress = ":8443"
	// DefaultHealthProbeBindAddress is the default of Options.HealthProbeBindAddress.
	DefaultHealthProbeBindAddress = ":8081"
	// DefaultInstallCRDs is the default of Options.InstallCRDs.
	DefaultInstallCRDs = true
)

// Options configure the hub. The zero value of every field means its default, which the
// field's comment gives and which is also the default of its command-line flag (BindFlags).
type Options struct {
	// SecretNamespace, SecretLabel and SecretKey locate the members' kubeconfigs. Default to
	// hubv1alpha1.DefaultSecretNamespace, DefaultSecretLabel and DefaultSecretKey.
	SecretNamespace, SecretLabel, SecretKey string
	// ResyncPeriod is the ConfigBundle reconciler's safety-net resync. Defaults to
	// configbundle.DefaultResyncPeriod (10 minutes).
	ResyncPeriod time.Duration
	// ProbeInterval is how often each member is probed. Defaults to
	// spokeprovider.DefaultProbeInterval (10 seconds).
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe. Defaults to the provider's default
	// (spokeprovider.DefaultProbeTimeout, 3 seconds, or ProbeInterval if shorter). No flag.
	ProbeTimeout time.Duration
	// MemberQPS and MemberBurst limit the hub's client of each member. Default to
	// spokeprovider.DefaultQPS (50) and spokeprovider.DefaultBurst (100).
	MemberQPS   float32
	MemberBurst int
	// InstallCRDs applies the ConfigBundle CRD to each member when it joins, and again whenever
	// a member's copy is changed or deleted. Defaults to DefaultInstallCRDs (true).
	InstallCRDs *bool
	// MetricsBindAddress and HealthProbeBindAddress serve metrics and health endpoints; "0"
	// disables one. Default to DefaultMetricsBindAddress (":8443") and
	// DefaultHealthProbeBindAddress (":8081").
	MetricsBindAddress, HealthProbeBindAddress string
	// PprofBindAddress serves Go's profiles (/debug/pprof/) over plain HTTP, with block and
	// mutex profiling on, to profile the hub at work: bind it to loopback, or reach it with
	// kubectl port-forward. Defaults to "" (off; "0" too): profiling costs a little on every
	// lock, and the profiles say much of the process.
	PprofBindAddress string
	// MetricsInsecure serves metrics over plain HTTP to anyone. Defaults to false: HTTPS (a
	// self-signed certificate unless MetricsCertDir holds tls.crt and tls.key), each request
	// authenticated (TokenReview) and authorized (SubjectAccessReview, get on the
	// non-resource URL /metrics) by the hub cluster's API server.
	MetricsInsecure bool
	// MetricsCertDir holds the metrics endpoint's serving certificate (tls.crt, tls.key), for
	// example a cert-manager Secret mounted in the pod. Defaults to none: self-signed.
	MetricsCertDir string
	// LeaderElect elects one active hub among replicas, whose writes to the members are fenced
	// by its Lease (election.Lock.Valid). Defaults to false. Exclusive with Sharded.
	LeaderElect bool
	// Sharded shares the members between the replicas run with it, each member reconciled by
	// exactly one live replica, fenced by its Lease; the hub-wide work (Fleet roll-up,
	// FleetBundle status) is done by one elected replica. Defaults to false. Exclusive with
	// LeaderElect.
	Sharded bool
	// ReplicaID is this replica's identity: it names its peer Lease, holds (as their
	// holderIdentity, exactly) the leader-election Lease and the Leases of the members it
	// manages, and is written to their MemberClusters' status.replica. Defaults to
	// sharding.DefaultReplicaID(): $POD_NAME, else the hostname (made a DNS-1123 name).
	ReplicaID string
	// LeaseDuration is the duration of the Leases of leader election and of sharded replicas
	// (each renewed every third of it: the election's, election.Of, and the sharded replicas'
	// peer and member Leases): a dead replica's work is taken over after about this long.
	// Defaults to sharding.DefaultLeaseDuration (15 seconds).
	LeaseDuration time.Duration
	// CredentialsExpiryWarning is how long before a member's credential expires its
	// CredentialsValid condition turns False (ExpiresSoon). Defaults to
	// fleet.DefaultCredentialsExpiryWarning (30 days).
	CredentialsExpiryWarning time.Duration
	// HeartbeatInterval is how often the Fleet's status.heartbeatTime is refreshed. Defaults to
	// fleet.DefaultHeartbeatInterval (10 seconds).
	HeartbeatInterval time.Duration
	// RetryBaseDelay and RetryMaxDelay tune the ConfigBundle reconciler's back-off (see
	// configbundle.Options). Default to configbundle.DefaultRetryBaseDelay (3 seconds) and
	// configbundle.DefaultRetryMaxDelay (1 minute). No flags.
	RetryBaseDelay, RetryMaxDelay time.Duration
}

// complete returns o with its defaults applied: the one place they are applied.
func (o Options) complete() Options {
	o.SecretNamespace = cmp.Or(o.SecretNamespace, hubv1alpha1.DefaultSecretNamespace)
	o.SecretLabel = cmp.Or(o.SecretLabel, hubv1alpha1.DefaultSecretLabel)
	o.SecretKey = cmp.Or(o.SecretKey, hubv1alpha1.DefaultSecretKey)
	o.ResyncPeriod = cmp.Or(o.ResyncPeriod, configbundle.DefaultResyncPeriod)
	o.ProbeInterval = cmp.Or(o.ProbeInterval, spokeprovider.DefaultProbeInterval)
	o.MemberQPS = cmp.Or(o.MemberQPS, spokeprovider.DefaultQPS)
	o.MemberBurst = cmp.Or(o.MemberBurst, spokeprovider.DefaultBurst)
	o.InstallCRDs = cmp.Or(o.InstallCRDs, ptr.To(DefaultInstallCRDs))
	o.MetricsBindAddress = cmp.Or(o.MetricsBindAddress, DefaultMetricsBindAddress)
	o.HealthProbeBindAddress = cmp.Or(o.HealthProbeBindAddress, DefaultHealthProbeBindAddress)
	o.CredentialsExpiryWarning = cmp.Or(o.CredentialsExpiryWarning, fleet.DefaultCredentialsExpiryWarning)
	o.HeartbeatInterval = cmp.Or(o.HeartbeatInterval, fleet.DefaultHeartbeatInterval)
	o.ReplicaID = cmp.Or(o.ReplicaID, sharding.DefaultReplicaID())
	o.LeaseDuration = cmp.Or(o.LeaseDuration, sharding.DefaultLeaseDuration)
	return o
}

// Validate reports options that cannot work together or a value the hub cannot use, as the
// flags name them.
func (o Options) Validate() error {
	o = o.complete()
	if o.Sharded && o.LeaderElect {
		return errors.New("--sharded and --leader-elect are mutually exclusive: sharded replicas share the members (and elect one of them for the hub-wide work), leader election makes one replica do everything; choose one")
	}
	// The replica's identity is checked unsharded too: it is written to status.replica.
	return o.shardingOptions().Validate()
}

// shardingOptions returns the options of this replica's sharding.
func (o Options) shardingOptions() sharding.Options {
	return sharding.Options{
		Namespace:     o.SecretNamespace,
		ReplicaID:     o.ReplicaID,
		LeaseDuration: o.LeaseDuration,
		// The peer Leases are listed as often as the members are probed, and at least every
		// second.
		PeerRefreshInterval: min(o.ProbeInterval, sharding.DefaultPeerRefreshInterval),
	}
}

// BindFlags defines the hub's command-line flags on fs, each bound to a field of o and
// defaulting to that field's default.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	d := Options{}.complete()
	*o = d
	fs.StringVar(&o.SecretNamespace, "secret-namespace", d.SecretNamespace, "Namespace of the hub cluster holding the members' kubeconfig Secrets.")
	fs.StringVar(&o.SecretLabel, "secret-label", d.SecretLabel, `Label that makes a Secret a member, with the value "true".`)
	fs.StringVar(&o.SecretKey, "secret-key", d.SecretKey, "Key of the Secret's data holding the kubeconfig.")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", d.ResyncPeriod, "How often every ConfigBundle is reconciled without an event, a safety net under the watches.")
	fs.DurationVar(&o.ProbeInterval, "probe-interval", d.ProbeInterval, "How often each member's API server is probed; two failed probes in a row make it Unreachable.")
	fs.Var((*float32Value)(&o.MemberQPS), "member-qps", "Requests per second the hub may send to each member (client-side limit; a bundle costs two writes).")
	fs.IntVar(&o.MemberBurst, "member-burst", d.MemberBurst, "Burst of requests the hub may send to each member.")
	o.InstallCRDs = ptr.To(*d.InstallCRDs)
	fs.BoolVar(o.InstallCRDs, "install-crds", *d.InstallCRDs, "Apply the ConfigBundle CRD to each member when it joins, and again whenever a member's copy is changed or deleted (server-side apply).")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", d.MetricsBindAddress, `Address of the Prometheus metrics endpoint; "0" disables it.`)
	fs.Var((*notBool)(&o.MetricsInsecure), "metrics-secure", "Serve metrics over HTTPS to clients the hub cluster's API server authenticates and authorizes (get on the non-resource URL /metrics); --metrics-secure=false serves plain HTTP to anyone.")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", d.MetricsCertDir, "Directory holding tls.crt and tls.key for the metrics endpoint (default: a self-signed certificate).")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", d.HealthProbeBindAddress, `Address of the /healthz and /readyz endpoints; "0" disables them.`)
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", d.PprofBindAddress, `Address of Go's profiles (/debug/pprof/, plain HTTP, block and mutex profiling on), such as 127.0.0.1:6060; "" or "0" (the default) disables them.`)
	fs.BoolVar(&o.LeaderElect, "leader-elect", d.LeaderElect, "Elect a leader among hub replicas (a Lease in --secret-namespace), so that only one reconciles. Exclusive with --sharded.")
	fs.BoolVar(&o.Sharded, "sharded", d.Sharded, "Share the members between the hub replicas run with it: each member is reconciled by exactly one live replica, fenced by a Lease in --secret-namespace. Exclusive with --leader-elect.")
	o.ReplicaID = ""
	fs.StringVar(&o.ReplicaID, "replica-id", "", "This replica's identity, unique among the replicas: names its Leases and shows in MemberCluster status.replica. A second process with the id of a live replica writes nothing and exits 1. (default $POD_NAME, else the hostname)")
	fs.DurationVar(&o.LeaseDuration, "lease-duration", d.LeaseDuration, "Duration of the Leases of --leader-elect and --sharded (each renewed every third of it): a dead replica's work is taken over after about this long.")
	fs.DurationVar(&o.CredentialsExpiryWarning, "credentials-expiry-warning", d.CredentialsExpiryWarning, "How long before a member's credential expires its MemberCluster's CredentialsValid condition turns False (ExpiresSoon).")
	fs.DurationVar(&o.HeartbeatInterval, "heartbeat-interval", d.HeartbeatInterval, "How often the hub refreshes Fleet status.heartbeatTime, which hub status --max-age checks (one write per interval).")
}

// notBool is a boolean flag that sets the negation of the bool it points at: --metrics-secure
// (default true) sets MetricsInsecure (default false, the zero value).
type notBool bool

func (b *notBool) String() string   { return strconv.FormatBool(!bool(*b)) }
func (b *notBool) IsBoolFlag() bool { return true }
func (b *notBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*b = notBool(!v)
	return nil
}

// float32Value is a flag.Value for a float32.
type float32Value float32

func (f *float32Value) String() string { return strconv.FormatFloat(float64(*f), 'g', -1, 32) }
func (f *float32Value) Set(s string) error {
	v, err := strconv.ParseFloat(s, 32)
	*f = float32Value(v)
	return err
}

// Hub is an assembled hub, ready to Start.
type Hub struct {
	Manager  mcmanager.Manager
	Provider *spokeprovider.Provider
}

// Scheme returns the scheme of the hub and its members' clients.
func Scheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, configbundlev1alpha1.AddToScheme, hubv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

// New assembles a hub that runs against the hub cluster of cfg.
func New(cfg *rest.Config, opts Options) (*Hub, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.complete()
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	cfg, hubDialer := hubConnection(cfg)
	// Every client of the hub cluster derives from cfg (the manager's, the Leases' of sharding
	// and of the election, the hub probe's): audit logs name the hub, its version and replica.
	cfg.UserAgent = version.UserAgent(opts.ReplicaID)
	replica := sharding.Replica{ID: opts.ReplicaID}
	if opts.Sharded {
		if replica, err = sharding.New(cfg, scheme, opts.shardingOptions()); err != nil {
			return nil, err
		}
	}
	lock, err := newElection(cfg, opts, hubDialer.CloseAll)
	if err != nil {
		return nil, err
	}
	if lock != nil {
		replica = replica.FencedBy(lock)
	}
	provider, err := newProvider(scheme, opts, replica)
	if err != nil {
		return nil, err
	}
	mgr, err := newManager(cfg, scheme, provider, opts, replica, lock)
	if err != nil {
		return nil, err
	}
	if err := addHubRunnables(mgr, cfg, opts, provider.Options().ProbeTimeout, lock, hubDialer.CloseAll); err != nil {
		return nil, err
	}
	if guard := replica.DuplicateGuard(mgr.GetLocalManager().GetEventRecorder(hubv1alpha1.FieldOwner), opts.LeaseDuration); guard != nil {
		if err := mgr.GetLocalManager().Add(guard); err != nil {
			return nil, err
		}
	}
	if replica.Sharded() {
		replica.ReportTo(mgr.GetLocalManager().GetEventRecorder(hubv1alpha1.FieldOwner))
		if err := mgr.GetLocalManager().Add(replica.Rebalancer(provider.Rebalance)); err != nil {
			return nil, err
		}
	}
	if err := setupControllers(mgr, provider, opts, replica); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return &Hub{Manager: mgr, Provider: provider}, nil
}

// addHubRunnables adds to mgr what keeps the hub connection: without --leader-elect, the hub
// probe that replaces dead hub connections; with it, the Lease's lock does (a request of the
// election that times out closes them), and it gets the recorder of its Events.
func addHubRunnables(mgr mcmanager.Manager, cfg *rest.Config, opts Options, probeTimeout time.Duration, lock *election.Lock, closeConns func()) error {
	if lock == nil {
		probe, err := newHubProbe(cfg, opts.ProbeInterval, probeTimeout, closeConns, ctrl.Log.WithName("hub-probe"))
		if err != nil {
			return err
		}
		return mgr.GetLocalManager().Add(probe)
	}
	lock.SetEventRecorder(mgr.GetLocalManager().GetEventRecorderFor(lock.Identity())) //nolint:staticcheck // resourcelock records core Events
	return nil
}

// setupControllers sets up the provider's Secret controller, the ConfigBundle reconciler, the
// health reports and FleetBundle placement on mgr.
func setupControllers(mgr mcmanager.Manager, provider *spokeprovider.Provider, opts Options, replica sharding.Replica) error {
	if err := provider.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the provider: %w", err)
	}
	// A member that becomes Ready (on join or after an outage) has all its bundles reconciled.
	reconciler, err := configbundle.SetupWithManager(mgr, configbundle.Options{
		ResyncPeriod:      opts.ResyncPeriod,
		RetryBaseDelay:    opts.RetryBaseDelay,
		RetryMaxDelay:     opts.RetryMaxDelay,
		Connected:         provider.Connected,
		NotConnectedRetry: provider.Options().ProbeInterval,
		ResyncOn:          provider.OnReady,
		Replica:           replica,
		HubSources:        placement.HubSources(mgr.GetLocalManager().GetClient(), mgr.GetLocalManager().GetAPIReader()),
	})
	if err != nil {
		return err
	}
	// The tokens `hub register` wrote are renewed by the replica that manages their member.
	renewer := registration.NewRenewer(mgr.GetLocalManager().GetClient(), opts.SecretKey, version.UserAgent(opts.ReplicaID), replica)
	if err := renewer.SetupWithManager(mgr.GetLocalManager(), opts.SecretNamespace, opts.SecretLabel, !replica.Sharded()); err != nil {
		return err
	}
	if err := fleet.SetupWithManager(mgr, provider, opts.SecretNamespace, fleet.Options{
		CredentialsExpiryWarning: opts.CredentialsExpiryWarning,
		Renewal:                  renewer.State,
		HeartbeatInterval:        opts.HeartbeatInterval,
		Unreported:               unreported(reconciler),
		Sync:                     reconciler.Sync,
		Replica:                  replica,
	}); err != nil {
		return err
	}
	if err := tenancy.SetupWithManager(mgr.GetLocalManager(), replica); err != nil {
		return err
	}
	return placement.SetupWithManager(mgr, provider, placement.Options{
		NotConnectedRetry: provider.Options().ProbeInterval,
		Replica:           replica,
	})
}

// unreported adapts the reconciler's bundles whose outcome could not be written to the reports.
func unreported(r *configbundle.Reconciler) func(string) map[types.NamespacedName]metav1.Condition {
	return func(member string) map[types.NamespacedName]metav1.Condition {
		out := map[types.NamespacedName]metav1.Condition{}
		for _, u := range r.Unreported(multicluster.ClusterName(member)) {
			out[u.Bundle] = u.Ready
		}
		return out
	}
}

func newProvider(scheme *runtime.Scheme, opts Options, replica sharding.Replica) (*spokeprovider.Provider, error) {
	memberCRDs, err := config.MemberCRDs()
	if err != nil {
		return nil, err
	}
	rights, err := memberRights()
	if err != nil {
		return nil, err
	}
	return spokeprovider.New(spokeprovider.Options{
		Replica:       replica,
		Namespace:     opts.SecretNamespace,
		Label:         opts.SecretLabel,
		Key:           opts.SecretKey,
		ProbeInterval: opts.ProbeInterval,
		ProbeTimeout:  opts.ProbeTimeout,
		QPS:           opts.MemberQPS,
		Burst:         opts.MemberBurst,
		CRDs:          memberCRDs,
		InstallCRDs:   *opts.InstallCRDs,
		InstallGuard:  true,
		Rights:        rights,
		WarmTypes:     []client.Object{&configbundlev1alpha1.ConfigBundle{}, &corev1.ConfigMap{}},
		ClusterOptions: []cluster.Option{func(o *cluster.Options) {
			o.Scheme = scheme
			configbundle.ConfigureCache(&o.Cache)
		}},
	}), nil
}

// memberRights are the rights the hub's credential must have in every member, which the
// provider checks when connecting and at every probe: those of the ClusterRole `hub register`
// grants (config.MemberClusterRole, the reconciler's and the provider's RBAC markers), but for
// its CRD rule, which only keeping the CRD needs: a member where that is refused is not
// Forbidden but says so (CRDMissing where its CRD is missing, a note in its Ready message where
// the hub may not watch or restore it); and but for its admission policies' rule, which only
// keeping them needs: a member where that is refused is Guarded=False (GuardFailed); but for
// creating namespaces, which only a FleetBundle with spec.createNamespace needs: a member where
// that is refused reports it for that FleetBundle (PlacementFailed); and but for its workloads'
// rule (apps), which only rollouts that observe or restart workloads need: a member registered
// before it keeps connecting, and fails such rollouts (WorkloadUnhealthy).
func memberRights() ([]authorizationv1.ResourceAttributes, error) {
	role, err := config.MemberClusterRole()
	if err != nil {
		return nil, err
	}
	rules := slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.APIGroups, apiextensionsv1.GroupName) || slices.Contains(r.APIGroups, admissionregistrationv1.GroupName) ||
			slices.Equal(r.Resources, []string{"namespaces"}) && slices.Equal(r.Verbs, []string{"create"}) ||
			slices.Contains(r.APIGroups, appsv1.GroupName)
	})
	return spokeprovider.RightsOf(rules), nil
}

// metricsOptions serves metrics over HTTPS with authentication and authorization through the
// hub cluster's API server, as kubebuilder projects do, unless MetricsInsecure.
func metricsOptions(opts Options) metricsserver.Options {
	if opts.MetricsInsecure {
		return metricsserver.Options{BindAddress: opts.MetricsBindAddress}
	}
	return metricsserver.Options{
		BindAddress:    opts.MetricsBindAddress,
		SecureServing:  true,
		CertDir:        opts.MetricsCertDir,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
	}
}

// newElection returns the lock of the leader-election Lease with --leader-elect; nothing
// otherwise (sharded replicas elect the one that does the hub-wide work with a fence of their
// coordinator, bound to its peer Lease: sharding.Replica.Leading). A request of the election
// that times out calls closeConns.
func newElection(cfg *rest.Config, opts Options, closeConns func()) (*election.Lock, error) {
	if !opts.LeaderElect {
		return nil, nil
	}
	timings := election.Of(opts.LeaseDuration)
	// The Lease is held as the replica id itself, as the sharded replicas' Leases are: its holder
	// names the pod (--replica-id defaults to $POD_NAME), unique among the live replicas.
	return election.NewLock(cfg, opts.SecretNamespace, hubv1alpha1.LeaderElectionID, opts.ReplicaID, timings, closeConns)
}

func newManager(cfg *rest.Config, scheme *runtime.Scheme, provider *spokeprovider.Provider, opts Options, replica sharding.Replica, lock *election.Lock) (mcmanager.Manager, error) {
	cacheOpts := cache.Options{}
	provider.SecretCacheOptions(&cacheOpts)
	rollout.RevisionCacheOptions(&cacheOpts)
	rollout.SourceCacheOptions(&cacheOpts)
	rollout.SecretCacheOptions(&cacheOpts)
	// The manager elects a leader with --leader-elect only, through lock: sharded replicas
	// elect the one that does the hub-wide work with a fence of their coordinator (newElection),
	// whose loss must not end the manager as a lost election of controller-runtime does.
	timings := election.Of(opts.LeaseDuration)
	if opts.PprofBindAddress != "" && opts.PprofBindAddress != "0" {
		// Sample every blocking event and mutex contention while the profiles are served.
		goruntime.SetBlockProfileRate(1)
		goruntime.SetMutexProfileFraction(1)
	}
	mgr, err := mcmanager.New(cfg, provider, manager.Options{
		Scheme:                              scheme,
		Cache:                               cacheOpts,
		Metrics:                             metricsOptions(opts),
		HealthProbeBindAddress:              opts.HealthProbeBindAddress,
		PprofBindAddress:                    opts.PprofBindAddress,
		LeaderElection:                      opts.LeaderElect,
		LeaderElectionID:                    hubv1alpha1.LeaderElectionID,
		LeaderElectionNamespace:             opts.SecretNamespace,
		LeaderElectionResourceLockInterface: lock,
		LeaderElectionReleaseOnCancel:       true,
		LeaseDuration:                       ptr.To(timings.LeaseDuration),
		RenewDeadline:                       ptr.To(timings.RenewDeadline),
		RetryPeriod:                         ptr.To(timings.RetryPeriod),
	}, replica.ManagerOptions()...)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	return mgr, nil
}

// Start runs the hub until ctx ends. It first checks that the hub cluster serves the hub's
// CRDs (CheckCRDs): without them it returns at once an error wrapping ErrNoHubCRDs, where the
// controllers would wait for caches that never sync.
func (h *Hub) Start(ctx context.Context) error {
	if err := CheckCRDs(h.Manager.GetLocalManager().GetRESTMapper()); err != nil {
		return err
	}
	return h.Manager.Start(ctx)
}
