package coordinator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// startCoordinator returns a coordinator of peer-0 alone, fencing in ns, whose sharder and
// registry the test drives, with aware added; it runs until the test ends.
func startCoordinator(t *testing.T, ns string, opts ...Option) (*Coordinator, *stubSharder, *stubRegistry, *engagedAware) {
	t.Helper()
	reg := newStubRegistry(selfID)
	sh := &stubSharder{}
	sh.own.Store(true)
	cfg := Config{
		FenceNS: ns, FencePrefix: "shard", PerClusterLease: true,
		LeaseDuration: 3 * time.Second, LeaseRenew: time.Second, FenceThrottle: 50 * time.Millisecond,
		PeerPrefix: "peer", PeerWeight: 1, Probe: 10 * time.Millisecond,
	}
	c := New(kube, logr.Discard(), append([]Option{withConfig(cfg), WithPeerRegistry(reg), WithSharder(sh)}, opts...)...)
	aware := newEngagedAware()
	c.AddAware(aware)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := c.Runnable().Start(ctx); err != nil {
			t.Errorf("coordinator: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return c, sh, reg, aware
}

// mayWrite reports whether a write to the cluster may leave now.
func mayWrite(c *Coordinator, name multicluster.ClusterName) func() bool {
	return func() bool {
		end, ok := c.BeginWrite(name)
		if ok {
			end()
		}
		return ok
	}
}

// zooHolder returns the holder of the fence of the cluster zoo, "" if it has none or none
// exists.
func zooHolder(ctx context.Context, c *Coordinator, ns string) func() string {
	return func() string {
		ls, err := getLease(ctx, ns, c.fenceName("zoo"))
		if err != nil {
			return ""
		}
		return ptr.Deref(ls.Spec.HolderIdentity, "")
	}
}

// TestStartsWhenShouldOwnAndFenceTaken: a cluster this peer should run is started once its
// fence is taken, and writes to it may leave from then on, never before.
func TestStartsWhenShouldOwnAndFenceTaken(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	c, _, _, aware := startCoordinator(t, ns)
	g.Expect(c.BeginWrite("zoo")).Error().To(BeFalse(), "not engaged")

	g.Expect(c.Engage(ctx, "zoo", nil)).To(Succeed())
	g.Eventually(func() int { return len(aware.engagements("zoo")) }).WithTimeout(timeout).WithPolling(interval).Should(Equal(1))
	g.Expect(zooHolder(ctx, c, ns)()).To(Equal(selfID), "started only once its fence was taken")
	g.Expect(mayWrite(c, "zoo")()).To(BeTrue())
	g.Consistently(func() int { return len(aware.engagements("zoo")) }).WithTimeout(holdFor).WithPolling(interval).Should(Equal(1), "started once")
}

// TestStopsAndReleasesOnceWritesEnd: a cluster this peer should not run any more is stopped at
// once (no write begins, its work's context ends), and its fence is released only once the
// writes in flight have ended, so that the next owner never writes beside the last write of
// this one. Upstream released the fence at once.
func TestStopsAndReleasesOnceWritesEnd(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	c, sh, _, aware := startCoordinator(t, ns)
	g.Expect(c.Engage(ctx, "zoo", nil)).To(Succeed())
	g.Eventually(mayWrite(c, "zoo")).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	end, ok := c.BeginWrite("zoo")
	g.Expect(ok).To(BeTrue())

	sh.own.Store(false)
	c.recompute()
	g.Expect(mayWrite(c, "zoo")()).To(BeFalse(), "stopped: no write begins")
	g.Eventually(aware.engagements("zoo")[0].Done()).WithTimeout(timeout).Should(BeClosed())
	g.Consistently(zooHolder(ctx, c, ns)).WithTimeout(holdFor).WithPolling(interval).Should(Equal(selfID), "held while a write is in flight")

	end()
	g.Eventually(zooHolder(ctx, c, ns)).WithTimeout(timeout).WithPolling(interval).Should(BeEmpty(), "released once the write ended")
}

// TestNewEpochVoidsFences: once this peer may have been judged dead (a new epoch of its peer
// Lease), no write leaves under a fence taken before, even before the coordinator's next
// decision; the cluster is then stopped, its fence taken again in the new epoch, and started
// again.
func TestNewEpochVoidsFences(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	c, _, reg, aware := startCoordinator(t, ns)
	g.Expect(c.Engage(ctx, "zoo", nil)).To(Succeed())
	g.Eventually(mayWrite(c, "zoo")).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	before, err := getLease(ctx, ns, c.fenceName("zoo"))
	g.Expect(err).NotTo(HaveOccurred())

	reg.newEpoch()
	g.Expect(mayWrite(c, "zoo")()).To(BeFalse(), "void at once")
	g.Eventually(func() int { return len(aware.engagements("zoo")) }).WithTimeout(timeout).WithPolling(interval).Should(Equal(2), "restarted")
	g.Expect(aware.engagements("zoo")[0].Done()).To(BeClosed(), "the first start stopped")
	g.Eventually(mayWrite(c, "zoo")).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	after, err := getLease(ctx, ns, c.fenceName("zoo"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.ResourceVersion).NotTo(Equal(before.ResourceVersion), "taken again in the new epoch")
}

// TestInvalidPeerWritesNothing: while this peer's own Lease is not valid, no write leaves and
// no fence is taken.
func TestInvalidPeerWritesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	c, _, reg, aware := startCoordinator(t, ns)
	reg.mu.Lock()
	reg.valid = false
	reg.mu.Unlock()
	g.Expect(c.Engage(ctx, "zoo", nil)).To(Succeed())
	g.Consistently(func() int { return len(aware.engagements("zoo")) }).WithTimeout(holdFor).WithPolling(interval).Should(BeZero())
	g.Expect(zooHolder(ctx, c, ns)()).To(BeEmpty(), "no fence taken")

	reg.mu.Lock()
	reg.valid = true
	reg.mu.Unlock()
	g.Eventually(mayWrite(c, "zoo")).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
}

// TestClusterGoneReleasesFence: when the cluster goes away (its engagement context ends), its
// work stops with it, at once, and its fence is released.
func TestClusterGoneReleasesFence(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	c, _, _, aware := startCoordinator(t, ns)
	clusterCtx, leave := context.WithCancel(t.Context())
	g.Expect(c.Engage(clusterCtx, "zoo", nil)).To(Succeed())
	g.Eventually(mayWrite(c, "zoo")).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())

	leave()
	g.Expect(aware.engagements("zoo")[0].Done()).To(BeClosed(), "stopped with the cluster, synchronously")
	// The coordinator notices in a callback of its own: until then a write may still begin, under
	// the fence, which is released only after.
	g.Eventually(mayWrite(c, "zoo")).WithTimeout(timeout).WithPolling(interval).Should(BeFalse())
	g.Eventually(zooHolder(t.Context(), c, ns)).WithTimeout(timeout).WithPolling(interval).Should(BeEmpty())
}

// TestElection: the only peer is elected, takes the election fence and calls OnElected; a new
// epoch voids the election until the fence is taken again.
func TestElection(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	c, _, reg, _ := startCoordinator(t, ns, WithElection("leader"))
	elected := make(chan struct{}, 4)
	c.OnElected(func() { elected <- struct{}{} })
	g.Eventually(c.Leading).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	g.Eventually(elected).WithTimeout(timeout).Should(Receive())
	ls, err := getLease(t.Context(), ns, "leader")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ls.Spec.HolderIdentity).To(HaveValue(Equal(selfID)))

	reg.newEpoch()
	g.Expect(c.Leading()).To(BeFalse(), "void at once")
	g.Eventually(c.Leading).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	g.Eventually(elected).WithTimeout(timeout).Should(Receive(), "elected again")
}

// TestInvalidPeerReleasesNothing: a fence this peer should not hold any more is released only
// while its own Lease is valid. The fence names only its peer ID, which a process started with
// the same ID may hold meanwhile, and its fences with it.
func TestInvalidPeerReleasesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	c, sh, reg, _ := startCoordinator(t, ns)
	g.Expect(c.Engage(ctx, "zoo", nil)).To(Succeed())
	g.Eventually(mayWrite(c, "zoo")).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())

	reg.mu.Lock()
	reg.valid = false
	reg.mu.Unlock()
	sh.own.Store(false)
	g.Eventually(mayWrite(c, "zoo")).WithTimeout(timeout).WithPolling(interval).Should(BeFalse())
	g.Consistently(zooHolder(ctx, c, ns)).WithTimeout(holdFor).WithPolling(interval).Should(Equal(selfID), "released while not valid")

	reg.mu.Lock()
	reg.valid = true
	reg.mu.Unlock()
	g.Eventually(zooHolder(ctx, c, ns)).WithTimeout(timeout).WithPolling(interval).Should(BeEmpty(), "released once valid")
}

// TestMissingFenceCreatedOnceViewSettled: a cluster's fence that does not exist (never taken, or
// deleted by hand while a peer holds it) is created only once this peer's view of the live peers
// has been settled for a lease duration and a renew period: a peer that ran the cluster under
// an earlier view has stopped by then, and its writes in flight have ended.
func TestMissingFenceCreatedOnceViewSettled(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	c, _, reg, _ := startCoordinator(t, ns)
	changed := time.Now()
	reg.mu.Lock()
	reg.stable, reg.notAlone = changed, true
	reg.mu.Unlock()
	g.Expect(c.Engage(ctx, "zoo", nil)).To(Succeed())

	settled := c.cfg.LeaseDuration + c.cfg.LeaseRenew
	g.Eventually(mayWrite(c, "zoo")).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	g.Expect(time.Since(changed)).To(BeNumerically(">=", settled), "created before the view was settled")
	ls, err := getLease(ctx, ns, c.fenceName("zoo"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ls.CreationTimestamp.Time).To(BeTemporally(">=", changed.Add(settled).Truncate(time.Second)))
}

// TestElectionFenceDeletedByHand: the elected peer reads its election fence every renew period.
// Deleted by hand, it stops leading within about a renew period, and the fence is created again
// only a lease duration after it was found missing: by then any peer that held it has found it
// missing and stopped leading.
func TestElectionFenceDeletedByHand(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	c, _, reg, _ := startCoordinator(t, ns, WithElection("leader"))
	g.Eventually(c.Leading).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	reg.mu.Lock()
	reg.notAlone = true // another peer may be live, and elected
	reg.mu.Unlock()

	g.Expect(kube.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leader"}})).To(Succeed())
	deleted := time.Now()
	g.Eventually(c.Leading).WithTimeout(2*c.cfg.LeaseRenew).WithPolling(interval).Should(BeFalse(), "still leading")
	stepped := time.Since(deleted)
	g.Eventually(c.Leading).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "elected again")
	g.Expect(time.Since(deleted)).To(BeNumerically(">=", c.cfg.LeaseDuration), "created again too soon")
	ls, err := getLease(ctx, ns, "leader")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ls.Spec.HolderIdentity).To(HaveValue(Equal(selfID)))
	t.Logf("stopped leading %s after the deletion, elected again %s after it", stepped.Round(time.Millisecond), time.Since(deleted).Round(time.Millisecond))
}
