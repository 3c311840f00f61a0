/*
Copyright 2025 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	"sigs.k8s.io/multicluster-runtime/pkg/util/sanitize"

	"configbundle.dev/hub/pkg/sharding/peers"
	"configbundle.dev/hub/pkg/sharding/sharder"
)

// Config holds the knobs for shard synchronization and fencing.
//
// Fencing (a cluster's fence is valid while its holder's peer Lease is):
//   - FenceNS/FencePrefix: namespace and name prefix for per-shard Lease objects
//     (e.g. mcr-shard-<cluster> when PerClusterLease is true).
//   - PerClusterLease: when true, use one Lease per cluster (recommended). When false,
//     use a single shared fence name for all clusters.
//   - LeaseDuration / LeaseRenew: how long a hand-over waits at most for the writes in flight,
//     and the renew cadence of the peer Leases, on which the fences rest (a fence is valid
//     while its holder's peer Lease is; give the registry the same timings, as
//     peers.WithLeaseTimings). Every Lease request is bounded by half of LeaseRenew.
//   - FenceThrottle: backoff before retrying failed fence acquisition, to reduce API churn.
//
// Peers (membership):
//   - PeerPrefix: prefix used by the peer registry for membership Leases.
//   - PeerWeight: relative capacity hint used by the sharder (0 treated as 1).
//
// Cadence:
//   - Probe: periodic synchronization tick interval (decision loop).
//   - Rehash: optional slower cadence for planned redistribution (unused in basic HRW).
type Config struct {
	// FenceNS is the namespace where fence Leases live (usually "kube-system").
	FenceNS string
	// FencePrefix is the base Lease name for fences; with PerClusterLease it becomes
	// FencePrefix+"-"+<cluster> (e.g., "mcr-shard-zoo").
	FencePrefix string
	// PerClusterLease controls whether we create one fence per cluster (true) or a
	// single shared fence name (false). Per-cluster is recommended.
	PerClusterLease bool
	// LeaseDuration bounds a hand-over: a cluster's fence is released once the writes in flight
	// have ended, or this long after it was stopped.
	LeaseDuration time.Duration
	// LeaseRenew is the peer Lease's renewal cadence; every Lease request of the coordinator is
	// bounded by half of it, so that a slow or black-holed API server delays no decision.
	LeaseRenew time.Duration
	// FenceThrottle backs off repeated failed takes of a fence to reduce API churn.
	FenceThrottle time.Duration

	// PeerPrefix is the Lease name prefix used by the peer registry for membership.
	PeerPrefix string
	// PeerWeight is this peer’s capacity hint for HRW (0 treated as 1).
	PeerWeight uint32

	// Probe is the synchronization decision loop interval.
	Probe time.Duration
	// Rehash is an optional slower cadence for planned redistribution (currently unused).
	Rehash time.Duration

	// ElectionName names the election fence (WithElection); empty: no election.
	ElectionName string
}

// Option mutates a sharded Coordinator before use.
type Option func(*Coordinator)

// Coordinator makes synchronization decisions and starts/stops per-cluster work.
//
// It combines:
//   - a peerRegistry (live peer snapshot),
//   - a sharder (e.g., HRW) to decide "who should own",
//   - a per-cluster leaseGuard to fence "who actually runs".
//
// The coordinator keeps per-cluster engagement state, ties watches/workers to an
// engagement context, and uses the fence to guarantee single-writer semantics.
type Coordinator struct {
	// kube is the host cluster client used for Leases and provider operations.
	kube client.Client
	// log is the coordinator’s logger.
	log logr.Logger
	// sharder decides “shouldOwn” given clusterID, peers, and self (e.g., HRW).
	sharder sharder.Sharder
	// peers provides a live membership snapshot for sharding decisions.
	peers peers.Registry
	// self is this process’s identity/weight as known by the peer registry.
	self sharder.PeerInfo
	// cfg holds all synchronization/fencing configuration.
	cfg Config

	// mu guards engaged, fences, stopping, elected and the fields of the fences it says. It is
	// never held across an API call: a slow hub must not hold up the decisions of every cluster.
	mu sync.Mutex
	// engaged tracks per-cluster engagement state keyed by cluster name.
	engaged map[multicluster.ClusterName]*engagement
	// fences are the clusters' fences, engaged or not: a fence outlives its engagement until it
	// is released, so that a take that ends after the cluster went away, or a release that
	// failed, is released at a later decision.
	fences map[multicluster.ClusterName]*leaseGuard
	// stopping is set when the coordinator stops: nothing starts or is taken any more.
	stopping bool
	// awares are the multicluster components to (de)start per cluster; set before Start.
	awares []multicluster.Aware

	// releasing counts the fence releases under way, which a clean stop waits for.
	releasing sync.WaitGroup
	// calls bounds the Lease requests in flight at once (maxLeaseCalls).
	calls chan struct{}
	// elected elects one peer among all (WithElection); nil: none.
	elected *election
}

// election is the fence that elects one peer for work that only one may do (WithElection). It
// is sticky: its holder keeps it while its peer Lease is valid, so it costs no write either.
type election struct {
	fence *leaseGuard
	// holder is who held the fence at the last try, and readAt when it was read: while that
	// peer is live, the fence is read again only every renew period, not at every decision.
	holder string
	readAt time.Time
	// onElected are called, each in a goroutine of its own, whenever this peer takes the fence.
	onElected []func()
}

// pendingRetry is how soon a fence read naming a dead holder is tried again, once a list that
// started after the read was asked for (peers.Registry.RefreshSoon).
const pendingRetry = 20 * time.Millisecond

// maxLeaseCalls bounds the fence requests (takes and releases) in flight at once: after a
// replica dies, its peers take its clusters over in parallel, but never flood the API server.
const maxLeaseCalls = 16

// engagement tracks per-cluster lifecycle within the coordinator.
type engagement struct {
	// name is the cluster identifier (e.g., namespace).
	name multicluster.ClusterName
	// cl is the controller-runtime cluster handle for this engagement.
	cl cluster.Cluster
	// parent is the context the cluster was engaged with: it ends when the cluster goes away,
	// and every start of the cluster's work derives from it.
	parent context.Context
	// ctx is the engagement context; cancelling it stops sources/work.
	ctx context.Context
	// cancel cancels ctx.
	cancel context.CancelFunc
	// started is true after awares have been engaged for this cluster.
	started bool
	// writes tracks the writes begun since the cluster started (nil while stopped).
	writes *writeGate
	// fence is the cluster's fence, c.fences[name].
	fence *leaseGuard
}

// New returns a sharded Coordinator with defaults; options apply overrides.
func New(kube client.Client, log logr.Logger, opts ...Option) *Coordinator {
	c := &Coordinator{
		kube:    kube,
		log:     log,
		cfg:     defaultConfig(),
		sharder: sharder.NewHRW(),
		engaged: make(map[multicluster.ClusterName]*engagement),
		fences:  make(map[multicluster.ClusterName]*leaseGuard),
		calls:   make(chan struct{}, maxLeaseCalls),
	}

	for _, o := range opts {
		o(c)
	}

	// Default peer registry if not injected.
	if c.peers == nil {
		c.peers = peers.NewLeaseRegistry(kube, c.cfg.FenceNS, c.cfg.PeerPrefix, "", c.cfg.PeerWeight, log)
	}

	c.self = c.peers.Self()
	if c.cfg.ElectionName != "" {
		fence := newLeaseGuard(kube, c.cfg.FenceNS, c.cfg.ElectionName, c.self.ID)
		// Its holder reads it every renew period (confirmElection): a missing one is created a
		// lease duration (three renew periods) after it was first found missing, once its
		// holder has certainly found it missing too, in a read that began after it went, and
		// stopped leading.
		fence.createAfter = func(since time.Time) time.Time { return c.createAfter(since, since.Add(c.cfg.LeaseDuration)) }
		c.elected = &election{fence: fence}
	}
	return c
}

func defaultConfig() Config {
	return Config{
		FenceNS: "kube-system", FencePrefix: "mcr-shard", PerClusterLease: true,
		LeaseDuration: 20 * time.Second, LeaseRenew: 10 * time.Second, FenceThrottle: 750 * time.Millisecond,
		PeerPrefix: "mcr-peer", PeerWeight: 1,
		Probe: 5 * time.Second, Rehash: 15 * time.Second,
	}
}

func (c *Coordinator) fenceName(cluster string) string {
	if c.cfg.PerClusterLease {
		return fmt.Sprintf("%s-%s", c.cfg.FencePrefix, sanitize.DNS1123(cluster))
	}
	return c.cfg.FencePrefix
}

// everyReplica is a Runnable that runs whether or not this process is the elected leader: a
// sharded coordinator is how replicas share work, it must run on each of them.
type everyReplica func(ctx context.Context) error

func (r everyReplica) Start(ctx context.Context) error { return r(ctx) }

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (r everyReplica) NeedLeaderElection() bool { return false }

// writeGate tracks the writes begun under one start of a cluster, so that its fence is
// released only once they have ended: the next owner cannot write while one is in flight.
type writeGate struct {
	mu       sync.Mutex
	closed   bool
	inflight int
	drained  chan struct{} // closed once closed and no write is in flight
}

func newWriteGate() *writeGate { return &writeGate{drained: make(chan struct{})} }

// begin counts a write in flight, unless the gate is closed.
func (g *writeGate) begin() (end func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, false
	}
	g.inflight++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.inflight--; g.closed && g.inflight == 0 {
			close(g.drained)
		}
	}, true
}

// shut lets no write begin any more; the writes in flight go on.
func (g *writeGate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.closed = true
		if g.inflight == 0 {
			close(g.drained)
		}
	}
}

// wait waits, at most timeout, for the writes in flight of a shut gate.
func (g *writeGate) wait(timeout time.Duration) {
	select {
	case <-g.drained:
	case <-time.After(timeout):
	}
}

// BeginWrite reports whether this peer may write to the cluster now: the cluster is engaged
// and started here, its fence was taken in the current epoch of this peer's peer Lease, and
// that Lease is valid (peers.Registry.Validity). If so, the write is in flight until end is
// called, and the fence is not released before (for at most a lease duration). Call it right
// before each write to the cluster, and end right after: a peer that was paused or cut off past
// its Lease sees at once that it must not write, before it notices that another peer took
// over; and a peer handing a cluster over releases its fence only after its last write.
func (c *Coordinator) BeginWrite(name multicluster.ClusterName) (end func(), ok bool) {
	c.mu.Lock()
	var gate *writeGate
	var fence *leaseGuard
	if e := c.engaged[name]; e != nil && e.started {
		gate, fence = e.writes, e.fence
	}
	c.mu.Unlock()
	epoch, _, valid := c.peers.Validity()
	if gate == nil || !valid || !fence.heldIn(epoch) {
		return nil, false
	}
	// A gate shut meanwhile refuses; one shut after this is waited for by the release.
	return gate.begin()
}

// Leading reports whether this peer is elected (WithElection) and may act on it now: its
// election fence was taken in the current epoch and its peer Lease is valid.
func (c *Coordinator) Leading() bool {
	if c.elected == nil {
		return false
	}
	epoch, _, valid := c.peers.Validity()
	return valid && c.elected.fence.heldIn(epoch)
}

// OnElected calls fn, in a goroutine of its own, each time this peer is elected (WithElection),
// and at once if it leads already.
func (c *Coordinator) OnElected(fn func()) {
	if c.elected == nil {
		return
	}
	c.mu.Lock()
	c.elected.onElected = append(c.elected.onElected, fn)
	c.mu.Unlock()
	if c.Leading() {
		go fn()
	}
}

// campaign tries to take the election fence in epoch, unless it is held already or a try is
// under way, and calls the onElected callbacks if it took it. Call with c.mu held.
func (c *Coordinator) campaign(epoch uint64, now time.Time) {
	e := c.elected
	if e == nil || e.fence.busy || now.Before(e.fence.nextTry) {
		return
	}
	if e.fence.heldIn(epoch) {
		if now.Sub(e.readAt) >= c.cfg.LeaseRenew {
			e.fence.busy = true
			go c.confirmElection(e)
		}
		return
	}
	if e.holder != "" && !c.peers.Dead(e.holder, time.Time{}) && now.Sub(e.readAt) < c.cfg.LeaseRenew {
		return // held by a live peer: nothing to read yet
	}
	e.fence.busy = true
	go func() {
		var ok bool
		var holder string
		var err error
		c.call(func(ctx context.Context) { ok, holder, err = e.fence.take(ctx, epoch, c.peers.Dead) })
		c.mu.Lock()
		defer c.mu.Unlock()
		e.fence.busy = false
		e.holder, e.readAt = holder, time.Now()
		if !ok {
			c.retryLater(e.fence)
			if errors.Is(err, errUnsettled) {
				e.fence.nextTry = later(e.fence.nextTry, e.fence.creatableAt())
			}
			if err != nil {
				c.log.V(1).Info("taking the election fence failed; will retry", "peer", c.self.ID, "err", err)
			}
			return
		}
		c.log.Info("elected", "peer", c.self.ID, "lease", e.fence.nm)
		for _, fn := range e.onElected {
			go fn()
		}
	}()
}

// confirmElection reads the election fence this peer holds, as campaign does once a renew
// period: if it is gone (deleted by hand) or names another peer, this peer stops leading at
// once, before another may create it again (its createAfter).
func (c *Coordinator) confirmElection(e *election) {
	var held bool
	var err error
	c.call(func(ctx context.Context) { held, err = e.fence.confirm(ctx) })
	c.mu.Lock()
	defer c.mu.Unlock()
	e.fence.busy = false
	e.readAt = time.Now()
	if err != nil {
		c.log.V(1).Info("reading the election fence failed; will retry", "peer", c.self.ID, "err", err)
	}
	if !held {
		e.holder = ""
		c.log.Info("election fence gone or taken: no longer elected", "peer", c.self.ID, "lease", e.fence.nm)
	}
}

// WriteDeadline is when a write that BeginWrite lets leave now must have been answered: the
// end of this peer's validity, after which another peer may take its clusters over; now, if it
// is not valid.
func (c *Coordinator) WriteDeadline() time.Time {
	if _, until, valid := c.peers.Validity(); valid {
		return until
	}
	return time.Now()
}

// settledAt is when this peer's view of the live peers, as it is now, will have been settled for
// a lease duration and a renew period (peers.Registry.Stable): a cluster's missing fence may be
// created from then on. Any peer that ran the cluster under an earlier view has seen this one
// within a renew period, stopped the cluster, and its writes in flight, each bounded by its
// validity, have ended. Zero while this peer has no view.
func (c *Coordinator) settledAt() time.Time {
	since := c.peers.Stable()
	if since.IsZero() {
		return since
	}
	return since.Add(c.cfg.LeaseDuration + c.cfg.LeaseRenew)
}

// createAfter is from when a fence first found missing at since may be created: at once if a
// list of the peers that started since shows no other live peer (any peer that could hold it
// would show: it took it before it went missing), otherwise at otherwise. Zero until such a
// list is made, which it asks for.
func (c *Coordinator) createAfter(since, otherwise time.Time) time.Time {
	switch alone, known := c.peers.Alone(since); {
	case alone:
		return since
	case !known:
		c.peers.RefreshSoon()
		return time.Time{}
	}
	return otherwise
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// call runs fn, a fence request, bounded by half a renew period and by maxLeaseCalls requests
// in flight at once.
func (c *Coordinator) call(fn func(ctx context.Context)) {
	c.calls <- struct{}{}
	defer func() { <-c.calls }()
	ctx, cancel := context.WithTimeout(context.Background(), c.requestTimeout())
	defer cancel()
	fn(ctx)
}

// requestTimeout bounds each Lease request: half a renew period.
func (c *Coordinator) requestTimeout() time.Duration { return c.cfg.LeaseRenew / 2 }

// stop stops the engagement's work: no write begins any more, and the next release of its
// fence waits for the writes in flight. Call with c.mu held; it returns the cancel to call
// once c.mu is released.
func (c *Coordinator) stop(e *engagement) context.CancelFunc {
	cancel := e.cancel
	if e.writes != nil {
		e.writes.shut()
		e.fence.gates = append(e.fence.gates, e.writes)
	}
	e.cancel, e.started, e.writes = nil, false, nil
	if cancel == nil {
		return func() {}
	}
	return cancel
}

// release releases a fence in the background: it is no longer held for any write from now on,
// and its Lease is cleared once the writes begun under it have ended, or a lease duration has
// passed (a write that hangs must not pin the Lease). Call with c.mu held and the fence not
// busy; it is busy until the release has ended, and released again at a later decision if
// this one failed. While this peer's Lease is not valid it does nothing: a fence names only our
// peer ID, and a process started with the same ID may have taken our peer Lease over once we
// lapsed, and the fence with it; a later decision releases it, or the others take it once they
// judge us dead.
func (c *Coordinator) release(fence *leaseGuard) {
	if _, _, valid := c.peers.Validity(); !valid {
		return
	}
	fence.forget()
	fence.busy = true
	gates := fence.gates
	fence.gates = nil
	c.releasing.Add(1)
	go func() {
		defer c.releasing.Done()
		deadline := time.Now().Add(c.cfg.LeaseDuration)
		for _, g := range gates {
			g.wait(time.Until(deadline))
		}
		c.call(fence.Release)
		c.mu.Lock()
		fence.busy = false
		c.mu.Unlock()
	}()
}

// releaseAll stops every cluster and releases every fence, waiting (at most a lease duration)
// for the writes in flight and the releases. Nothing starts or is taken afterwards.
func (c *Coordinator) releaseAll() {
	var cancels []context.CancelFunc
	c.mu.Lock()
	c.stopping = true
	for _, e := range c.engaged {
		cancels = append(cancels, c.stop(e))
	}
	for _, f := range c.fences {
		if f.claimed() && !f.busy {
			c.release(f)
		}
	}
	if e := c.elected; e != nil && e.fence.claimed() && !e.fence.busy {
		c.release(e.fence)
	}
	c.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
	c.releasing.Wait()
}

// Runnable returns a Runnable that manages synchronization of clusters. It runs on every
// replica, leader election or not.
func (c *Coordinator) Runnable() manager.Runnable {
	return everyReplica(func(ctx context.Context) error {
		c.log.Info("synchronization runnable starting", "peer", c.self.ID)
		// The peer registry outlives the decisions: on a clean stop, every fence is released
		// before the peer Lease, on which their validity rests.
		peersCtx, stopPeers := context.WithCancel(context.WithoutCancel(ctx))
		defer stopPeers()
		errCh := make(chan error, 1)
		go func() { errCh <- c.peers.Run(peersCtx) }()
		c.recompute()
		t := time.NewTicker(c.cfg.Probe)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				// Leave cleanly: release every fence, then the peer Lease, before the process
				// exits, so that the other peers take over at their next look, not a lease
				// duration later.
				c.releaseAll()
				stopPeers()
				<-errCh //nolint:errcheck // the registry ends with its context's error, as asked
				return nil
			case err := <-errCh:
				return err
			case <-t.C:
				c.log.V(1).Info("coordination tick", "peers", len(c.peers.Snapshot()))
				c.recompute()
			}
		}
	})
}

// Engage registers a cluster for coordination.
func (c *Coordinator) Engage(parent context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	if err := parent.Err(); err != nil {
		return err
	}

	c.mu.Lock()
	defer c.mu.Unlock()

	fence := c.fences[name]
	if fence == nil {
		fence = newLeaseGuard(c.kube, c.cfg.FenceNS, c.fenceName(name.String()), c.self.ID)
		fence.createAfter = func(since time.Time) time.Time { return c.createAfter(since, c.settledAt()) }
		c.fences[name] = fence
	}
	eng := &engagement{name: name, cl: cl, parent: parent, fence: fence}
	var cancel context.CancelFunc
	if cur, ok := c.engaged[name]; ok {
		// Re-engage same name: stop the old engagement's work; the fence carries over.
		cancel = c.stop(cur)
	}
	c.engaged[name] = eng
	// When the cluster goes away, stop its work; the next decision releases its fence.
	context.AfterFunc(parent, func() {
		c.mu.Lock()
		var cancel context.CancelFunc
		if c.engaged[name] == eng {
			cancel = c.stop(eng)
			delete(c.engaged, name)
		}
		c.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	})
	if cancel != nil {
		go cancel()
	}

	// Kick a decision outside the lock for faster attach.
	go c.recompute()
	return nil
}

// recompute decides, for every cluster with a fence, whether this peer should run it
// (rendezvous hashing over the live peers), and converges: it stops the clusters it should
// not run or whose fence is void (an earlier epoch), releases the fences it should not hold
// (or may hold on the server: a release that failed, a take that ended after its cluster went
// away), and tries to take the fences of the clusters it should run, starting each once its
// fence is taken. Decisions are made under c.mu; every Lease request runs outside it, at most
// one per fence.
func (c *Coordinator) recompute() {
	peers := c.peers.Snapshot()
	self := c.self
	epoch, _, valid := c.peers.Validity()

	var takes, starts []*engagement
	var cancels []context.CancelFunc

	now := time.Now()

	c.mu.Lock()
	if c.stopping {
		c.mu.Unlock()
		return
	}
	if valid {
		c.campaign(epoch, now)
	}
	for name, fence := range c.fences {
		engm := c.engaged[name]
		should := engm != nil && len(peers) > 0 && c.sharder.ShouldOwn(name.String(), peers, self)
		held := valid && fence.heldIn(epoch)

		if engm != nil && engm.started && (!should || !held) {
			// Stop: not ours any more, or our fence is void (this peer may have been judged
			// dead meanwhile). No write begins from now on.
			cancels = append(cancels, c.stop(engm))
			c.log.Info("synchronization stop", "cluster", name, "peer", self.ID, "fenceValid", held)
		}
		if fence.busy {
			continue
		}
		switch {
		case should && held:
			if !engm.started {
				// Taken in this epoch, not running (a start that failed, or a take that ended
				// as the cluster was re-engaged): start it again, no request needed.
				starts = append(starts, engm)
			}
		case should:
			if valid && !now.Before(fence.nextTry) {
				fence.busy = true
				takes = append(takes, engm)
			}
		case fence.claimed():
			// Not ours, but the server may name us: let another peer have it.
			c.release(fence)
		case engm == nil:
			delete(c.fences, name)
		}
	}
	startCtxs := make([]context.Context, len(starts))
	for i, engm := range starts {
		startCtxs[i] = c.markStarted(engm)
	}
	c.mu.Unlock()

	for _, cancel := range cancels {
		cancel()
	}
	for _, engm := range takes {
		go c.take(engm, epoch)
	}
	for i, engm := range starts {
		go c.startForCluster(startCtxs[i], engm)
	}
}

// retryLater throttles the next take of a fence that was not taken. Call with c.mu held. If
// its holder is dead by a list older than the read, it asks for a newer list and tries again
// right after it rather than a throttle later.
func (c *Coordinator) retryLater(fence *leaseGuard) {
	if fence.hasPending() {
		fence.nextTry = time.Now().Add(pendingRetry)
		c.peers.RefreshSoon()
		return
	}
	fence.nextTry = time.Now().Add(c.cfg.FenceThrottle)
}

// take tries to take the engagement's fence in epoch, and starts the cluster if it did and
// this peer should still run it. If the cluster went away meanwhile, its fence stays claimed
// and the next decision releases it.
func (c *Coordinator) take(engm *engagement, epoch uint64) {
	fence := engm.fence
	var ok bool
	var holder string
	var err error
	c.call(func(ctx context.Context) { ok, holder, err = fence.take(ctx, epoch, c.peers.Dead) })

	c.mu.Lock()
	fence.busy = false
	cur, _, _ := c.peers.Validity()
	switch {
	case !ok:
		c.retryLater(fence)
		if errors.Is(err, errUnsettled) {
			fence.nextTry = later(fence.nextTry, fence.creatableAt())
		}
		c.mu.Unlock()
		if err != nil {
			c.log.V(1).Info("taking the fence failed; will retry", "cluster", engm.name, "peer", c.self.ID, "err", err)
		} else {
			c.log.V(1).Info("fence held by a live peer; will retry", "cluster", engm.name, "peer", c.self.ID, "holder", holder)
		}
		return
	case c.stopping || c.engaged[engm.name] != engm || engm.started || cur != epoch || engm.parent.Err() != nil:
		// Stopping, gone, re-engaged or started meanwhile, or a new epoch: the next decision
		// starts it or releases its fence.
		c.mu.Unlock()
		return
	}
	ctx := c.markStarted(engm)
	c.mu.Unlock()
	c.startForCluster(ctx, engm)
}

// markStarted marks the engagement started and returns the context of its work. Call with c.mu
// held. The context derives from the cluster's own, not the tick's: the work stops the moment
// the cluster goes away (its cache with it), not when a goroutine notices.
func (c *Coordinator) markStarted(engm *engagement) context.Context {
	ctx, cancel := context.WithCancel(engm.parent)
	engm.ctx, engm.cancel, engm.started, engm.writes = ctx, cancel, true, newWriteGate()
	c.log.Info("synchronization start", "cluster", engm.name, "peer", c.self.ID)
	return ctx
}

func (c *Coordinator) startForCluster(ctx context.Context, engm *engagement) {
	for _, a := range c.awares {
		if err := a.Engage(ctx, engm.name, engm.cl); err != nil {
			c.log.Error(err, "failed to engage", "cluster", engm.name)
			// Stop this start (not a later one) so that the next decision retries.
			c.mu.Lock()
			var cancel context.CancelFunc
			if engm.started && engm.ctx == ctx {
				cancel = c.stop(engm)
			}
			c.mu.Unlock()
			if cancel != nil {
				cancel()
			}
			return
		}
	}
}

// AddAware registers a multicluster-aware aware.
func (c *Coordinator) AddAware(r multicluster.Aware) {
	c.awares = append(c.awares, r)
}
