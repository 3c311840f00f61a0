package peers

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"configbundle.dev/hub/pkg/sharding/sharder"
)

const (
	prefix  = "peer"
	selfID  = "peer-0"
	otherID = "peer-1"
)

// selfLease returns selfID's peer Lease in ns.
func selfLease(ctx context.Context, g Gomega, ns string) *coordv1.Lease {
	ls := &coordv1.Lease{}
	g.Expect(kube.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: prefix + "-" + selfID}, ls)).To(Succeed())
	return ls
}

// peerLease is a peer Lease named for id, labelled for prefix p, held by holder.
func peerLease(ns, p, id, holder string, weight string) *coordv1.Lease {
	renew := metav1.NewMicroTime(time.Now().Add(-time.Hour))
	return &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: p + "-" + id,
			Labels:      map[string]string{labelPartOf: partOfValue, labelPeer: "true", labelPrefix: p},
			Annotations: map[string]string{annotWeight: weight},
		},
		Spec: coordv1.LeaseSpec{HolderIdentity: ptr.To(holder), RenewTime: &renew, LeaseDurationSeconds: ptr.To(int32(3))},
	}
}

// TestRenewSelfLeaseCreatesThenUpdates: the first renewal creates this peer's Lease, labelled
// and annotated with its weight, and makes it valid in epoch 1 until the start of the renewal
// plus the ttl less one renew period; the next one updates it in the same epoch.
func TestRenewSelfLeaseCreatesThenUpdates(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	r := NewLeaseRegistry(kube, ns, prefix, selfID, 2, logr.Discard(), WithLeaseTimings(30*time.Second, 10*time.Second)).(*leaseRegistry)
	_, _, valid := r.Validity()
	g.Expect(valid).To(BeFalse(), "not valid before the first renewal")

	start := time.Now()
	g.Expect(r.renewSelfLease(ctx, start)).To(Succeed())
	ls := selfLease(ctx, g, ns)
	g.Expect(ls.Spec.HolderIdentity).To(HaveValue(Equal(selfID)))
	g.Expect(ls.Spec.LeaseDurationSeconds).To(HaveValue(BeEquivalentTo(30)))
	g.Expect(ls.Labels).To(HaveKeyWithValue(labelPeer, "true"))
	g.Expect(ls.Labels).To(HaveKeyWithValue(labelPrefix, prefix))
	g.Expect(ls.Annotations).To(HaveKeyWithValue(annotWeight, "2"))
	epoch, until, valid := r.Validity()
	g.Expect(valid).To(BeTrue())
	g.Expect(epoch).To(BeEquivalentTo(1))
	g.Expect(until).To(BeTemporally("==", start.Add(20*time.Second)))

	r.self.Weight = 3
	g.Expect(r.renewSelfLease(ctx, time.Now())).To(Succeed())
	ls2 := selfLease(ctx, g, ns)
	g.Expect(ls2.Annotations).To(HaveKeyWithValue(annotWeight, "3"))
	g.Expect(ls2.Spec.RenewTime.After(ls.Spec.RenewTime.Time)).To(BeTrue(), "RenewTime advanced")
	epoch, _, _ = r.Validity()
	g.Expect(epoch).To(BeEquivalentTo(1), "renewed in time: the same epoch")
}

// TestRenewalStartsNewEpoch: a renewal that began after the validity ended, or that found the
// Lease taken by someone else, starts a new epoch, which voids every fence taken before.
func TestRenewalStartsNewEpoch(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	r := NewLeaseRegistry(kube, ns, prefix, selfID, 1, logr.Discard(), WithLeaseTimings(30*time.Second, 10*time.Second)).(*leaseRegistry)
	g.Expect(r.renewSelfLease(ctx, time.Now())).To(Succeed())

	g.Expect(r.renewSelfLease(ctx, time.Now().Add(time.Minute))).To(Succeed()) // began after the validity ended
	epoch, _, _ := r.Validity()
	g.Expect(epoch).To(BeEquivalentTo(2), "late renewal")

	ls := selfLease(ctx, g, ns)
	ls.Spec.HolderIdentity = ptr.To(otherID)
	g.Expect(kube.Update(ctx, ls)).To(Succeed())
	g.Expect(r.renewSelfLease(ctx, time.Now())).To(Succeed())
	epoch, _, valid := r.Validity()
	g.Expect(valid).To(BeTrue())
	g.Expect(epoch).To(BeEquivalentTo(3), "Lease found taken")
	g.Expect(selfLease(ctx, g, ns).Spec.HolderIdentity).To(HaveValue(Equal(selfID)), "taken back")
}

// TestRefreshPeersFiltersAndParses: once this peer has written its Lease, the snapshot holds it
// and the peers whose Leases carry its prefix, with their weights; a released Lease's peer is
// left out and dead. Upstream left out a Lease whose RenewTime was older than its duration;
// liveness is now judged on this peer's own clock, by a Lease seen unchanged for a ttl, so such
// a peer is live at first sight and dead only once a list a ttl later still shows it unchanged.
func TestRefreshPeersFiltersAndParses(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	for _, ls := range []*coordv1.Lease{
		peerLease(ns, prefix, otherID, otherID, "5"),
		peerLease(ns, prefix, "gone", "", "1"),
		peerLease(ns, "otherprefix", "x", "x", "1"),
	} {
		g.Expect(kube.Create(ctx, ls)).To(Succeed())
	}
	const ttl = time.Second
	r := NewLeaseRegistry(kube, ns, prefix, selfID, 1, logr.Discard(), WithLeaseTimings(ttl, ttl/3)).(*leaseRegistry)
	g.Expect(r.Snapshot()).To(BeEmpty(), "nothing before the first list")
	g.Expect(r.Dead(otherID, time.Time{})).To(BeFalse(), "nobody judged before the first list")
	g.Expect(r.refreshPeers(ctx)).To(Succeed())
	g.Expect(r.Snapshot()).To(BeEmpty(), "nothing before this peer wrote its Lease")

	g.Expect(r.renewSelfLease(ctx, time.Now())).To(Succeed())
	g.Expect(r.refreshPeers(ctx)).To(Succeed())
	g.Expect(r.Snapshot()).To(ConsistOf(sharder.PeerInfo{ID: selfID, Weight: 1}, sharder.PeerInfo{ID: otherID, Weight: 5}))
	g.Expect(r.Dead("gone", time.Time{})).To(BeTrue(), "released")
	g.Expect(r.Dead(otherID, time.Time{})).To(BeFalse(), "live at first sight, whatever its RenewTime")
	g.Expect(r.Dead(selfID, time.Time{})).To(BeFalse())

	listed := time.Now()
	g.Eventually(func(g Gomega) {
		g.Expect(r.refreshPeers(ctx)).To(Succeed())
		g.Expect(r.Dead(otherID, listed)).To(BeTrue())
	}).WithTimeout(timeout).WithPolling(ttl/4).Should(Succeed(), "dead once seen unchanged for a ttl")
	g.Expect(r.Snapshot()).To(ConsistOf(sharder.PeerInfo{ID: selfID, Weight: 1}))
}

// TestUnlistedPeerDeadOnlyAfterATtl: a peer no list has shown (it may have started after the
// last list, or its Lease was deleted while it still acts) is dead only once a list that
// started a ttl after the first question about it still does not show it.
func TestUnlistedPeerDeadOnlyAfterATtl(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	const ttl = time.Second
	r := NewLeaseRegistry(kube, ns, prefix, selfID, 1, logr.Discard(), WithLeaseTimings(ttl, ttl/3)).(*leaseRegistry)
	g.Expect(r.refreshPeers(ctx)).To(Succeed())
	asked := time.Now()
	g.Expect(r.Dead(otherID, time.Time{})).To(BeFalse(), "first question")
	g.Eventually(func(g Gomega) {
		g.Expect(r.refreshPeers(ctx)).To(Succeed())
		g.Expect(r.Dead(otherID, time.Time{})).To(BeTrue())
	}).WithTimeout(timeout).WithPolling(ttl / 4).Should(Succeed())
	g.Expect(time.Since(asked)).To(BeNumerically(">=", ttl))
}

// TestRunPublishesSelfAndReleasesOnStop: Run renews this peer's Lease and lists the peers; when
// its context ends it returns and releases the Lease (upstream left it to expire), so that the
// other peers take over at their next look, and this peer is not valid any more.
func TestRunPublishesSelfAndReleasesOnStop(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	r := NewLeaseRegistry(kube, ns, prefix, selfID, 1, logr.Discard(), WithLeaseTimings(3*time.Second, time.Second), WithRefreshInterval(50*time.Millisecond))
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(ctx) })
	defer func() {
		cancel()
		wg.Wait()
	}()
	g.Eventually(r.Snapshot).WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(sharder.PeerInfo{ID: selfID, Weight: 1}))
	g.Eventually(func() bool { _, _, ok := r.Validity(); return ok }).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	g.Expect(selfLease(t.Context(), g, ns).Spec.HolderIdentity).To(HaveValue(Equal(selfID)))

	cancel()
	wg.Wait()
	_, _, valid := r.Validity()
	g.Expect(valid).To(BeFalse())
	g.Expect(selfLease(t.Context(), g, ns).Spec.HolderIdentity).To(HaveValue(BeEmpty()), "released")
}
