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
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded/sharder"
	"sigs.k8s.io/multicluster-runtime/pkg/util/sanitize"
)

const (
	labelPartOf   = "app.kubernetes.io/part-of"
	labelPeer     = "mcr.sigs.k8s.io/peer"
	labelPrefix   = "mcr.sigs.k8s.io/prefix"
	annotWeight   = "mcr.sigs.k8s.io/weight"
	partOfValue   = "multicluster-runtime"
	defaultWeight = uint32(1)
)

// Registry provides peer membership for sharding decisions.
type Registry interface {
	// Self returns this process's identity and weight.
	Self() sharder.PeerInfo
	// Snapshot returns the current set of live peers. Treat as read-only.
	Snapshot() []sharder.PeerInfo
	// Run blocks, periodically renewing our Lease and refreshing peer membership
	// until ctx is cancelled or an error occurs.
	Run(ctx context.Context) error
}

type leaseRegistry struct {
	ns, namePrefix string
	self           sharder.PeerInfo
	cli            crclient.Client

	mu        sync.RWMutex
	peers     map[string]peer
	refreshed time.Time // when peers was last listed

	ttl     time.Duration
	renew   time.Duration
	refresh time.Duration // how often peers are listed; at most renew

	log logr.Logger
}

// RegistryOption configures a Lease-based Registry.
type RegistryOption func(*leaseRegistry)

// WithLeaseTimings sets how long a peer's Lease is valid without renewal (ttl, 30s by default)
// and how often this peer renews its own (renew, 10s by default; choose about ttl/3). A peer
// that dies is dropped from the others' snapshots about ttl after its last renewal.
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
		ns:         ns,
		namePrefix: namePrefix,
		self:       sharder.PeerInfo{ID: selfID, Weight: weight},
		cli:        cli,
		peers:      map[string]peer{},
		ttl:        30 * time.Second,
		renew:      10 * time.Second,
		log:        log.WithName("lease-registry").WithValues("ns", ns, "prefix", namePrefix, "selfID", selfID, "weight", weight),
	}
	for _, o := range opts {
		o(r)
	}
	if r.refresh <= 0 || r.refresh > r.renew {
		r.refresh = r.renew
	}
	return r
}

func (r *leaseRegistry) Self() sharder.PeerInfo { return r.self }

// peer is a live peer and when its Lease expires unless it is renewed.
type peer struct {
	info    sharder.PeerInfo
	expires time.Time
}

// Snapshot returns the peers whose Lease was valid at the last refresh and, if that refresh is
// recent, has not expired since: a dead peer is dropped when its Lease expires, not up to a
// refresh interval later. After a failed or late refresh (the API server is unreachable, or
// this process was paused), the peers of the last refresh are returned as they were: a stale
// view must not make this peer believe it is alone.
func (r *leaseRegistry) Snapshot() []sharder.PeerInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	now := time.Now()
	recent := now.Sub(r.refreshed) < 2*r.refresh
	out := make([]sharder.PeerInfo, 0, len(r.peers))
	for id, p := range r.peers {
		if recent && id != r.self.ID && !now.Before(p.expires) {
			continue
		}
		out = append(out, p.info)
	}
	return out
}

func (r *leaseRegistry) Run(ctx context.Context) error {
	r.log.Info("peer registry starting", "ns", r.ns, "prefix", r.namePrefix, "self", r.self.ID)

	// Tick at the refresh interval; renew our own Lease every renew interval, well within ttl.
	t := time.NewTicker(r.refresh)
	defer t.Stop()

	var renewed time.Time
	for {
		// Do one pass immediately so we publish our presence promptly; renew whenever waiting
		// for the next tick would make the renewal late.
		if renewed.IsZero() || time.Since(renewed) > r.renew-r.refresh {
			start := time.Now()
			if err := r.renewSelfLease(ctx); err != nil && ctx.Err() == nil {
				r.log.V(1).Info("renewSelfLease failed; will retry", "err", err)
			} else if err == nil {
				renewed = start
			}
		}
		if err := r.refreshPeers(ctx); err != nil && ctx.Err() == nil {
			r.log.V(1).Info("refreshPeers failed; will retry", "err", err)
		}

		select {
		case <-ctx.Done():
			r.releaseSelfLease()
			return ctx.Err()
		case <-t.C:
			// loop
		}
	}
}

// releaseSelfLease clears the holder of our Lease when we stop, so that the other peers drop
// us at their next refresh instead of a ttl later, and take over our share at once.
func (r *leaseRegistry) releaseSelfLease() {
	ctx, cancel := context.WithTimeout(context.Background(), r.renew)
	defer cancel()
	lease := &coordv1.Lease{}
	if err := r.cli.Get(ctx, crclient.ObjectKey{Namespace: r.ns, Name: fmt.Sprintf("%s-%s", r.namePrefix, r.self.ID)}, lease); err != nil {
		return
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != r.self.ID {
		return
	}
	lease.Spec.HolderIdentity = ptr.To("")
	if err := r.cli.Update(ctx, lease); err != nil {
		r.log.V(1).Info("releasing our Lease failed; the other peers drop us once it expires", "err", err)
	}
}

// renewSelfLease upserts our own Lease with fresh RenewTime and duration.
func (r *leaseRegistry) renewSelfLease(ctx context.Context) error {
	now := metav1.MicroTime{Time: time.Now()}
	ttlSec := int32(r.ttl / time.Second)
	name := fmt.Sprintf("%s-%s", r.namePrefix, r.self.ID)

	lease := &coordv1.Lease{}
	err := r.cli.Get(ctx, crclient.ObjectKey{Namespace: r.ns, Name: name}, lease)
	switch {
	case apierrors.IsNotFound(err):
		lease = &coordv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: r.ns,
				Name:      name,
				Labels: map[string]string{
					labelPartOf: partOfValue,
					labelPeer:   "true",
					labelPrefix: r.namePrefix,
				},
				Annotations: map[string]string{
					annotWeight: strconv.FormatUint(uint64(r.self.Weight), 10),
				},
			},
			Spec: coordv1.LeaseSpec{
				HolderIdentity:       ptr.To(r.self.ID),
				RenewTime:            &now,
				LeaseDurationSeconds: ptr.To(ttlSec),
			},
		}
		return r.cli.Create(ctx, lease)

	case err != nil:
		return err

	default:
		// Update the existing Lease
		lease.Spec.HolderIdentity = ptr.To(r.self.ID)
		lease.Spec.RenewTime = &now
		lease.Spec.LeaseDurationSeconds = ptr.To(ttlSec)
		if lease.Annotations == nil {
			lease.Annotations = map[string]string{}
		}
		lease.Annotations[annotWeight] = strconv.FormatUint(uint64(r.self.Weight), 10)
		return r.cli.Update(ctx, lease)
	}
}

// refreshPeers lists peer Leases and updates the in-memory snapshot.
func (r *leaseRegistry) refreshPeers(ctx context.Context) error {
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

	now := time.Now()
	next := make(map[string]peer, len(list.Items))

	for i := range list.Items {
		l := &list.Items[i]
		// Basic sanity for holder identity
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			continue
		}
		id := *l.Spec.HolderIdentity

		// Respect expiry: RenewTime + LeaseDurationSeconds
		if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
			// If missing, treat as expired/stale.
			continue
		}
		exp := l.Spec.RenewTime.Time.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
		if now.After(exp) {
			continue // stale peer
		}

		// Weight from annotation (optional)
		weight := defaultWeight
		if wStr := l.Annotations[annotWeight]; wStr != "" {
			if w64, err := strconv.ParseUint(wStr, 10, 32); err == nil && w64 > 0 {
				weight = uint32(w64)
			}
		}

		next[id] = peer{info: sharder.PeerInfo{ID: id, Weight: weight}, expires: exp}
	}

	// Store snapshot (including ourselves; if not listed yet, ensure we're present).
	next[r.self.ID] = peer{info: sharder.PeerInfo{ID: r.self.ID, Weight: r.self.Weight}}

	r.mu.Lock()
	r.peers, r.refreshed = next, now
	r.mu.Unlock()
	return nil
}
