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
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fenceDuration is the duration a fence's Lease advertises. A fence is valid while its holder's
// peer Lease is (see peers.Registry), not by renewals of its own, so its Lease is written only
// when it changes hands; the duration is one year so that a peer of an earlier version, which
// judges a fence by its RenewTime and duration, never takes it while it is held.
const fenceDuration = 365 * 24 * time.Hour

// leaseGuard manages a single Lease as a *fence* for one shard/cluster, bound to the liveness
// of its holder, as etcd attaches many keys to one lease.
//
// Design/semantics:
//
//   - take(ctx, epoch, dead) writes this peer into the Lease, with the resourceVersion it read
//     as a precondition, if the Lease is free or already names this peer. If it names another
//     peer that dead reports dead, take only notes the Lease as read and when: it writes it on
//     a later try, once a list that started after that read still judges the holder dead, so
//     that a verdict older than the read (the holder may have come back and taken the Lease
//     again meanwhile) never makes two writers. The fence is then held in epoch.
//
//   - The Lease is not renewed: the fence is valid while it is held in the current epoch of
//     this peer's own peer Lease and that Lease is valid (peers.Registry.Validity). Another
//     peer takes it over only once it judges this peer dead by its peer Lease, which happens
//     only after this peer's validity has ended; a peer that may have been judged dead starts
//     a new epoch, which voids every fence it held before.
//
//   - Release(ctx) clears the holder if the Lease still names this peer. Until a release
//     succeeds (or a read shows another holder), the fence stays claimed: the server may name
//     this peer, and the coordinator releases it again at its next decision.
//
//   - Thread-safety: the methods are safe for concurrent use; the coordinator runs at most one
//     take or release at a time (busy).
//
// RBAC: the caller's client must be allowed to get/create/update Leases in namespace `ns`.
type leaseGuard struct {
	c      client.Client
	ns, nm string
	id     string
	// createAfter, if set, says from when a missing Lease, first read missing at since, may be
	// created (see errUnsettled); zero: not yet known. Unset: at once.
	createAfter func(since time.Time) time.Time

	// Guarded by the coordinator's mu.
	// busy is true while a take or a release is in flight.
	busy bool
	// nextTry defers the next take until this time (throttling).
	nextTry time.Time
	// gates are the write gates of the starts stopped since the last release, shut: the next
	// release waits for their writes in flight.
	gates []*writeGate

	mu sync.Mutex
	// held: the Lease names this peer since take succeeded in epoch; false after forget.
	held  bool
	epoch uint64
	// claimedOnServer: the Lease may name this peer on the server.
	claimedOnServer bool
	// lease is the Lease as this peer last wrote it (nil: unknown).
	lease *coordinationv1.Lease
	// pending is the Lease as read naming a dead holder, and when that read returned: take
	// writes it once a list that started after then still judges the holder dead.
	pending   *coordinationv1.Lease
	pendingAt time.Time
	// missingSince is when a take first found the Lease missing, none having found it since;
	// zero while it is not known missing.
	missingSince time.Time
}

// errUnsettled is what take returns for a missing Lease before createAfter allows to create it:
// a Lease deleted by hand may still be held, in memory, by a peer that has not noticed yet.
var errUnsettled = errors.New("the Lease is missing, too recently for this peer to create it: a peer may still hold it")

// newLeaseGuard builds a guard; it does not contact the API server.
func newLeaseGuard(c client.Client, ns, name, id string) *leaseGuard {
	return &leaseGuard{c: c, ns: ns, nm: name, id: id}
}

// heldIn reports whether the fence was taken in epoch and not forgotten since.
func (g *leaseGuard) heldIn(epoch uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held && g.epoch == epoch
}

// claimed reports whether the Lease may name this peer on the server.
func (g *leaseGuard) claimed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.claimedOnServer
}

// take takes the Lease for this peer in epoch unless another peer that is not certainly dead
// holds it, and reports whether it did, and the holder it found otherwise. dead(id, after)
// reports whether peer id is judged dead by a list that started after after.
func (g *leaseGuard) take(ctx context.Context, epoch uint64, dead func(id string, after time.Time) bool) (ok bool, holder string, err error) {
	now := metav1.NowMicro()
	g.mu.Lock()
	ls, at := g.pending, g.pendingAt
	g.mu.Unlock()
	switch {
	case ls != nil:
		// Read before: write it as read, if the holder is still dead by a later list.
		holder = ptr.Deref(ls.Spec.HolderIdentity, "")
		if !dead(holder, at) {
			if !dead(holder, time.Time{}) {
				g.setPending(nil) // alive after all: read it again next time
			}
			return false, holder, nil
		}
		ls = ls.DeepCopy()
	default:
		ls = &coordinationv1.Lease{}
		err = g.c.Get(ctx, types.NamespacedName{Namespace: g.ns, Name: g.nm}, ls)
		switch {
		case apierrors.IsNotFound(err):
			// Missing since this read returned, at the latest: a peer that held it took it before.
			if at := g.missing(time.Now()); at.IsZero() || time.Now().Before(at) {
				return false, "", errUnsettled
			}
			return g.create(ctx, epoch, now)
		case err != nil:
			return false, "", err
		}
		g.found()
		holder = ptr.Deref(ls.Spec.HolderIdentity, "")
		if holder != "" && holder != g.id {
			if dead(holder, time.Time{}) && !renewedLately(ls, now) {
				g.setPending(ls) // take it at a later try, if a later list says so too
			}
			return false, holder, nil
		}
	}
	if holder != g.id {
		ls.Spec.LeaseTransitions = ptr.To(ptr.Deref(ls.Spec.LeaseTransitions, 0) + 1)
	}
	// Written even when it names this peer already: taking it with the resourceVersion read as
	// a precondition is what makes it this epoch's, against a peer that judged an earlier epoch
	// of ours dead and is taking it at the same time.
	ls.Spec.HolderIdentity = ptr.To(g.id)
	ls.Spec.LeaseDurationSeconds = ptr.To(int32(fenceDuration / time.Second))
	ls.Spec.AcquireTime = &now
	ls.Spec.RenewTime = &now
	g.claim()
	if err := g.c.Update(ctx, ls); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			g.setPending(nil) // changed since it was read: read it again next time
		}
		return false, holder, err
	}
	g.took(epoch, ls)
	return true, "", nil
}

// create creates the Lease naming this peer.
func (g *leaseGuard) create(ctx context.Context, epoch uint64, now metav1.MicroTime) (bool, string, error) {
	ls := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: g.nm},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(g.id),
			LeaseDurationSeconds: ptr.To(int32(fenceDuration / time.Second)),
			AcquireTime:          &now,
			RenewTime:            &now,
		},
	}
	g.claim()
	if err := g.c.Create(ctx, ls); err != nil {
		return false, "", err
	}
	g.took(epoch, ls)
	return true, "", nil
}

// missing notes that a take found the Lease missing at now, and returns from when it may be
// created: at once unless createAfter is set; zero if not yet known.
func (g *leaseGuard) missing(now time.Time) time.Time {
	g.mu.Lock()
	if g.missingSince.IsZero() {
		g.missingSince = now
	}
	g.mu.Unlock()
	if g.createAfter == nil {
		return now
	}
	return g.creatableAt()
}

// creatableAt is from when the Lease, known missing, may be created; zero if not yet known.
func (g *leaseGuard) creatableAt() time.Time {
	g.mu.Lock()
	since := g.missingSince
	g.mu.Unlock()
	if since.IsZero() || g.createAfter == nil {
		return since
	}
	return g.createAfter(since)
}

// found notes that a read found the Lease.
func (g *leaseGuard) found() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.missingSince = time.Time{}
}

// confirm reads the Lease and reports whether it still names this peer: false if it is gone
// (deleted by hand) or names another peer, and then the fence is forgotten.
func (g *leaseGuard) confirm(ctx context.Context) (bool, error) {
	ls := &coordinationv1.Lease{}
	err := g.c.Get(ctx, types.NamespacedName{Namespace: g.ns, Name: g.nm}, ls)
	if err != nil && !apierrors.IsNotFound(err) {
		return true, err
	}
	if err == nil && ptr.Deref(ls.Spec.HolderIdentity, "") == g.id {
		return true, nil
	}
	g.forget()
	return false, nil
}

// hasPending reports whether a read naming a dead holder waits for a later list to agree.
func (g *leaseGuard) hasPending() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pending != nil
}

func (g *leaseGuard) setPending(ls *coordinationv1.Lease) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pending, g.pendingAt = ls, time.Now()
}

// claim notes, before a write that may name this peer, that the server may name it.
func (g *leaseGuard) claim() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.claimedOnServer = true
}

func (g *leaseGuard) took(epoch uint64, ls *coordinationv1.Lease) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held, g.epoch, g.lease, g.pending, g.missingSince = true, epoch, ls, nil, time.Time{}
}

// forget marks the fence not held, without writing anything: no write may rely on it any more.
func (g *leaseGuard) forget() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = false
}

// Release clears the holder if the Lease still names this peer, so that the next owner may
// take it at once, and then marks the fence not claimed; it does not when a request fails.
// The fence must be forgotten first.
func (g *leaseGuard) Release(ctx context.Context) {
	g.mu.Lock()
	ls := g.lease
	g.mu.Unlock()

	key := types.NamespacedName{Namespace: g.ns, Name: g.nm}
	for attempt := 0; ; attempt++ {
		if ls == nil {
			ls = &coordinationv1.Lease{}
			err := g.c.Get(ctx, key, ls)
			if apierrors.IsNotFound(err) {
				break
			}
			if err != nil {
				return
			}
		}
		if ptr.Deref(ls.Spec.HolderIdentity, "") != g.id {
			break
		}
		ls = ls.DeepCopy()
		ls.Spec.HolderIdentity = ptr.To("")
		err := g.c.Update(ctx, ls)
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || attempt > 0 {
			return
		}
		ls = nil // changed since we last saw it: read it again
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.held {
		g.claimedOnServer, g.lease = false, nil
	}
}

// renewedLately reports whether a Lease written by a peer of an earlier version, which renews
// its fences (any duration but fenceDuration), was renewed within its duration by the local
// clock: such a fence is taken only once it is dead by both rules, its holder's and ours, so a
// rolling upgrade never makes two writers.
func renewedLately(ls *coordinationv1.Lease, now metav1.MicroTime) bool {
	d := time.Duration(ptr.Deref(ls.Spec.LeaseDurationSeconds, 0)) * time.Second
	if d == fenceDuration || ls.Spec.RenewTime == nil {
		return false
	}
	return now.Before(ptr.To(metav1.NewMicroTime(ls.Spec.RenewTime.Add(d))))
}
