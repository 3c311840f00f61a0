package sharding

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/pkg/sharding/election"
)

// Timeouts of the tests, generous for a loaded two-core machine.
const (
	// startTimeout bounds the start of the control plane.
	startTimeout = 3 * time.Minute
	// timeout bounds an Eventually: replicas seeing each other, taking and handing over Leases
	// (a few Lease renewals of MinLeaseDuration).
	timeout = 30 * time.Second
	// interval is the polling interval of Eventually.
	interval = 100 * time.Millisecond
)

// TestUnshardedReplica: a Replica that New did not make owns every member, lets every write
// leave, sees no live replicas and asks nothing of the manager.
func TestUnshardedReplica(t *testing.T) {
	for _, r := range []Replica{{}, {ID: "hub-0"}} {
		g := NewWithT(t)
		g.Expect(r.Sharded()).To(BeFalse())
		g.Expect(r.Owns("member-1")).To(BeTrue())
		end, err := r.Fence("member-1")
		g.Expect(err).NotTo(HaveOccurred())
		end()
		g.Expect(r.LiveReplicas()).To(BeEmpty())
		g.Expect(r.ManagerOptions()).To(BeEmpty())
	}
}

// TestLeaderFencedByItsLease: an unsharded Replica given the leader's Lease (FencedBy) refuses
// every write while the Lease is not certainly held (here: never acquired), and says so; it
// still owns every member and does the hub-wide work, which the manager's election gates.
func TestLeaderFencedByItsLease(t *testing.T) {
	g := NewWithT(t)
	lock, err := election.NewLock(&rest.Config{Host: "https://127.0.0.1:1"}, "ns", hubv1alpha1.LeaderElectionID, "hub-0_x", election.Of(DefaultLeaseDuration), nil)
	g.Expect(err).NotTo(HaveOccurred())
	r := Replica{ID: "hub-0"}.FencedBy(lock)
	g.Expect(r.Sharded()).To(BeFalse())
	g.Expect(r.Fenced()).To(BeTrue())
	g.Expect(r.Owns("member-1")).To(BeTrue())
	g.Expect(r.Leading()).To(BeTrue())
	g.Expect(r.MayWrite("member-1")).To(BeFalse())
	_, err = r.Fence("member-1")
	g.Expect(err).To(MatchError("replica hub-0 is not sure it holds the Lease ns/" + hubv1alpha1.LeaderElectionID + " (any more)"))
	g.Expect(Replica{ID: "hub-0"}.Fenced()).To(BeFalse())
	g.Expect(Replica{ID: "hub-0"}.MayWrite("member-1")).To(BeTrue())
}

// TestDefaultReplicaID: the replica's identity defaults to $POD_NAME (the downward API in
// config/default), else the hostname.
func TestDefaultReplicaID(t *testing.T) {
	t.Setenv("POD_NAME", "configbundle-hub-7d9f8-x2x4z")
	if got := DefaultReplicaID(); got != "configbundle-hub-7d9f8-x2x4z" {
		t.Errorf("replica id %q, want the pod name", got)
	}
	t.Setenv("POD_NAME", "")
	if got := DefaultReplicaID(); got != hostname() || got == "" {
		t.Errorf("replica id %q, want the hostname %q", got, hostname())
	}
}

// TestReplicasShareMembersByTheirLeases: two sharded replicas on a real API server announce
// themselves with their peer Leases, own every member exactly once between them, take the
// Lease of each member they own and fence the writes to the others; when one leaves, the other
// rebalances and takes over every member.
func TestReplicasShareMembersByTheirLeases(t *testing.T) {
	if err := controlplane.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	hub, scheme := startHub(t)
	kube, err := client.New(hub.Config, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	const ns = "sharding-test"
	g.Expect(kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())

	members := []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"}
	r0, stop0, rebalances0 := startReplica(ctx, t, hub.Config, scheme, ns, "r0", members)
	defer stop0()
	r1, stop1, _ := startReplica(ctx, t, hub.Config, scheme, ns, "r1", members)

	g.Eventually(r0.LiveReplicas).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{"r0", "r1"}))
	g.Eventually(r1.LiveReplicas).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{"r0", "r1"}))
	g.Eventually(rebalances0).WithTimeout(timeout).WithPolling(interval).Should(ContainElement("r0,r1"))
	for _, id := range []string{"r0", "r1"} {
		lease := &coordinationv1.Lease{}
		g.Expect(kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: hubv1alpha1.PeerLeasePrefix + "-" + id}, lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).To(HaveValue(Equal(id)))
	}
	for _, m := range members {
		g.Expect(r0.Owns(m)).NotTo(Equal(r1.Owns(m)), "member %s: owned by exactly one replica", m)
		owner, other := r0, r1
		if r1.Owns(m) {
			owner, other = r1, r0
		}
		g.Eventually(func(g Gomega) {
			lease := &coordinationv1.Lease{}
			g.Expect(kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: hubv1alpha1.MemberLeasePrefix + "-" + m}, lease)).To(Succeed())
			g.Expect(lease.Spec.HolderIdentity).To(HaveValue(Equal(owner.ID)))
			end, err := owner.Fence(m)
			g.Expect(err).NotTo(HaveOccurred())
			end()
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "member %s", m)
		_, err := other.Fence(m)
		g.Expect(err).To(MatchError(fmt.Sprintf("replica %s does not hold the Lease %s-%s (any more)", other.ID, hubv1alpha1.MemberLeasePrefix, m)))
	}

	// One of them does the hub-wide work, holding the Lease configbundle-hub as its replica id.
	g.Eventually(func() bool { return r0.Leading() != r1.Leading() }).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	leader := r0
	if r1.Leading() {
		leader = r1
	}
	elected := &coordinationv1.Lease{}
	g.Expect(kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: hubv1alpha1.LeaderElectionID}, elected)).To(Succeed())
	g.Expect(elected.Spec.HolderIdentity).To(HaveValue(Equal(leader.ID)))

	stop1() // a clean leave: r1 releases its Leases
	g.Eventually(r0.LiveReplicas).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{"r0"}))
	g.Eventually(rebalances0).WithTimeout(timeout).WithPolling(interval).Should(ContainElement("r0"))
	for _, m := range members {
		g.Expect(r0.Owns(m)).To(BeTrue(), "member %s", m)
		g.Eventually(func() error {
			end, err := r0.Fence(m)
			if err == nil {
				end()
			}
			return err
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "member %s", m)
	}
	g.Eventually(r0.Leading).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "r0 elected once r1 left")
}

// startHub starts a control plane for the Leases, stopped when t ends.
func startHub(t *testing.T) (*controlplane.ControlPlane, *runtime.Scheme) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cp := controlplane.MustStart(t, "hub", startTimeout)
	return cp, scheme
}

// startReplica starts a sharded replica id engaged with members, as the manager would run its
// coordinator and its Rebalancer; stop ends it and waits until it has released its Leases.
// rebalances returns the live replicas of each rebalance so far.
func startReplica(ctx context.Context, t *testing.T, cfg *rest.Config, scheme *runtime.Scheme, ns, id string, members []string) (r Replica, stop func(), rebalances func() []string) {
	t.Helper()
	return startReplicaWith(ctx, t, cfg, scheme, Options{Namespace: ns, ReplicaID: id, LeaseDuration: MinLeaseDuration}, members)
}

// startReplicaWith is startReplica with the replica's options.
func startReplicaWith(ctx context.Context, t *testing.T, cfg *rest.Config, scheme *runtime.Scheme, opts Options, members []string) (r Replica, stop func(), rebalances func() []string) {
	t.Helper()
	id := opts.ReplicaID
	r, err := New(cfg, scheme, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var seen []string
	rebalance := func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, strings.Join(r.LiveReplicas(), ","))
		return nil
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		// A duplicate of a live replica's id stops on its own; the tests check what it did.
		if err := r.shards.coord.Runnable().Start(ctx); err != nil && !errors.Is(err, ErrDuplicateReplica) {
			t.Errorf("replica %s: coordinator: %v", id, err)
		}
	})
	wg.Go(func() {
		if err := r.Rebalancer(rebalance).Start(ctx); err != nil {
			t.Errorf("replica %s: rebalancer: %v", id, err)
		}
	})
	for _, m := range members {
		if err := r.shards.coord.Engage(ctx, multicluster.ClusterName(m), nil); err != nil {
			t.Fatal(err)
		}
	}
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	rebalances = func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
	return r, stop, rebalances
}
