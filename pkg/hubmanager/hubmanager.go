// Package hubmanager assembles the hub: the multicluster manager on the hub cluster, the
// kubeconfig-Secret provider, the ConfigBundle reconciler for every member, the health reports
// and FleetBundle placement. The hub binary runs it (its flags are Options.BindFlags), and so
// can a test that needs the hub in-process.
package hubmanager

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/config"
	"configbundle.dev/hub/pkg/configbundle"
	"configbundle.dev/hub/pkg/fleet"
	"configbundle.dev/hub/pkg/placement"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// Defaults of Options that are not the provider's or the reconciler's own.
const (
	DefaultResyncPeriod           = 10 * time.Minute
	DefaultMetricsBindAddress     = ":8080"
	DefaultHealthProbeBindAddress = ":8081"
)

// Options configure the hub. The zero value of every field means its default, which the
// field's comment gives and which is also the default of its command-line flag (BindFlags).
type Options struct {
	// SecretNamespace, SecretLabel and SecretKey locate the members' kubeconfigs. Default to
	// hubv1alpha1.DefaultSecretNamespace, DefaultSecretLabel and DefaultSecretKey.
	SecretNamespace, SecretLabel, SecretKey string
	// ResyncPeriod is the ConfigBundle reconciler's safety-net resync. Defaults to 10 minutes.
	ResyncPeriod time.Duration
	// ProbeInterval is how often each member is probed. Defaults to 10 seconds.
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe. Defaults to the provider's default (3 seconds, or
	// ProbeInterval if shorter). No flag.
	ProbeTimeout time.Duration
	// MemberQPS and MemberBurst limit the hub's client of each member. Default to 50 and 100.
	MemberQPS   float32
	MemberBurst int
	// InstallCRDs applies the ConfigBundle CRD to each member when it joins. Defaults to true.
	InstallCRDs *bool
	// MetricsBindAddress and HealthProbeBindAddress serve metrics and health endpoints; "0"
	// disables one. Default to ":8080" and ":8081".
	MetricsBindAddress, HealthProbeBindAddress string
	// LeaderElect elects one active hub among replicas. Defaults to false.
	LeaderElect bool
	// CredentialsExpiryWarning is how long before a member's credential expires its
	// CredentialsValid condition turns False (ExpiresSoon). Defaults to 30 days.
	CredentialsExpiryWarning time.Duration
	// HeartbeatInterval is how often the Fleet's status.heartbeatTime is refreshed. Defaults to
	// 10 seconds.
	HeartbeatInterval time.Duration
	// RetryBaseDelay and RetryMaxDelay tune the ConfigBundle reconciler's back-off (see
	// configbundle.Options). Default to 3 seconds and 1 minute. No flags.
	RetryBaseDelay, RetryMaxDelay time.Duration
}

// complete returns o with its defaults applied: the one place they are applied.
func (o Options) complete() Options {
	o.SecretNamespace = cmp.Or(o.SecretNamespace, hubv1alpha1.DefaultSecretNamespace)
	o.SecretLabel = cmp.Or(o.SecretLabel, hubv1alpha1.DefaultSecretLabel)
	o.SecretKey = cmp.Or(o.SecretKey, hubv1alpha1.DefaultSecretKey)
	o.ResyncPeriod = cmp.Or(o.ResyncPeriod, DefaultResyncPeriod)
	o.ProbeInterval = cmp.Or(o.ProbeInterval, spokeprovider.DefaultProbeInterval)
	o.MemberQPS = cmp.Or(o.MemberQPS, spokeprovider.DefaultQPS)
	o.MemberBurst = cmp.Or(o.MemberBurst, spokeprovider.DefaultBurst)
	o.InstallCRDs = cmp.Or(o.InstallCRDs, ptr.To(true))
	o.MetricsBindAddress = cmp.Or(o.MetricsBindAddress, DefaultMetricsBindAddress)
	o.HealthProbeBindAddress = cmp.Or(o.HealthProbeBindAddress, DefaultHealthProbeBindAddress)
	o.CredentialsExpiryWarning = cmp.Or(o.CredentialsExpiryWarning, fleet.DefaultCredentialsExpiryWarning)
	o.HeartbeatInterval = cmp.Or(o.HeartbeatInterval, fleet.DefaultHeartbeatInterval)
	return o
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
	fs.BoolVar(o.InstallCRDs, "install-crds", *d.InstallCRDs, "Apply the ConfigBundle CRD to each member when it joins (server-side apply).")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", d.MetricsBindAddress, `Address of the Prometheus metrics endpoint; "0" disables it.`)
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", d.HealthProbeBindAddress, `Address of the /healthz and /readyz endpoints; "0" disables them.`)
	fs.BoolVar(&o.LeaderElect, "leader-elect", d.LeaderElect, "Elect a leader among hub replicas (a Lease in --secret-namespace), so that only one reconciles.")
	fs.DurationVar(&o.CredentialsExpiryWarning, "credentials-expiry-warning", d.CredentialsExpiryWarning, "How long before a member's credential expires its MemberCluster's CredentialsValid condition turns False (ExpiresSoon).")
	fs.DurationVar(&o.HeartbeatInterval, "heartbeat-interval", d.HeartbeatInterval, "How often the hub refreshes Fleet status.heartbeatTime, which hub status --max-age checks (one write per interval).")
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
	opts = opts.complete()
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	provider, err := newProvider(scheme, opts)
	if err != nil {
		return nil, err
	}
	mgr, err := newManager(cfg, scheme, provider, opts)
	if err != nil {
		return nil, err
	}
	if err := provider.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the provider: %w", err)
	}
	// A member that becomes Ready (on join or after an outage) has all its bundles reconciled.
	reconciler, err := configbundle.SetupWithManager(mgr, configbundle.Options{
		ResyncPeriod:      opts.ResyncPeriod,
		RetryBaseDelay:    opts.RetryBaseDelay,
		RetryMaxDelay:     opts.RetryMaxDelay,
		Connected:         provider.Connected,
		NotConnectedRetry: provider.Options().ProbeInterval,
		ResyncOn:          provider.OnReady,
	})
	if err != nil {
		return nil, err
	}
	if err := fleet.SetupWithManager(mgr, provider, opts.SecretNamespace, fleet.Options{
		CredentialsExpiryWarning: opts.CredentialsExpiryWarning,
		HeartbeatInterval:        opts.HeartbeatInterval,
		Unreported:               unreported(reconciler),
	}); err != nil {
		return nil, err
	}
	if err := placement.SetupWithManager(mgr, provider, placement.Options{
		NotConnectedRetry: provider.Options().ProbeInterval,
	}); err != nil {
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

func newProvider(scheme *runtime.Scheme, opts Options) (*spokeprovider.Provider, error) {
	memberCRDs, err := config.MemberCRDs()
	if err != nil {
		return nil, err
	}
	return spokeprovider.New(spokeprovider.Options{
		Namespace:     opts.SecretNamespace,
		Label:         opts.SecretLabel,
		Key:           opts.SecretKey,
		ProbeInterval: opts.ProbeInterval,
		ProbeTimeout:  opts.ProbeTimeout,
		QPS:           opts.MemberQPS,
		Burst:         opts.MemberBurst,
		CRDs:          memberCRDs,
		InstallCRDs:   *opts.InstallCRDs,
		WarmTypes:     []client.Object{&configbundlev1alpha1.ConfigBundle{}, &corev1.ConfigMap{}},
		ClusterOptions: []cluster.Option{func(o *cluster.Options) {
			o.Scheme = scheme
			configbundle.ConfigureCache(&o.Cache)
		}},
	}), nil
}

func newManager(cfg *rest.Config, scheme *runtime.Scheme, provider *spokeprovider.Provider, opts Options) (mcmanager.Manager, error) {
	cacheOpts := cache.Options{}
	provider.SecretCacheOptions(&cacheOpts)
	mgr, err := mcmanager.New(cfg, provider, manager.Options{
		Scheme:                        scheme,
		Cache:                         cacheOpts,
		Metrics:                       metricsserver.Options{BindAddress: opts.MetricsBindAddress},
		HealthProbeBindAddress:        opts.HealthProbeBindAddress,
		LeaderElection:                opts.LeaderElect,
		LeaderElectionID:              hubv1alpha1.LeaderElectionID,
		LeaderElectionNamespace:       opts.SecretNamespace,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	return mgr, nil
}

// Start runs the hub until ctx ends.
func (h *Hub) Start(ctx context.Context) error {
	return h.Manager.Start(ctx)
}
