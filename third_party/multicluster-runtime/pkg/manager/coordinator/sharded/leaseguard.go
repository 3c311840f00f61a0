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

package sharded

import (
	"context"
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
//     as a precondition, if the Lease is free, already names this peer, or names a peer that
//     dead reports dead (certainly not acting any more). The fence is then held in epoch.
//
//   - The Lease is not renewed: the fence is valid while it is held in the current epoch of
//     this peer's own peer Lease and that Lease is valid (peers.Registry.Validity). Another
//     peer takes it over only once it judges this peer dead by its peer Lease, which happens
//     only after this peer's validity has ended; a peer that may have been judged dead starts
//     a new epoch, which voids every fence it held before.
//
//   - release(ctx) clears the holder if the Lease still names this peer (best-effort).
//
//   - Thread-safety: all methods are safe for concurrent use; at most one of take and release
//     runs at a time (the coordinator's busy flag).
//
// RBAC: the caller's client must be allowed to get/create/update Leases in namespace `ns`.
type leaseGuard struct {
	c      client.Client
	ns, nm string
	id     string

	mu sync.Mutex
	// held: the Lease names this peer since take succeeded in epoch; false after release.
	held  bool
	epoch uint64
	// lease is the Lease as this peer last read or wrote it (nil: unknown).
	lease *coordinationv1.Lease
}

// newLeaseGuard builds a guard; it does not contact the API server.
func newLeaseGuard(c client.Client, ns, name, id string) *leaseGuard {
	return &leaseGuard{c: c, ns: ns, nm: name, id: id}
}

// heldIn reports whether the fence was taken in epoch and not released since.
func (g *leaseGuard) heldIn(epoch uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held && g.epoch == epoch
}

// Held reports whether the guard holds the Lease, in whatever epoch.
func (g *leaseGuard) Held() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

// take takes the Lease for this peer in epoch unless another peer that is not dead holds it,
// and reports whether it did, and the holder it found otherwise.
func (g *leaseGuard) take(ctx context.Context, epoch uint64, dead func(id string) bool) (ok bool, holder string, err error) {
	key := types.NamespacedName{Namespace: g.ns, Name: g.nm}
	now := metav1.NowMicro()
	ls := &coordinationv1.Lease{}
	err = g.c.Get(ctx, key, ls)
	switch {
	case apierrors.IsNotFound(err):
		ls = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: g.nm},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(g.id),
				LeaseDurationSeconds: ptr.To(int32(fenceDuration / time.Second)),
				AcquireTime:          &now,
				RenewTime:            &now,
			},
		}
		if err := g.c.Create(ctx, ls); err != nil {
			return false, "", err
		}
	case err != nil:
		return false, "", err
	default:
		holder = ptr.Deref(ls.Spec.HolderIdentity, "")
		if holder != "" && holder != g.id && (!dead(holder) || renewedLately(ls, now)) {
			return false, holder, nil
		}
		if holder != g.id {
			ls.Spec.LeaseTransitions = ptr.To(ptr.Deref(ls.Spec.LeaseTransitions, 0) + 1)
		}
		// Written even when it names this peer already: taking it with the resourceVersion
		// read as a precondition is what makes it this epoch's, against a peer that judged an
		// earlier epoch of ours dead and is taking it at the same time.
		ls.Spec.HolderIdentity = ptr.To(g.id)
		ls.Spec.LeaseDurationSeconds = ptr.To(int32(fenceDuration / time.Second))
		ls.Spec.AcquireTime = &now
		ls.Spec.RenewTime = &now
		if err := g.c.Update(ctx, ls); err != nil {
			return false, holder, err
		}
	}
	g.mu.Lock()
	g.held, g.epoch, g.lease = true, epoch, ls
	g.mu.Unlock()
	return true, "", nil
}

// forget marks the fence not held, without writing anything: no write may rely on it any more.
func (g *leaseGuard) forget() {
	g.mu.Lock()
	g.held = false
	g.mu.Unlock()
}

// Release marks the fence not held and clears the holder if the Lease still names this peer:
// the next owner may take it at once. Best-effort; safe to call multiple times.
func (g *leaseGuard) Release(ctx context.Context) {
	g.mu.Lock()
	ls := g.lease
	g.held, g.lease = false, nil
	g.mu.Unlock()

	key := types.NamespacedName{Namespace: g.ns, Name: g.nm}
	for range 2 {
		if ls == nil {
			ls = &coordinationv1.Lease{}
			if err := g.c.Get(ctx, key, ls); err != nil {
				return
			}
		}
		if ptr.Deref(ls.Spec.HolderIdentity, "") != g.id {
			return
		}
		ls = ls.DeepCopy()
		ls.Spec.HolderIdentity = ptr.To("")
		err := g.c.Update(ctx, ls)
		if !apierrors.IsConflict(err) {
			return
		}
		ls = nil // changed since we last saw it: read it again
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
