package hubmanager

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded"
	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded/peers"
	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded/sharder"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// Timings of sharded replicas that are not flags.
const (
	// decisionInterval is how often a replica decides which members it should run, tries to
	// take the Leases of those it does not hold yet (multicluster-runtime's "probe"), and looks
	// whether the live replicas changed. Each look is in memory; the peer Leases are listed
	// every refresh interval, and a dead replica is dropped when its Lease expires.
	decisionInterval = 250 * time.Millisecond
	// fenceThrottle spaces out failed attempts to take one member's Lease: a member whose
	// previous owner died is taken within this long of the Lease's expiry.
	fenceThrottle = 250 * time.Millisecond
)

// sharding shares the members between the replicas run with --sharded, with
// multicluster-runtime's sharded coordinator: each replica announces itself with a peer Lease;
// rendezvous hashing over the live replicas names the one that should run each member; that
// replica takes the member's Lease before it runs it, renews it while it does, and releases it
// when it should not run it any more. The provider connects only to the members hashed to this
// replica (owns), and the writes to a member leave the process only while this replica holds
// its Lease (fence).
type sharding struct {
	replica  string
	registry peers.Registry
	sharder  sharder.Sharder
	coord    *sharded.Coordinator
	provider *spokeprovider.Provider // set once the provider is built
	log      logr.Logger
}

func newSharding(cfg *rest.Config, scheme *runtime.Scheme, opts Options) (*sharding, error) {
	// The Leases are read and written directly: a stale cached read would lose a renewal.
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the client of the Leases: %w", err)
	}
	log := ctrl.Log.WithName("sharding").WithValues("replica", opts.ReplicaID)
	renew := opts.LeaseDuration / 3
	// The peer Leases are listed at least every second: a replica that left cleanly is noticed
	// within a second (a dead one when its Lease expires, whatever the refresh).
	refresh := min(renew, opts.ProbeInterval, time.Second)
	registry := peers.NewLeaseRegistry(direct, opts.SecretNamespace, hubv1alpha1.PeerLeasePrefix, opts.ReplicaID, 1, log,
		peers.WithLeaseTimings(opts.LeaseDuration, renew), peers.WithRefreshInterval(refresh))
	hrw := sharder.NewHRW()
	coord := sharded.New(direct, log,
		sharded.WithPeerRegistry(registry),
		sharded.WithSharder(hrw),
		sharded.WithShardLease(opts.SecretNamespace, hubv1alpha1.MemberLeasePrefix),
		sharded.WithPerClusterLease(true),
		sharded.WithLeaseTimings(opts.LeaseDuration, renew, fenceThrottle),
		sharded.WithSynchronizationIntervals(decisionInterval, opts.LeaseDuration),
	)
	return &sharding{replica: opts.ReplicaID, registry: registry, sharder: hrw, coord: coord, log: log}, nil
}

// owns reports whether rendezvous hashing over the live replicas names this one for the member.
// Before the first look at the peer Leases it owns nothing.
func (s *sharding) owns(name string) bool {
	live := s.registry.Snapshot()
	return len(live) > 0 && s.sharder.ShouldOwn(name, live, s.registry.Self())
}

// fence lets a write to a member leave only while this replica runs it and holds its Lease,
// renewed recently enough; the Lease is not released while the write is in flight.
func (s *sharding) fence(name string) (end func(), err error) {
	if end, ok := s.coord.BeginWrite(multicluster.ClusterName(name)); ok {
		return end, nil
	}
	return nil, fmt.Errorf("replica %s does not hold the Lease %s-%s (any more)", s.replica, hubv1alpha1.MemberLeasePrefix, name)
}

// Start has the provider take and let go of members whenever the live replicas change, until
// ctx ends.
func (s *sharding) Start(ctx context.Context) error {
	t := time.NewTicker(decisionInterval)
	defer t.Stop()
	var last string
	for {
		if live := s.live(); live != "" && live != last {
			if err := s.provider.Rebalance(ctx); err != nil {
				s.log.Error(err, "Rebalancing the members failed; trying again")
			} else {
				s.log.Info("Live replicas changed", "replicas", live)
				last = live
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica runs it.
func (s *sharding) NeedLeaderElection() bool { return false }

// live returns the ids of the live replicas, sorted and comma-separated; empty before the first
// look at the peer Leases.
func (s *sharding) live() string {
	return strings.Join(s.liveReplicas(), ",")
}

// liveReplicas returns the ids of the live replicas, sorted; none before the first look at the
// peer Leases, and none without sharding (s nil).
func (s *sharding) liveReplicas() []string {
	if s == nil {
		return nil
	}
	var ids []string
	for _, p := range s.registry.Snapshot() {
		ids = append(ids, p.ID)
	}
	slices.Sort(ids)
	return ids
}
