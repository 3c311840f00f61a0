// Package hubrun assembles the hub: the multicluster manager on the hub cluster, the
// kubeconfig-Secret provider, the ConfigBundle reconciler for every member and the health
// reports. The hub binary, the embedded demo and the end-to-end tests all run it from here.
package hubrun

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientfeatures "k8s.io/client-go/features"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"configbundle.dev/hub/config"
	"configbundle.dev/hub/pkg/configbundle"
	"configbundle.dev/hub/pkg/configbundle/api/v1alpha1"
	"configbundle.dev/hub/pkg/fleet"
	hubv1alpha1 "configbundle.dev/hub/pkg/fleet/api/v1alpha1"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// Defaults of the hub's flags.
const (
	DefaultSecretNamespace = spokeprovider.DefaultNamespace
	DefaultSecretLabel     = spokeprovider.DefaultLabel
	DefaultSecretKey       = spokeprovider.DefaultKey
	DefaultResyncPeriod    = 10 * time.Minute
	DefaultProbeInterval   = spokeprovider.DefaultProbeInterval
)

// Options configure the hub. The zero value of a field means its default, but for the bind
// addresses, where "" and "0" both disable the endpoint.
type Options struct {
	// SecretNamespace, SecretLabel and SecretKey locate the members' kubeconfigs.
	SecretNamespace, SecretLabel, SecretKey string
	// ResyncPeriod is the ConfigBundle reconciler's safety-net resync. Defaults to 10 minutes.
	ResyncPeriod time.Duration
	// ProbeInterval is how often each member is probed. Defaults to 10 seconds.
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe. Defaults to spokeprovider's default.
	ProbeTimeout time.Duration
	// MemberQPS and MemberBurst limit the hub's client of each member. Default to 50 and 100.
	MemberQPS   float32
	MemberBurst int
	// InstallCRDs applies the ConfigBundle CRD to each member when it joins.
	InstallCRDs bool
	// MetricsBindAddress and HealthProbeBindAddress serve metrics and health endpoints.
	MetricsBindAddress, HealthProbeBindAddress string
	// LeaderElect elects one active hub among replicas.
	LeaderElect bool
	// RetryBaseDelay and RetryMaxDelay tune the ConfigBundle reconciler's back-off (see
	// configbundle.Options). Default to 3 seconds and 1 minute.
	RetryBaseDelay, RetryMaxDelay time.Duration
}

// Hub is an assembled hub, ready to Start.
type Hub struct {
	Manager  mcmanager.Manager
	Provider *spokeprovider.Provider
}

// Scheme returns the scheme of the hub and its members' clients.
func Scheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, hubv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

// New assembles a hub that runs against the hub cluster of cfg.
func New(cfg *rest.Config, opts Options) (*Hub, error) {
	// client-go's streaming lists (WatchListClient, on by default since 1.35) wait for the API
	// server's watch cache to be provably fresh: measured, every cache of a joining member then
	// took 1.1 s to sync instead of milliseconds. A member's lists are small; joining fast matters.
	if gates, ok := clientfeatures.FeatureGates().(interface {
		Set(clientfeatures.Feature, bool) error
	}); ok {
		if err := gates.Set(clientfeatures.WatchListClient, false); err != nil {
			return nil, fmt.Errorf("turning off client-go's WatchListClient: %w", err)
		}
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	memberCRDs, err := config.MemberCRDs()
	if err != nil {
		return nil, err
	}
	provider := spokeprovider.New(spokeprovider.Options{
		Namespace:     opts.SecretNamespace,
		Label:         opts.SecretLabel,
		Key:           opts.SecretKey,
		ProbeInterval: opts.ProbeInterval,
		ProbeTimeout:  opts.ProbeTimeout,
		QPS:           opts.MemberQPS,
		Burst:         opts.MemberBurst,
		CRDs:          memberCRDs,
		InstallCRDs:   opts.InstallCRDs,
		WarmTypes:     []client.Object{&v1alpha1.ConfigBundle{}, &corev1.ConfigMap{}},
		ClusterOptions: []cluster.Option{func(o *cluster.Options) {
			o.Scheme = scheme
			configbundle.ConfigureCache(&o.Cache)
		}},
	})
	secretNamespace := provider.Options().Namespace

	cacheOpts := cache.Options{}
	provider.SecretCacheOptions(&cacheOpts)
	mgr, err := mcmanager.New(cfg, provider, manager.Options{
		Scheme:                        scheme,
		Cache:                         cacheOpts,
		Metrics:                       metricsserver.Options{BindAddress: disabled(opts.MetricsBindAddress)},
		HealthProbeBindAddress:        disabled(opts.HealthProbeBindAddress),
		LeaderElection:                opts.LeaderElect,
		LeaderElectionID:              "configbundle-hub",
		LeaderElectionNamespace:       secretNamespace,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := provider.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the provider: %w", err)
	}

	// A member that becomes Ready (on join or after an outage) has all its bundles reconciled.
	resync := make(chan multicluster.ClusterName)
	provider.OnReady(func(name string) {
		go func() { resync <- multicluster.ClusterName(name) }()
	})
	if _, err := configbundle.SetupWithManager(mgr, configbundle.Options{
		ResyncPeriod:      opts.ResyncPeriod,
		RetryBaseDelay:    opts.RetryBaseDelay,
		RetryMaxDelay:     opts.RetryMaxDelay,
		Connected:         provider.Connected,
		NotConnectedRetry: provider.Options().ProbeInterval,
		Resync:            resync,
	}); err != nil {
		return nil, err
	}
	if err := fleet.SetupWithManager(mgr, provider, secretNamespace, fleet.Options{}); err != nil {
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

// Start runs the hub until ctx ends.
func (h *Hub) Start(ctx context.Context) error {
	return h.Manager.Start(ctx)
}

func disabled(addr string) string {
	if addr == "" {
		return "0"
	}
	return addr
}
