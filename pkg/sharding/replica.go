package sharding

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/sharding/coordinator"
	"configbundle.dev/hub/pkg/sharding/election"
	"configbundle.dev/hub/pkg/sharding/peers"
	"configbundle.dev/hub/pkg/sharding/sharder"
	"configbundle.dev/hub/pkg/version"
)

// Replica is this hub replica, as the controllers and the provider see it: its identity and,
// if New made it, which members it owns and the fence of its writes to them. Any other Replica
// (the zero value, or one with only an ID) is not sharded: it owns every member, fences no
// write (but with the leader's Lease, FencedBy), and its controllers wait for leader election
// when the manager has it.
type Replica struct {
	// ID is the replica's identity (--replica-id): it is written to the status.replica of the
	// MemberClusters it manages and keys its share of a FleetBundle's status.
	ID string

	shards *shards // nil: not sharded
	// lease is the leader's Lease (--leader-elect, FencedBy), which fences every write to the
	// members; nil: none.
	lease *election.Lock
}

// FencedBy returns r whose writes to the members leave only while lease is Valid: the leader
// of --leader-elect stops writing the moment it can no longer be sure it holds its Lease.
func (r Replica) FencedBy(lease *election.Lock) Replica {
	r.lease = lease
	return r
}

// Leading reports whether this replica may do the hub-wide work now: sharded, whether it holds
// the election fence (hubv1alpha1.LeaderElectionID) in the current epoch of its valid peer
// Lease; otherwise always, since the manager's leader election, if any, starts that work only
// on the leader.
func (r Replica) Leading() bool {
	return r.shards == nil || r.shards.coord.Leading()
}

// OnElected calls fn each time this sharded replica is elected for the hub-wide work, and at
// once if it is elected already, to resynchronise that work; unless sharded, never.
func (r Replica) OnElected(fn func()) {
	if r.shards != nil {
		r.shards.coord.OnElected(fn)
	}
}

// ErrDuplicateReplica is what the manager of a sharded replica ends with, wrapped, when another
// live process holds the peer Lease of its replica id: it wrote nothing to any member, reported
// it (a log line, the gauge configbundle_hub_duplicate_replica, the Event DuplicateReplica on the
// Fleet), and stopped a lease duration later. The process that holds the Lease runs on.
var ErrDuplicateReplica = peers.ErrDuplicateID

// shards is a sharded replica's view of its peers and its members' Leases.
type shards struct {
	registry   peers.Registry
	sharder    sharder.Sharder
	coord      *coordinator.Coordinator
	log        logr.Logger
	duplicates *duplicateReport
}

// New returns a sharded Replica that holds its Leases on the hub cluster of cfg; scheme is the
// scheme of its client of the Leases. Its Leases are taken and renewed once the manager it is
// given to (ManagerOptions) starts.
func New(cfg *rest.Config, scheme *runtime.Scheme, opts Options) (Replica, error) {
	if err := opts.Validate(); err != nil {
		return Replica{}, err
	}
	opts = opts.complete()
	// The Leases are read and written directly: a stale cached read would lose a renewal. Each
	// request is bounded by half the renew period, so that one hung on a dead connection to the
	// hub cluster does not hold up the next renewal.
	renew := opts.LeaseDuration / 3
	leases := rest.CopyConfig(cfg)
	leases.Timeout = renew / 2
	leases.UserAgent = version.UserAgent(opts.ReplicaID)
	direct, err := client.New(leases, client.Options{Scheme: scheme})
	if err != nil {
		return Replica{}, fmt.Errorf("creating the client of the Leases: %w", err)
	}
	log := ctrl.Log.WithName("sharding").WithValues("replica", opts.ReplicaID)
	refresh := min(renew, opts.PeerRefreshInterval)
	duplicates := &duplicateReport{log: log, id: opts.ReplicaID, lease: &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: opts.Namespace, Name: hubv1alpha1.PeerLeasePrefix + "-" + opts.ReplicaID}}}
	registry := peers.NewLeaseRegistry(direct, opts.Namespace, hubv1alpha1.PeerLeasePrefix, opts.ReplicaID, 1, log,
		peers.WithLeaseTimings(opts.LeaseDuration, renew), peers.WithRefreshInterval(refresh),
		peers.WithDuplicateHandler(duplicates.report))
	hrw := sharder.NewHRW()
	coord := coordinator.New(direct, log,
		coordinator.WithPeerRegistry(registry),
		coordinator.WithSharder(hrw),
		coordinator.WithShardLease(opts.Namespace, hubv1alpha1.MemberLeasePrefix),
		coordinator.WithPerClusterLease(true),
		coordinator.WithLeaseTimings(opts.LeaseDuration, renew, fenceThrottle),
		coordinator.WithSynchronizationIntervals(decisionInterval, opts.LeaseDuration),
		coordinator.WithElection(hubv1alpha1.LeaderElectionID),
	)
	return Replica{ID: opts.ReplicaID, shards: &shards{registry: registry, sharder: hrw, coord: coord, log: log, duplicates: duplicates}}, nil
}

// ReportTo records this replica's Events with recorder: DuplicateReplica on the Fleet when
// another live process holds the peer Lease of its replica id. Unless sharded, it does nothing.
func (r Replica) ReportTo(recorder events.EventRecorder) {
	if r.shards != nil {
		r.shards.duplicates.setRecorder(recorder)
	}
}

// Sharded reports whether the members are shared between replicas: then the per-member work
// runs on every replica, each for the members it owns, and the hub-wide work on the elected one.
func (r Replica) Sharded() bool { return r.shards != nil }

// Owns reports whether this replica manages the member: always, unless sharded; sharded,
// whether rendezvous hashing over the live replicas names this one for the member. Before the
// first look at the peer Leases a sharded replica owns nothing.
func (r Replica) Owns(member string) bool {
	if r.shards == nil {
		return true
	}
	live := r.shards.registry.Snapshot()
	return len(live) > 0 && r.shards.sharder.ShouldOwn(member, live, r.shards.registry.Self())
}

// Fence lets a write to a member leave only while this replica runs it and holds its Lease,
// renewed recently enough: it returns an error if not, otherwise end, to call once the write
// has been answered; the Lease is not released while the write is in flight. Unsharded, every
// write may leave, but with the leader's Lease (FencedBy) only while it is Valid.
func (r Replica) Fence(member string) (end func(), err error) {
	if r.shards == nil {
		if r.lease != nil && !r.lease.Valid() {
			return nil, fmt.Errorf("replica %s is not sure it holds the Lease %s (any more)", r.ID, r.lease.Describe())
		}
		return func() {}, nil
	}
	if end, ok := r.shards.coord.BeginWrite(multicluster.ClusterName(member)); ok {
		return end, nil
	}
	return nil, fmt.Errorf("replica %s does not hold the Lease %s-%s (any more)", r.ID, hubv1alpha1.MemberLeasePrefix, member)
}

// WriteDeadline is when a write to a member that Fence lets leave now must have been answered,
// so that it never lands once another replica may write: sharded, the end of this replica's
// validity (its peer Lease's last renewal plus the lease duration less one renew period); with
// the leader's Lease (FencedBy), the end of the lease its last renewal began; zero (no
// deadline) otherwise.
func (r Replica) WriteDeadline() time.Time {
	switch {
	case r.shards != nil:
		return r.shards.coord.WriteDeadline()
	case r.lease != nil:
		return r.lease.WriteDeadline()
	}
	return time.Time{}
}

// MayWrite reports whether a write to the member would leave now (Fence), without starting one.
func (r Replica) MayWrite(member string) bool {
	end, err := r.Fence(member)
	if err != nil {
		return false
	}
	end()
	return true
}

// Fenced reports whether Fence may refuse a write: sharded, or with the leader's Lease.
func (r Replica) Fenced() bool { return r.shards != nil || r.lease != nil }

// LiveReplicas returns the ids of the live replicas, sorted; none before the first look at the
// peer Leases, and none unless sharded.
func (r Replica) LiveReplicas() []string {
	if r.shards == nil {
		return nil
	}
	var ids []string
	for _, p := range r.shards.registry.Snapshot() {
		ids = append(ids, p.ID)
	}
	slices.Sort(ids)
	return ids
}

// ManagerOptions are the options of the multicluster manager that the replica needs: with
// sharding, the sharded coordinator, which engages a member's controllers only while this
// replica holds the member's Lease; none unless sharded.
func (r Replica) ManagerOptions() []mcmanager.Option {
	if r.shards == nil {
		return nil
	}
	return []mcmanager.Option{mcmanager.WithCoordinator(r.shards.coord)}
}

// Rebalancer returns a runnable, for every replica, that calls rebalance whenever the live
// replicas change (the provider's Rebalance: it lets go of the members this replica no longer
// owns and connects the ones it now owns), until its context ends. Unless sharded, the live
// replicas never change: it only waits.
func (r Replica) Rebalancer(rebalance func(context.Context) error) manager.Runnable {
	return &rebalancer{replica: r, rebalance: rebalance}
}

// rebalancer is the runnable of Replica.Rebalancer.
type rebalancer struct {
	replica   Replica
	rebalance func(context.Context) error
}

// Start calls rebalance whenever the live replicas change, until ctx ends.
func (b *rebalancer) Start(ctx context.Context) error {
	t := time.NewTicker(decisionInterval)
	defer t.Stop()
	var last string
	for {
		if live := strings.Join(b.replica.LiveReplicas(), ","); live != "" && live != last {
			if err := b.rebalance(ctx); err != nil {
				b.replica.shards.log.Error(err, "Rebalancing the members failed; trying again")
			} else {
				b.replica.shards.log.Info("Live replicas changed", "replicas", live)
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
func (b *rebalancer) NeedLeaderElection() bool { return false }
