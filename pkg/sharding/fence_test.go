package sharding

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/netproxy"
)

// memberLeases returns the resourceVersion and holder of each member's Lease.
func memberLeases(ctx context.Context, g Gomega, kube client.Client, ns string, members []string) map[string][2]string {
	out := map[string][2]string{}
	for _, m := range members {
		lease := &coordinationv1.Lease{}
		g.Expect(kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: hubv1alpha1.MemberLeasePrefix + "-" + m}, lease)).To(Succeed())
		out[m] = [2]string{lease.ResourceVersion, *lease.Spec.HolderIdentity}
	}
	return out
}

// fenced reports whether r lets a write to member leave now.
func fenced(r Replica, member string) func() bool {
	return func() bool { return r.MayWrite(member) }
}

// allFenced waits until every member is fenced by exactly one of the replicas, its owner.
func allFenced(g Gomega, members []string, rs ...Replica) {
	for _, m := range members {
		g.Eventually(func(g Gomega) {
			writers := 0
			for _, r := range rs {
				if r.MayWrite(m) {
					writers++
					g.Expect(r.Owns(m)).To(BeTrue(), "member %s fenced by %s, which does not own it", m, r.ID)
				}
			}
			g.Expect(writers).To(Equal(1), "member %s", m)
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "member %s", m)
	}
}

// watchWriters samples, every millisecond until stop, whether two of the replicas would let a
// write to the same member leave at once; stop returns what it saw.
func watchWriters(members []string, rs ...Replica) (stop func() []string) {
	done := make(chan struct{})
	var seen []string
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			for _, m := range members {
				var writers []string
				for _, r := range rs {
					if r.MayWrite(m) {
						writers = append(writers, r.ID)
					}
				}
				if len(writers) > 1 && len(seen) < 10 {
					seen = append(seen, fmt.Sprintf("%s: member %s writable by %v", time.Now().Format(time.StampMicro), m, writers))
				}
			}
		}
	})
	return func() []string {
		close(done)
		wg.Wait()
		return seen
	}
}

// TestSteadyStateWritesNoMemberLease: once the members are shared, the replicas renew their
// peer Leases only; no member's Lease is written for several lease durations, and each
// replica keeps fencing its members all along.
func TestSteadyStateWritesNoMemberLease(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	const ns = "steady"
	hub, scheme, kube := startHubWithNamespace(t, ns)

	// Leases of 6 s (renewed every 2 s, valid 4 s after), so that a renewal made late by a
	// loaded machine, which rightly costs a take of each fence again, does not blur the count.
	const lease = 2 * MinLeaseDuration
	members := []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"}
	r0, stop0, _ := startReplicaWith(ctx, t, hub.Config, scheme, Options{Namespace: ns, ReplicaID: "r0", LeaseDuration: lease}, members)
	defer stop0()
	r1, stop1, _ := startReplicaWith(ctx, t, hub.Config, scheme, Options{Namespace: ns, ReplicaID: "r1", LeaseDuration: lease}, members)
	defer stop1()
	overlaps := watchWriters(members, r0, r1)
	g.Eventually(r0.LiveReplicas).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{"r0", "r1"}))
	g.Eventually(r1.LiveReplicas).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{"r0", "r1"}))
	allFenced(g, members, r0, r1)

	before := memberLeases(ctx, g, kube, ns, members)
	peer := &coordinationv1.Lease{}
	g.Expect(kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: hubv1alpha1.PeerLeasePrefix + "-r0"}, peer)).To(Succeed())
	peerVersion := peer.ResourceVersion
	g.Consistently(func(g Gomega) {
		for _, m := range members {
			g.Expect([]bool{r0.MayWrite(m), r1.MayWrite(m)}).To(ConsistOf(true, false), "member %s: exactly one writer of r0, r1", m)
		}
	}).WithTimeout(3 * lease).WithPolling(interval).Should(Succeed())
	g.Expect(memberLeases(ctx, g, kube, ns, members)).To(Equal(before), "no member Lease written in the steady state")
	g.Expect(kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: hubv1alpha1.PeerLeasePrefix + "-r0"}, peer)).To(Succeed())
	g.Expect(peer.ResourceVersion).NotTo(Equal(peerVersion), "the peer Lease is renewed")
	g.Expect(overlaps()).To(BeEmpty(), "two writers of a member at once")
}

// TestPartitionedReplicaLosesItsMembers: a replica whose connection to the hub cluster is
// black-holed stops writing once its peer Lease's validity ends, before the other replica
// judges it dead and takes its members over with a write of their Leases each; when the cut
// heals, its earlier fences are void (a new epoch) and it takes back only what it owns again.
func TestPartitionedReplicaLosesItsMembers(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	const ns = "partition"
	hub, scheme, kube := startHubWithNamespace(t, ns)

	proxy, err := netproxy.Start(hostOf(t, hub.Config))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = proxy.Close() }()
	cut := rest.CopyConfig(hub.Config)
	cut.Host = "https://" + proxy.Addr()

	members := []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"}
	r0, stop0, _ := startReplica(ctx, t, cut, scheme, ns, "r0", members)
	defer stop0()
	r1, stop1, _ := startReplica(ctx, t, hub.Config, scheme, ns, "r1", members)
	defer stop1()
	overlaps := watchWriters(members, r0, r1)
	g.Eventually(r0.LiveReplicas).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{"r0", "r1"}))
	g.Eventually(r1.LiveReplicas).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{"r0", "r1"}))
	allFenced(g, members, r0, r1)
	var of0 []string
	for _, m := range members {
		if r0.MayWrite(m) {
			of0 = append(of0, m)
		}
	}
	g.Expect(of0).NotTo(BeEmpty(), "r0 manages some members")

	proxy.Partition()
	cutAt := time.Now()
	// r0 stops writing within its validity (a lease duration less a renew period after its
	// last renewal), without a word from the hub.
	for _, m := range of0 {
		g.Eventually(fenced(r0, m)).WithTimeout(MinLeaseDuration+time.Second).WithPolling(interval).Should(BeFalse(), "member %s", m)
	}
	stopped := time.Since(cutAt)
	// r1 judges r0 dead and takes every member over; never while r0 may still write.
	for _, m := range of0 {
		g.Eventually(func(g Gomega) {
			g.Expect(r1.MayWrite(m)).To(BeTrue())
			g.Expect(r0.MayWrite(m)).To(BeFalse())
		}).WithTimeout(timeout).WithPolling(interval/10).Should(Succeed(), "member %s", m)
	}
	t.Logf("r0 stopped writing %s after the cut; r1 took its %d members over %s after it", stopped, len(of0), time.Since(cutAt))
	g.Expect(r1.LiveReplicas()).To(Equal([]string{"r1"}))

	proxy.Heal()
	g.Eventually(r0.LiveReplicas).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{"r0", "r1"}))
	g.Eventually(r1.LiveReplicas).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{"r0", "r1"}))
	allFenced(g, members, r0, r1)
	for m, lease := range memberLeases(ctx, g, kube, ns, of0) {
		g.Expect(lease[1]).To(Equal("r0"), "member %s: r0 took back what it owns", m)
	}
	g.Expect(overlaps()).To(BeEmpty(), "two writers of a member at once")
}

// startHubWithNamespace starts a control plane for the Leases, with the namespace ns, and
// returns it, its scheme and a client of it.
func startHubWithNamespace(t *testing.T, ns string) (*controlplane.ControlPlane, *runtime.Scheme, client.Client) {
	t.Helper()
	if err := controlplane.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	hub, scheme := startHub(t)
	kube, err := client.New(hub.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return hub, scheme, kube
}

// hostOf returns the host:port of cfg's API server.
func hostOf(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// TestDuplicateReplicaIDNeverWrites: a second replica started with the id of a live one owns no
// member and may write to none, not even for a moment, while the first keeps fencing every
// member; the peer Lease stays the first's.
func TestDuplicateReplicaIDNeverWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	const ns = "duplicate"
	hub, scheme, kube := startHubWithNamespace(t, ns)
	members := []string{"m0", "m1", "m2", "m3"}
	opts := Options{Namespace: ns, ReplicaID: "r0", LeaseDuration: 2 * MinLeaseDuration}
	first, stopFirst, _ := startReplicaWith(ctx, t, hub.Config, scheme, opts, members)
	defer stopFirst()
	allFenced(g, members, first)
	peer := &coordinationv1.Lease{}
	g.Expect(kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: hubv1alpha1.PeerLeasePrefix + "-r0"}, peer)).To(Succeed())
	holder := peer.Annotations

	second, stopSecond, _ := startReplicaWith(ctx, t, hub.Config, scheme, opts, members)
	defer stopSecond()
	g.Consistently(func(g Gomega) {
		for _, m := range members {
			g.Expect(second.Owns(m)).To(BeFalse(), "member %s owned by the duplicate", m)
			g.Expect(second.MayWrite(m)).To(BeFalse(), "member %s writable by the duplicate", m)
		}
	}).WithTimeout(2 * opts.LeaseDuration).WithPolling(time.Millisecond).Should(Succeed())
	allFenced(g, members, first, second)
	g.Expect(kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: hubv1alpha1.PeerLeasePrefix + "-r0"}, peer)).To(Succeed())
	g.Expect(peer.Annotations).To(Equal(holder), "the peer Lease is the first's")
}

// TestDeletedMemberLeaseNeverMakesTwoWriters: the members' Leases are deleted by hand while r0
// holds them all; r1 then joins. r1 creates the Lease of a member it owns only once its view of
// the replicas has settled, after r0 stopped that member: never two writers of a member.
func TestDeletedMemberLeaseNeverMakesTwoWriters(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	const ns = "deleted"
	hub, scheme, kube := startHubWithNamespace(t, ns)
	members := []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"}
	r0, stop0, _ := startReplica(ctx, t, hub.Config, scheme, ns, "r0", members)
	defer stop0()
	allFenced(g, members, r0)
	for _, m := range members {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hubv1alpha1.MemberLeasePrefix + "-" + m}}
		g.Expect(kube.Delete(ctx, lease)).To(Succeed())
	}

	r1, stop1, _ := startReplica(ctx, t, hub.Config, scheme, ns, "r1", members)
	defer stop1()
	overlaps := watchWriters(members, r0, r1) // before r1 can take anything: it has yet to renew its Lease
	g.Eventually(r0.LiveReplicas).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{"r0", "r1"}))
	g.Eventually(r1.LiveReplicas).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{"r0", "r1"}))
	allFenced(g, members, r0, r1)
	g.Expect(overlaps()).To(BeEmpty(), "two writers of a member at once")
	var of1 []string
	for _, m := range members {
		if r1.Owns(m) {
			of1 = append(of1, m)
		}
	}
	g.Expect(of1).NotTo(BeEmpty(), "r1 owns no member")
	for m, lease := range memberLeases(ctx, g, kube, ns, of1) {
		g.Expect(lease[1]).To(Equal("r1"), "member %s: its Lease created again by its new owner", m)
	}
}
