package suite

import (
	"context"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	clustersprovider "sigs.k8s.io/multicluster-runtime/providers/clusters"

	"configbundle.dev/hub/config"
	"configbundle.dev/hub/internal/testing/controlplane"
)

// Hub is the hub side of an in-process suite: a multicluster manager on the first control
// plane, over multicluster-runtime's clusters provider with every other plane added as a member
// cluster of its name. The suite sets its controllers up on Manager, then calls Start.
type Hub struct {
	// Manager runs on the hub plane, with its metrics and probe servers off.
	Manager mcmanager.Manager
	// Provider holds the member clusters.
	Provider *clustersprovider.Provider
	// Clusters are the member clusters the provider holds, by name.
	Clusters map[string]cluster.Cluster
	// Clients are uncached clients of the members, by name.
	Clients map[string]client.Client
}

// NewHub builds the Hub of cps (the hub first, then the members) with scheme; configureCache,
// if set, configures each member cluster's cache as the hub's provider would.
func NewHub(ctx context.Context, cps []*controlplane.ControlPlane, scheme *runtime.Scheme, configureCache func(*cache.Options)) (*Hub, error) {
	h := &Hub{Provider: clustersprovider.New(), Clusters: map[string]cluster.Cluster{}, Clients: map[string]client.Client{}}
	for _, cp := range cps[1:] {
		cl, err := cluster.New(cp.Config, func(o *cluster.Options) {
			o.Scheme = scheme
			if configureCache != nil {
				configureCache(&o.Cache)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", cp.Name, err)
		}
		if err := h.Provider.Add(ctx, multicluster.ClusterName(cp.Name), cl); err != nil {
			return nil, fmt.Errorf("member %s: %w", cp.Name, err)
		}
		h.Clusters[cp.Name] = cl
		if h.Clients[cp.Name], err = client.New(cp.Config, client.Options{Scheme: scheme}); err != nil {
			return nil, fmt.Errorf("member %s: %w", cp.Name, err)
		}
	}
	var err error
	h.Manager, err = mcmanager.New(cps[0].Config, h.Provider, manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, fmt.Errorf("the hub's manager: %w", err)
	}
	return h, nil
}

// Start runs the manager in the background until ctx ends (Run ends ctx before it stops the
// control planes).
func (h *Hub) Start(ctx context.Context) {
	go func() {
		if err := h.Manager.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "the hub's manager stopped:", err)
		}
	}()
}

// HubAndMembers are the planes of a suite of the hub and its members: "hub" serving the hub's
// CRDs, and each of members serving the member CRDs.
func HubAndMembers(members ...string) ([]controlplane.Plane, error) {
	hubCRDs, err := config.HubCRDs()
	if err != nil {
		return nil, fmt.Errorf("reading the hub CRDs: %w", err)
	}
	memberCRDs, err := config.MemberCRDs()
	if err != nil {
		return nil, fmt.Errorf("reading the member CRDs: %w", err)
	}
	planes := []controlplane.Plane{{Name: "hub", Options: controlplane.Options{CRDs: hubCRDs}}}
	return append(planes, controlplane.Named(controlplane.Options{CRDs: memberCRDs}, members...)...), nil
}
