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

package peers

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/util/sanitize"

	"configbundle.dev/hub/pkg/sharding/sharder"
)

const (
	labelPartOf = "app.kubernetes.io/part-of"
	labelPeer   = "mcr.sigs.k8s.io/peer"
	labelPrefix = "mcr.sigs.k8s.io/prefix"
	annotWeight = "mcr.sigs.k8s.io/weight"
	// annotIncarnation on a peer Lease names the process that holds it (host, pid and a random
	// part), so that two processes started with one peer ID tell each other apart.
	annotIncarnation = "mcr.sigs.k8s.io/incarnation"
	partOfValue      = "multicluster-runtime"
	defaultWeight    = uint32(1)
)

// ErrDuplicateID is returned by Run, wrapped, when another live process holds this peer's Lease
// under the same peer ID: it was started with the ID of a running peer. This peer has acted on
// nothing, and released nothing, since it first saw the Lease held by the other.
var ErrDuplicateID = errors.New("another live process holds the peer Lease of this peer ID")

// errHeldByAnother is what a renewal returns while another process holds our Lease under our
// peer ID and this peer cannot tell yet whether it is live.
var errHeldByAnother = errors.New("another process holds the peer Lease of this peer ID; waiting to see whether it is live")

// Registry provides peer membership for sharding decisions, and the liveness that fences rest
// on: a fence is valid while its holder's own peer Lease is, so that the steady state renews one
// Lease per peer and nothing per cluster.
type Registry interface {
	// Self returns this process's identity and weight.
	Self() sharder.PeerInfo
	// Snapshot returns the current set of live peers. Treat as read-only.
	Snapshot() []sharder.PeerInfo
	// Run blocks, periodically renewing our Lease and refreshing peer membership
	// until ctx is cancelled or an error occurs.
	Run(ctx context.Context) error
	// Validity reports whether this peer may act on the fences it took in the current epoch:
	// its own Lease was renewed recently enough, by the local monotonic clock, that no other
	// peer can have judged it dead. until is when that ends unless the Lease is renewed again.
	// The epoch changes whenever this peer may have been judged dead meanwhile (a renewal that
	// came late, its Lease found deleted or taken, a release): every fence taken in an earlier
	// epoch is void.
	Validity() (epoch uint64, until time.Time, ok bool)
	// Dead reports whether peer id is certainly not acting any more, judged by a list that
	// started after after (zero: any list): its Lease was released, or it was seen unchanged
	// for at least its duration, by this peer's clock, by a list that started that long after
	// this peer first saw it, or a list that started that long after the question was first
	// asked still shows no Lease of it. A fence read naming it may then be taken, if the read
	// returned before after: a verdict older than the read says nothing of what the holder
	// did since.
	Dead(id string, after time.Time) bool
	// RefreshSoon asks for a list of the peers as soon as possible, not at the next refresh: a
	// fence read naming a dead holder is taken once a list that started after the read agrees.
	RefreshSoon()
	// Stable returns since when this peer's view has been as it is: the live peers (Snapshot,
	// this peer aside) as the list that first showed them so, and this peer live without a
	// break (its current epoch), by the start of that list and of the renewal that began the
	// epoch, whichever is later. Zero before the first list and the first renewal.
	Stable() time.Time
	// Alone reports whether a list that started after after showed no other live peer (known:
	// such a list has been made). Any peer that acted before after, and may act still, shows in
	// such a list: its Lease existed then, and it is live, or dead only once it stopped acting.
	Alone(after time.Time) (alone, known bool)
}

type leaseRegistry struct {
	ns, namePrefix string
	self           sharder.PeerInfo
	cli            crclient.Client

	mu sync.RWMutex
	// peers are the peers of the last list, live or judged dead, by holder identity.
	peers map[string]peer
	// listed is when the last successful list started; zero before the first.
	listed time.Time
	// live are the ids of the live peers of the last list, this peer aside, sorted and joined,
	// and stable the start of the list that first showed them so.
	live   string
	stable time.Time
	// released are the peers whose Lease the last list showed without a holder: they left, and
	// stopped acting before they released it.
	released map[string]bool
	// absent records when Dead was first asked about a peer that no list showed (none since):
	// a peer that started after the last list, or whose Lease was deleted under it.
	absent map[string]time.Time

	// own is the state of this peer's own Lease; guarded by mu.
	own ownLease
	// incarnation names this process in its Lease (annotIncarnation).
	incarnation string
	// other is our Lease as last read held by another process under our peer ID, and since when
	// unchanged; nil while the Lease is ours or free. Guarded by mu.
	other *otherHolder
	// duplicate is set, wrapping ErrDuplicateID, once that other process was seen renewing the
	// Lease: this peer acts on nothing from then on. Guarded by mu.
	duplicate error
	// onDuplicate is called once duplicate is set (WithDuplicateHandler); nil: none.
	onDuplicate func(error)
	// soon asks Run for a list before the next refresh (RefreshSoon).
	soon chan struct{}

	ttl     time.Duration
	renew   time.Duration
	refresh time.Duration // how often peers are listed; at most renew
	timeout time.Duration // bounds each request: half the renew period

	log logr.Logger
}

// ownLease is what this peer knows of its own Lease.
type ownLease struct {
	// lease is the Lease as last written by this peer (nil: unknown, read it first).
	lease *coordv1.Lease
	// epoch counts the times this peer may have been judged dead; 0 before the first renewal.
	epoch uint64
	// epochStart is when the renewal that began the epoch started.
	epochStart time.Time
	// validUntil is when this peer stops acting unless its Lease is renewed again: the start
	// of the last successful renewal plus ttl less one renew period.
	validUntil time.Time
}

// otherHolder is our Lease as read held by another process under our peer ID: a previous
// incarnation of this peer, dead or not yet known dead, or a duplicate.
type otherHolder struct {
	// version is the Lease's resourceVersion, seen since seen: when the read that first showed
	// it returned, by the local clock.
	version string
	seen    time.Time
	// ttl is how long it may go unchanged before its holder is dead: the longer of the duration
	// it advertises and ours.
	ttl time.Duration
}

// RegistryOption configures a Lease-based Registry.
type RegistryOption func(*leaseRegistry)

// WithLeaseTimings sets how long a peer's Lease is valid without renewal (ttl, 30s by default)
// and how often this peer renews its own (renew, 10s by default; choose about ttl/3). A peer
// that dies is judged dead, and its clusters taken over, about ttl after its last renewal.
func WithLeaseTimings(ttl, renew time.Duration) RegistryOption {
	return func(r *leaseRegistry) {
		r.ttl, r.renew = ttl, renew
	}
}

// WithRefreshInterval sets how often the peer Leases are listed to refresh the snapshot
// (default: the renew interval). A shorter interval notices a dead or new peer sooner, at the
// cost of one List per interval.
func WithRefreshInterval(d time.Duration) RegistryOption {
	return func(r *leaseRegistry) {
		r.refresh = d
	}
}

// WithDuplicateHandler calls fn, once, when this peer finds its Lease held and renewed by another
// live process under the same peer ID. From then on this peer acts on nothing (Snapshot is empty
// and Validity never valid); Run returns the error fn was given a ttl later, so that the process
// can say so before it exits.
func WithDuplicateHandler(fn func(error)) RegistryOption {
	return func(r *leaseRegistry) {
		r.onDuplicate = fn
	}
}

// NewLeaseRegistry constructs a Lease-based Registry.
//
// Params:
//   - ns: namespace where peer Leases live (e.g. "kube-system")
//   - namePrefix: Lease name prefix (e.g. "mcr-peer")
//   - selfID: this process ID (defaults to os.Hostname() if empty)
//   - weight: relative capacity (0 treated as 1)
//   - log: logger; use logr.Discard() to silence
func NewLeaseRegistry(cli crclient.Client, ns, namePrefix string, selfID string, weight uint32, log logr.Logger, opts ...RegistryOption) Registry {
	if selfID == "" {
		if hn, _ := os.Hostname(); hn != "" {
			selfID = hn
		} else {
			selfID = "unknown"
		}
	}
	// Sanitize to DNS-1123 subdomain for Lease names: lowercase, [a-z0-9-.], start/end alphanumeric.
	selfID = sanitize.DNS1123(selfID)
	if weight == 0 {
		weight = defaultWeight
	}
	r := &leaseRegistry{
		ns:          ns,
		namePrefix:  namePrefix,
		self:        sharder.PeerInfo{ID: selfID, Weight: weight},
		cli:         cli,
		peers:       map[string]peer{},
		absent:      map[string]time.Time{},
		soon:        make(chan struct{}, 1),
		incarnation: newIncarnation(),
		ttl:         30 * time.Second,
		renew:       10 * time.Second,
		log:         log.WithName("lease-registry").WithValues("ns", ns, "prefix", namePrefix, "selfID", selfID, "weight", weight),
	}
	for _, o := range opts {
		o(r)
	}
	if r.refresh <= 0 || r.refresh > r.renew {
		r.refresh = r.renew
	}
	r.timeout = r.renew / 2
	return r
}

func (r *leaseRegistry) Self() sharder.PeerInfo { return r.self }

// newIncarnation names this process: its host, its pid and a random part, unique among processes.
func newIncarnation() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), rand.Text()[:10])
}

// peer is a peer seen in the last list, and since when it is seen as it is.
type peer struct {
	info sharder.PeerInfo
	// version is its Lease's resourceVersion.
	version string
	// since is when this peer first saw that version: when the list that showed it returned,
	// by the local clock, so never before the holder began the renewal that wrote it.
	since time.Time
	// ttl is how long it may go unchanged before it is dead: the longer of the duration it
	// advertises and ours.
	ttl time.Duration
}

// dead reports whether a list that started at listed still showing p proves p dead.
func (p peer) dead(listed time.Time) bool { return listed.Sub(p.since) >= p.ttl }

// Snapshot returns the peers of the last list that are not judged dead, and this peer. A peer
// is judged dead only by a list (see Dead), so a failed or late list, when the API server is
// unreachable or this process was paused, never makes a live peer look dead: a stale view
// must not make this peer believe it is alone. It is empty until this peer has written its
// Lease, and while another process holds it under our peer ID: this peer owns nothing then.
func (r *leaseRegistry) Snapshot() []sharder.PeerInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.listed.IsZero() || r.own.epoch == 0 || r.other != nil || r.duplicate != nil {
		return nil
	}
	out := make([]sharder.PeerInfo, 0, len(r.peers)+1)
	out = append(out, r.self)
	for id, p := range r.peers {
		if id != r.self.ID && !p.dead(r.listed) {
			out = append(out, p.info)
		}
	}
	return out
}

// Dead implements Registry. A peer the last list showed is judged by its Lease's changes; one
// whose Lease it showed released is dead; one it did not show at all is dead only once a list
// that started a ttl after the first question about it still does not show it: it may have
// started after the last list, or its Lease may have been deleted while it still acts.
func (r *leaseRegistry) Dead(id string, after time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.listed.IsZero() || !r.listed.After(after) || id == r.self.ID {
		return false
	}
	if p, ok := r.peers[id]; ok {
		return p.dead(r.listed)
	}
	if r.released[id] {
		return true
	}
	asked, ok := r.absent[id]
	if !ok {
		r.absent[id] = time.Now()
		return false
	}
	return r.listed.Sub(asked) >= r.ttl
}

// Stable implements Registry.
func (r *leaseRegistry) Stable() time.Time {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.stable.IsZero() || r.own.epochStart.IsZero() {
		return time.Time{}
	}
	return later(r.stable, r.own.epochStart)
}

// Alone implements Registry.
func (r *leaseRegistry) Alone(after time.Time) (alone, known bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	known = r.listed.After(after)
	return known && r.live == "", known
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// liveIDs returns the ids of the peers the last list shows live, this peer aside, sorted and
// joined. Call with r.mu held.
func (r *leaseRegistry) liveIDs() string {
	var ids []string
	for id, p := range r.peers {
		if id != r.self.ID && !p.dead(r.listed) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return strings.Join(ids, ",")
}

// Validity implements Registry.
func (r *leaseRegistry) Validity() (epoch uint64, until time.Time, ok bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.own.epoch, r.own.validUntil, r.own.epoch > 0 && time.Now().Before(r.own.validUntil)
}

func (r *leaseRegistry) Run(ctx context.Context) error {
	r.log.Info("peer registry starting", "ns", r.ns, "prefix", r.namePrefix, "self", r.self.ID)

	// Our own Lease is renewed on a timer of its own, once per renew period from the start of
	// the last successful renewal (a failed one is retried a refresh interval later), so that
	// the steady state writes exactly one renewal per renew period; the peers are listed at
	// the refresh interval, and at once when asked to (RefreshSoon).
	renewal := time.NewTimer(0)
	defer renewal.Stop()
	refresh := time.NewTicker(r.refresh)
	defer refresh.Stop()
	listed := false
	for {
		select {
		case <-ctx.Done():
			r.releaseSelfLease()
			return ctx.Err()
		case <-renewal.C:
			next, err := r.renewOnce(ctx)
			if err != nil {
				return r.refuse(ctx, err)
			}
			renewal.Reset(next)
			if listed {
				continue
			}
			// The first pass lists the peers at once too, to publish our view promptly.
			listed = true
		case <-refresh.C:
		case <-r.soon:
		}
		if err := r.refreshPeers(ctx); err != nil && ctx.Err() == nil {
			r.log.V(1).Info("refreshPeers failed; will retry", "err", err)
		}
	}
}

// renewOnce renews our own Lease and returns when to renew it next: one renew period after
// this renewal began, or a refresh interval from now if it failed. It returns an error only
// wrapping ErrDuplicateID.
func (r *leaseRegistry) renewOnce(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if err := r.renewSelfLease(ctx, start); err != nil {
		if errors.Is(err, ErrDuplicateID) {
			return 0, err
		}
		if ctx.Err() == nil && !errors.Is(err, errHeldByAnother) {
			r.log.V(1).Info("renewSelfLease failed; will retry", "err", err)
		}
		return r.refresh, nil
	}
	return max(0, r.renew-time.Since(start)), nil
}

// refuse reports err, that another live process holds our Lease under our peer ID
// (WithDuplicateHandler), and returns it a ttl later, or once ctx ends. This peer acts on
// nothing meanwhile, and releases nothing: the Lease is the other's.
func (r *leaseRegistry) refuse(ctx context.Context, err error) error {
	if r.onDuplicate != nil {
		r.onDuplicate(err)
	}
	t := time.NewTimer(r.ttl)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return err
}

// RefreshSoon implements Registry.
func (r *leaseRegistry) RefreshSoon() {
	select {
	case r.soon <- struct{}{}:
	default:
	}
}

func (r *leaseRegistry) leaseName() string { return fmt.Sprintf("%s-%s", r.namePrefix, r.self.ID) }

// releaseSelfLease clears the holder of our Lease when we stop, so that the other peers judge us
// gone at their next refresh instead of a ttl later, and take over our share at once. We stop
// acting first: no fence of ours is valid once the Lease may read as released. A Lease this
// process does not hold (never written, or held by another process under our peer ID) is left
// as it is.
func (r *leaseRegistry) releaseSelfLease() {
	r.mu.Lock()
	lease := r.own.lease
	r.own.epoch++
	r.own.validUntil = time.Time{}
	r.mu.Unlock()
	if lease == nil {
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		if !r.ours(lease) {
			return
		}
		lease = lease.DeepCopy()
		lease.Spec.HolderIdentity = ptr.To("")
		err := r.cli.Update(ctx, lease)
		if err == nil || !apierrors.IsConflict(err) || attempt > 0 {
			if err != nil {
				r.log.V(1).Info("releasing our Lease failed; the other peers drop us once it expires", "err", err)
			}
			return
		}
		lease = &coordv1.Lease{} // changed since we wrote it: read it again
		if err := r.cli.Get(ctx, crclient.ObjectKey{Namespace: r.ns, Name: r.leaseName()}, lease); err != nil {
			return
		}
	}
}

// ours reports whether the Lease names this process: our peer ID, written by this incarnation.
func (r *leaseRegistry) ours(ls *coordv1.Lease) bool {
	return ptr.Deref(ls.Spec.HolderIdentity, "") == r.self.ID && ls.Annotations[annotIncarnation] == r.incarnation
}

// renewSelfLease writes our own Lease with a fresh RenewTime and duration, then records until
// when we may act: start (when the renewal began) plus ttl less one renew period. A renewal that
// began after the last validity ended, or that found the Lease deleted or held by someone else,
// starts a new epoch: another peer may have judged us dead and taken our fences meanwhile.
//
// A Lease held under our peer ID by another process (another incarnation) is not written: this
// peer then acts on nothing, and voids its fences. If that process renews it, it is live and
// this peer a duplicate (ErrDuplicateID); if it leaves it unchanged for its duration, it is dead
// (the previous incarnation of a peer restarted after a crash) and its Lease is taken.
//
// In the steady state a renewal is one request, an Update of the Lease as we last wrote it; the
// Lease is read only when that fails.
func (r *leaseRegistry) renewSelfLease(ctx context.Context, start time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()

	r.mu.RLock()
	last, lapsed, duplicate := r.own.lease, !start.Before(r.own.validUntil), r.duplicate
	r.mu.RUnlock()
	if duplicate != nil {
		return duplicate
	}

	lease, err := r.writeSelfLease(ctx, last, start)
	if err != nil && last != nil && (apierrors.IsConflict(err) || apierrors.IsNotFound(err)) {
		lease, err = r.writeSelfLease(ctx, nil, start) // changed behind our back: read it again
	}
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if lease.other {
		return r.heldByAnother(lease.lease)
	}
	if lapsed || lease.taken {
		r.own.epoch++
		r.own.epochStart = start
		r.log.Info("new epoch: fences taken before are void", "epoch", r.own.epoch)
	}
	r.other = nil
	r.own.lease = lease.lease
	r.own.validUntil = start.Add(r.validity())
	return nil
}

// heldByAnother records that another process holds our Lease under our peer ID, as ls shows, and
// voids every fence of ours. It returns errHeldByAnother while this peer cannot tell whether
// that process is live, and an error wrapping ErrDuplicateID once ls shows it renewed the Lease
// since this peer first read it. Call with r.mu held.
func (r *leaseRegistry) heldByAnother(ls *coordv1.Lease) error {
	if r.own.lease != nil {
		// We held it: the other took it once it judged us dead, so we may not act anyway.
		r.own.epoch++
		r.own.lease, r.own.validUntil = nil, time.Time{}
	}
	switch o := r.other; {
	case o == nil:
		ttl := r.ttl
		if ls.Spec.LeaseDurationSeconds != nil {
			ttl = max(ttl, time.Duration(*ls.Spec.LeaseDurationSeconds)*time.Second)
		}
		r.other = &otherHolder{version: ls.ResourceVersion, seen: time.Now(), ttl: ttl}
		r.log.Info("Another process holds the Lease of this peer ID; acting on nothing until it is known dead",
			"lease", ls.Name, "holder", ls.Annotations[annotIncarnation], "waitAtMost", ttl)
	case o.version != ls.ResourceVersion:
		r.duplicate = fmt.Errorf("%w: the Lease %s/%s is held and renewed by %q, not by this process %q",
			ErrDuplicateID, ls.Namespace, ls.Name, ls.Annotations[annotIncarnation], r.incarnation)
		return r.duplicate
	}
	return errHeldByAnother
}

// validity is how long after the start of a successful renewal this peer may act: the lease
// duration less one renew period, a margin for clocks that run at different rates and for the
// request's way to the API server.
func (r *leaseRegistry) validity() time.Duration {
	if v := r.ttl - r.renew; v > 0 {
		return v
	}
	return r.ttl * 2 / 3
}

// written is our Lease as a renewal wrote it, and whether it had to be created or taken back
// from another holder; or, if other, the Lease as read, held by another process under our peer
// ID, and not written.
type written struct {
	lease *coordv1.Lease
	taken bool
	other bool
}

// writeSelfLease updates last (our Lease as we last wrote it) or, if nil, the Lease as it is
// now: it creates it if it is missing, takes it if it is free, held by another peer ID, or held
// under ours by a process known dead (see renewSelfLease), and leaves it otherwise.
func (r *leaseRegistry) writeSelfLease(ctx context.Context, last *coordv1.Lease, start time.Time) (written, error) {
	now := metav1.MicroTime{Time: time.Now()}
	ttlSec := int32(r.ttl / time.Second)
	lease, taken := last.DeepCopy(), false
	if lease == nil {
		lease = &coordv1.Lease{}
		err := r.cli.Get(ctx, crclient.ObjectKey{Namespace: r.ns, Name: r.leaseName()}, lease)
		if apierrors.IsNotFound(err) {
			lease = &coordv1.Lease{
				ObjectMeta: metav1.ObjectMeta{
					Namespace: r.ns,
					Name:      r.leaseName(),
					Labels: map[string]string{
						labelPartOf: partOfValue,
						labelPeer:   "true",
						labelPrefix: r.namePrefix,
					},
				},
				Spec: coordv1.LeaseSpec{HolderIdentity: ptr.To(r.self.ID), AcquireTime: &now, RenewTime: &now, LeaseDurationSeconds: ptr.To(ttlSec)},
			}
			lease.Annotations = map[string]string{annotWeight: strconv.FormatUint(uint64(r.self.Weight), 10), annotIncarnation: r.incarnation}
			return written{lease: lease, taken: true}, r.cli.Create(ctx, lease)
		}
		if err != nil {
			return written{}, err
		}
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		if holder == r.self.ID && !r.ours(lease) && !r.otherDead(lease, start) {
			return written{lease: lease, other: true}, nil
		}
		if taken = !r.ours(lease); taken {
			lease.Spec.AcquireTime = &now
		}
	}
	lease.Spec.HolderIdentity = ptr.To(r.self.ID)
	lease.Spec.RenewTime = &now
	lease.Spec.LeaseDurationSeconds = ptr.To(ttlSec)
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[annotWeight] = strconv.FormatUint(uint64(r.self.Weight), 10)
	lease.Annotations[annotIncarnation] = r.incarnation
	return written{lease: lease, taken: taken}, r.cli.Update(ctx, lease)
}

// otherDead reports whether ls, held under our peer ID by another process, is the version this
// peer has seen unchanged for the other's ttl, by a read that returned at least that long before
// start: the other process stopped renewing it, and its validity ended before ours can begin.
func (r *leaseRegistry) otherDead(ls *coordv1.Lease, start time.Time) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	o := r.other
	return o != nil && o.version == ls.ResourceVersion && start.Sub(o.seen) >= o.ttl
}

// refreshPeers lists peer Leases and updates what this peer knows of them. Liveness is judged on
// this peer's own clock, never on the RenewTime another peer wrote, so no clock sync is needed:
// a peer is live while its Lease keeps changing; one whose Lease a list that started at least a
// ttl after this peer first saw it shows unchanged is dead.
func (r *leaseRegistry) refreshPeers(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	start := time.Now()
	list := &coordv1.LeaseList{}
	// Only list our labeled peer leases with our prefix for efficiency.
	if err := r.cli.List(ctx, list,
		crclient.InNamespace(r.ns),
		crclient.MatchingLabels{
			labelPeer:   "true",
			labelPrefix: r.namePrefix,
		},
	); err != nil {
		return err
	}
	end := time.Now()

	r.mu.Lock()
	defer r.mu.Unlock()
	next := make(map[string]peer, len(list.Items))
	released := map[string]bool{}
	for i := range list.Items {
		l := &list.Items[i]
		// A Lease without a holder was released: its peer left.
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			released[strings.TrimPrefix(l.Name, r.namePrefix+"-")] = true
			continue
		}
		id := *l.Spec.HolderIdentity
		ttl := r.ttl
		if l.Spec.LeaseDurationSeconds != nil {
			ttl = max(ttl, time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second)
		}
		// Weight from annotation (optional)
		weight := defaultWeight
		if wStr := l.Annotations[annotWeight]; wStr != "" {
			if w64, err := strconv.ParseUint(wStr, 10, 32); err == nil && w64 > 0 {
				weight = uint32(w64)
			}
		}
		p := peer{info: sharder.PeerInfo{ID: id, Weight: weight}, version: l.ResourceVersion, since: end, ttl: ttl}
		if prev, ok := r.peers[id]; ok && prev.version == p.version {
			p.since = prev.since
		}
		next[id] = p
	}
	for id, asked := range r.absent {
		if _, ok := next[id]; ok || released[id] || start.Sub(asked) > 10*r.ttl {
			delete(r.absent, id) // seen, or not asked about again: forgotten
		}
	}
	r.peers, r.released, r.listed = next, released, start
	if live := r.liveIDs(); live != r.live || r.stable.IsZero() {
		r.live, r.stable = live, start
	}
	return nil
}
