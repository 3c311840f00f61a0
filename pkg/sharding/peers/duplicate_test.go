package peers

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"

	"configbundle.dev/hub/pkg/sharding/sharder"
)

// Timings of the duplicate tests: a ttl of 3 s, renewed every second, listed every 50 ms.
const (
	dupTTL   = 3 * time.Second
	dupRenew = time.Second
)

// TestDuplicatePeerIDActsOnNothingAndStops: a second process started with the peer ID of a live
// one finds its Lease held by another incarnation, acts on nothing (no snapshot, never valid),
// reports it once it sees the other renew the Lease, and Run returns ErrDuplicateID a ttl later,
// having written nothing: the first one holds its Lease and stays valid all along.
func TestDuplicatePeerIDActsOnNothingAndStops(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := newNamespace(t)
	first := newDupRegistry(ns, nil)
	run(t, first)
	g.Eventually(valid(first)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	lapsed := firstTime(t, func() bool { return !valid(first)() })

	reported := make(chan error, 1)
	var found time.Time // when it reported, written before the report is sent
	second := newDupRegistry(ns, func(err error) {
		found = time.Now()
		reported <- err
	})
	acted := firstTime(t, acting(second))
	started := time.Now()
	ended := run(t, second)

	var err error
	g.Eventually(reported).WithTimeout(timeout).Should(Receive(&err))
	g.Expect(err).To(MatchError(ErrDuplicateID))
	g.Expect(err.Error()).To(ContainSubstring(first.incarnation), "the report names the process that holds the Lease")
	var runErr error
	g.Eventually(ended).WithTimeout(timeout).Should(Receive(&runErr))
	g.Expect(runErr).To(MatchError(ErrDuplicateID))
	g.Expect(time.Since(found)).To(BeNumerically(">=", dupTTL), "Run returns a ttl after the report")
	g.Expect(acted()).To(BeZero(), "the second process acted")
	g.Expect(lapsed()).To(BeZero(), "the first process stopped being valid")
	g.Expect(selfLease(t.Context(), g, ns).Annotations).To(HaveKeyWithValue(annotIncarnation, first.incarnation))
	t.Logf("the duplicate found out %s after it started", found.Sub(started).Round(time.Millisecond))
}

// TestRestartedPeerTakesOverItsDeadIncarnation: a process restarted with the peer ID of one that
// died without releasing its Lease (a crash) acts on nothing until it has seen that Lease
// unchanged for its ttl, then takes it over in epoch 1: it is not locked out, and no report.
func TestRestartedPeerTakesOverItsDeadIncarnation(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := newNamespace(t)
	crashed := newDupRegistry(ns, nil)
	g.Expect(crashed.renewSelfLease(t.Context(), time.Now())).To(Succeed()) // and never again

	restarted := newDupRegistry(ns, func(err error) { t.Errorf("reported a dead incarnation as live: %v", err) })
	acted := firstTime(t, acting(restarted))
	started := time.Now()
	run(t, restarted)
	g.Eventually(valid(restarted)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	g.Expect(acted().Sub(started)).To(BeNumerically(">=", dupTTL), "acted before the dead one's Lease was unchanged for a ttl")
	epoch, _, _ := restarted.Validity()
	g.Expect(epoch).To(BeEquivalentTo(1))
	g.Expect(selfLease(t.Context(), g, ns).Annotations).To(HaveKeyWithValue(annotIncarnation, restarted.incarnation))
	g.Eventually(restarted.Snapshot).WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(sharder.PeerInfo{ID: selfID, Weight: 1}))
	t.Logf("the restarted process took its Lease over %s after it started", acted().Sub(started).Round(time.Millisecond))
}

// newDupRegistry is a registry of selfID in ns with the duplicate tests' timings, calling
// onDuplicate (if any) when it finds its peer ID taken.
func newDupRegistry(ns string, onDuplicate func(error)) *leaseRegistry {
	opts := []RegistryOption{WithLeaseTimings(dupTTL, dupRenew), WithRefreshInterval(50 * time.Millisecond)}
	if onDuplicate != nil {
		opts = append(opts, WithDuplicateHandler(onDuplicate))
	}
	return NewLeaseRegistry(kube, ns, prefix, selfID, 1, logr.Discard(), opts...).(*leaseRegistry)
}

// run runs r until the test ends (it then waits for Run to return); ended receives what Run
// returned.
func run(t *testing.T, r Registry) (ended <-chan error) {
	ctx, cancel := context.WithCancel(t.Context())
	out := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		out <- r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return out
}

// valid reports whether r may act on its fences now.
func valid(r Registry) func() bool {
	return func() bool {
		_, _, ok := r.Validity()
		return ok
	}
}

// acting reports whether r acts: it owns something (a snapshot) or may write (valid).
func acting(r Registry) func() bool {
	return func() bool { return len(r.Snapshot()) > 0 || valid(r)() }
}

// firstTime samples cond every millisecond until it holds or t ends; when returns the first time
// it held, zero if never so far.
func firstTime(t *testing.T, cond func() bool) (when func() time.Time) {
	var mu sync.Mutex
	var first time.Time
	go func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-t.Context().Done():
				return
			case <-tick.C:
			}
			mu.Lock()
			if first.IsZero() && cond() {
				first = time.Now()
			}
			done := !first.IsZero()
			mu.Unlock()
			if done {
				return
			}
		}
	}()
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return first
	}
}
