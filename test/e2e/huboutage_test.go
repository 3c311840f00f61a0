package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/internal/testing/hubprocess"
	"configbundle.dev/hub/internal/testing/netproxy"
	"configbundle.dev/hub/pkg/sharding"
	"configbundle.dev/hub/pkg/sharding/election"
)

// The bounds of the tests of an outage of the hub cluster (enforcement must survive
// the hub cluster).
const (
	// hubPause is how long the hub's API server is paused (SIGSTOP) under one replica, and
	// shardedPause under a sharded one.
	hubPause     = 30 * time.Second
	shardedPause = 25 * time.Second
	// healWithinOutage bounds a heal while the hub cluster is down or cut off: "within seconds".
	healWithinOutage = 3 * time.Second
	// catchUpBound is what the contract allows, after the hub answers again, until every member is
	// healed and reported again.
	catchUpBound = 30 * time.Second
	// haLease is the --lease-duration of the replicas of these tests, and shortCut a cut of the
	// hub connection shorter than it, which must cost nothing: within 40% of it, the lease less
	// the margin, a renew period and a request timeout (election.Timings).
	haLease  = 10 * time.Second
	shortCut = 3 * time.Second
	// dupLease is the --lease-duration of the two processes of one replica id: the duplicate
	// exits a lease duration after it finds out.
	dupLease = 5 * time.Second
	// shardedCut is a cut a sharded replica's fences survive with the default lease: its peer
	// Lease is renewed every third of it and valid for two thirds.
	shardedCut = 4 * time.Second
)

// TestFaultHubPausedOneReplica: the hub cluster's API server is paused for 30 s under one
// replica without leader election. Drift in a member is healed within seconds all along, the
// hub process never exits, and the statuses are right within a probe of the resume.
func TestFaultHubPausedOneReplica(t *testing.T) {
	g := NewWithT(t)
	const member, want = "m1", "through a hub outage"
	joined(t, member)
	b := createBundle(g, member, "hub-outage", "web", want)
	t.Cleanup(func() {
		g.Expect(fleet.DeleteBundles(context.Background(), fl.Member(member).Client, "hub-outage", timeout)).To(Succeed())
	})
	hub := fl.HubProcess(fleet.HubName)

	resume := pauseHub(t)
	paused := time.Now()
	var heals []time.Duration
	for time.Since(paused) < hubPause-healWithinOutage-quietPeriod {
		tamper(g, member, b)
		tampered := time.Now()
		g.Eventually(fl.Member(member).Message(b)).WithTimeout(healWithinOutage).WithPolling(10 * time.Millisecond).Should(Equal(want))
		heals = append(heals, time.Since(tampered))
		g.Consistently(hub.Exited).WithTimeout(quietPeriod).WithPolling(interval).Should(BeFalse())
	}
	g.Consistently(hub.Exited).WithTimeout(time.Until(paused.Add(hubPause))).WithPolling(interval).Should(BeFalse())
	t.Logf("%d drifts healed while the hub's API server was paused: %v", len(heals), heals)
	resumed := resume()

	// The member's and the Fleet's status count every heal, within a probe and a report.
	g.Eventually(func(g Gomega) {
		reported(g, member, resumed)
	}).WithTimeout(probeInterval + reportSlack).WithPolling(interval).Should(Succeed())
	t.Logf("resume → statuses right: %v", time.Since(resumed).Round(time.Millisecond))
	g.Expect(hub.Exited()).To(BeFalse())
}

// TestFaultHubPausedShardedReplica: a --sharded replica, alone, through a 25 s pause of the hub
// cluster's API server. It does not exit (losing the election of the hub-wide work ends
// nothing), and heals again right after: what drifted during the pause at once.
func TestFaultHubPausedShardedReplica(t *testing.T) {
	g := NewWithT(t)
	const member, want, replica = "m1", "through a hub outage, sharded", "ha0"
	joined(t, member)
	b := createBundle(g, member, "hub-outage-sharded", "web", want)
	t.Cleanup(func() {
		g.Expect(fleet.DeleteBundles(context.Background(), fl.Member(member).Client, "hub-outage-sharded", timeout)).To(Succeed())
	})
	hub := runInstead(t, replica, "--sharded", "--replica-id="+replica, "--lease-duration="+haLease.String())
	g.Eventually(func(g Gomega) { g.Expect(fl.MemberCluster(member)(g).Status.Replica).To(Equal(replica)) }).
		WithTimeout(joinTimeout).WithPolling(interval).Should(Succeed())
	tamper(g, member, b)
	g.Eventually(fl.Member(member).Message(b)).WithTimeout(healWithinOutage).WithPolling(interval).Should(Equal(want))

	// Drift once the member's fence has lapsed (a lease duration into the pause): it waits for
	// the hub cluster.
	resume := pauseHub(t)
	g.Consistently(hub.Exited).WithTimeout(haLease).WithPolling(interval).Should(BeFalse())
	tamper(g, member, b)
	g.Consistently(hub.Exited).WithTimeout(shardedPause - haLease).WithPolling(interval).Should(BeFalse())
	g.Expect(fl.Member(member).Message(b)(g)).To(Equal("tampered"), "healed with no fence")
	resumed := resume()
	g.Eventually(fl.Member(member).Message(b)).WithTimeout(catchUpBound).WithPolling(10 * time.Millisecond).Should(Equal(want))
	t.Logf("resume → the drift of the pause healed: %v", time.Since(resumed).Round(time.Millisecond))
	tamper(g, member, b)
	tampered := time.Now()
	g.Eventually(fl.Member(member).Message(b)).WithTimeout(healWithinOutage).WithPolling(10 * time.Millisecond).Should(Equal(want))
	t.Logf("a drift after the resume healed in %v", time.Since(tampered).Round(time.Millisecond))
	g.Eventually(func(g Gomega) {
		reported(g, member, resumed)
	}).WithTimeout(catchUpBound).WithPolling(interval).Should(Succeed())
	t.Logf("resume → statuses right: %v", time.Since(resumed).Round(time.Millisecond))
	g.Expect(hub.Exited()).To(BeFalse())
}

// TestFaultHubCutLeaderElect: two replicas with --leader-elect; the leader reaches the hub
// cluster through a proxy, which cuts it off. A cut shorter than the lease costs nothing: the
// leader keeps its Lease and its members (its dead connection is replaced). A longer cut hands
// the Lease over without two writers: the leader stops writing to the members when it can no
// longer be sure it holds the Lease, before the other can take it, and the other has every
// member healed and reported within 30 s.
func TestFaultHubCutLeaderElect(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const want = "through a cut of the leader"
	joined(t, "m1", quietMember)
	b := createBundle(g, quietMember, "hub-cut", "web", want)
	t.Cleanup(func() {
		g.Expect(fleet.DeleteBundles(ctx, fl.Member(quietMember).Client, "hub-cut", timeout)).To(Succeed())
	})

	through := proxiedHub(t, g)
	proxy, kubeconfig := through.proxy, through.path
	leaseArgs := []string{"--leader-elect", "--lease-duration=" + haLease.String()}

	runInstead(t, "") // no hub of the suite's while the two run
	leader, err := hubprocess.Start(ctx, hubprocess.Options{Binary: fl.Binary, Kubeconfig: kubeconfig, LogPath: fl.LogPath("leader-a"),
		Args: append(append(append([]string{}, hubArgs...), leaseArgs...), "--replica-id=a"), ReadyTimeout: timeout})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { leader.Stop(syscall.SIGTERM) })
	g.Eventually(holder).WithTimeout(joinTimeout).WithPolling(interval).Should(Equal("a"))
	standby, err := fl.StartHub(ctx, "leader-b", append(leaseArgs, "--replica-id=b")...)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { fl.StopHub("leader-b", syscall.SIGTERM) })
	g.Eventually(reportedBy("a", "m1", quietMember)).WithTimeout(joinTimeout).WithPolling(interval).Should(Succeed())

	// A short cut, its connections left dead: nothing changes, drift is healed all along.
	before := lease(g)
	proxy.Partition()
	cut := time.Now()
	tamper(g, quietMember, b)
	g.Eventually(fl.Member(quietMember).Message(b)).WithTimeout(healWithinOutage).WithPolling(10 * time.Millisecond).Should(Equal(want))
	g.Consistently(leader.Exited).WithTimeout(time.Until(cut.Add(shortCut))).WithPolling(interval).Should(BeFalse())
	proxy.HealLeavingDead()
	healed := time.Now()
	g.Eventually(func(g Gomega) {
		g.Expect(lease(g).Spec.RenewTime.After(healed)).To(BeTrue())
	}).WithTimeout(haLease).WithPolling(interval).Should(Succeed())
	t.Logf("a cut of %v: the Lease renewed again %v after it", shortCut, time.Since(healed).Round(time.Millisecond))
	after := lease(g)
	g.Expect(after.Spec.HolderIdentity).To(Equal(before.Spec.HolderIdentity))
	g.Expect(after.Spec.LeaseTransitions).To(Equal(before.Spec.LeaseTransitions))
	g.Consistently(func(g Gomega) {
		g.Expect(leader.Exited()).To(BeFalse())
		g.Expect(holder(g)).To(Equal("a"))
		reportedBy("a", "m1", quietMember)(g)
	}).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())

	// A cut longer than the lease: the standby takes over; drift keeps coming meanwhile.
	proxy.Partition()
	var lastRenewal time.Time
	for _, w := range hubLeaseWrites(g) {
		lastRenewal = w.At // the leader's, to the last: the standby writes none until it takes over
	}
	g.Eventually(func(g Gomega) {
		tamper(g, quietMember, b)
		g.Expect(holder(g)).To(Equal("b"))
	}).WithTimeout(3 * haLease).WithPolling(500 * time.Millisecond).Should(Succeed())
	takeover := lease(g).Spec.AcquireTime.Time
	g.Eventually(func(g Gomega) {
		reportedBy("b", "m1", quietMember)(g)
		g.Expect(fl.Member(quietMember).Message(b)(g)).To(Equal(want))
	}).WithTimeout(catchUpBound).WithPolling(interval).Should(Succeed())
	t.Logf("takeover → every member healed and reported: %v", time.Since(takeover).Round(time.Millisecond))
	g.Eventually(leader.Exited).WithTimeout(haLease).WithPolling(interval).Should(BeTrue(), "the cut-off leader exits when its Lease lapses")
	g.Expect(standby.Exited()).To(BeFalse())

	// No two writers: from when the leader's fence lapsed (its last renewal plus the lease
	// duration, less the margin) until the standby took over, no one wrote to the member.
	fenced := lastRenewal.Add(haLease - election.Of(haLease).Margin + writeSlack)
	g.Expect(takeover.After(fenced)).To(BeTrue(), "the takeover at %v after the leader's fence lapsed at %v", takeover, fenced)
	g.Expect(writesBetween(g, fl.Member(quietMember).Plane, fenced, takeover, byHub)).To(BeEmpty(),
		"writes between the leader's last renewal at %s (fence lapsed at %s) and the takeover at %s",
		lastRenewal.Format(time.StampMilli), fenced.Format(time.StampMilli), takeover.Format(time.StampMilli))
	t.Logf("the leader's last renewal %v, its fence lapsed %v later, the takeover %v after that",
		lastRenewal.Format(time.StampMilli), (haLease - election.Of(haLease).Margin).Round(time.Millisecond), takeover.Sub(fenced).Round(time.Millisecond))
}

// TestDuplicateLeaderElectReplica: a second process started with --leader-elect and the
// replica id of the live leader never leads and writes nothing to any member: a drift made while
// it runs is healed once, by the leader. It records DuplicateReplica on the Fleet and exits 1; the
// leader keeps the Lease and its members.
func TestDuplicateLeaderElectReplica(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const member, want = quietMember, "beside a duplicate leader" // an audited member
	joined(t, member)
	b := createBundle(g, member, "dup-leader", "web", want)
	t.Cleanup(func() {
		g.Expect(fleet.DeleteBundles(ctx, fl.Member(member).Client, "dup-leader", timeout)).To(Succeed())
	})
	args := []string{"--leader-elect", "--lease-duration=" + dupLease.String(), "--replica-id=same"}
	leader := runInstead(t, "same-a", args...)
	g.Eventually(holder).WithTimeout(joinTimeout).WithPolling(interval).Should(Equal("same"))
	g.Eventually(reportedBy("same", member)).WithTimeout(joinTimeout).WithPolling(interval).Should(Succeed())
	held := lease(g).Annotations[election.IncarnationAnnotation]

	from := time.Now()
	dup, err := fl.StartHub(ctx, "same-b", args...)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { fl.StopHub("same-b", syscall.SIGKILL) })
	tamper(g, member, b)
	g.Eventually(fl.Member(member).Message(b)).WithTimeout(timeout).WithPolling(interval).Should(Equal(want))
	g.Eventually(func(g Gomega) []string {
		var notes []string
		for _, e := range fl.EventsOn("Fleet", "", hubv1alpha1.FleetName)(g) {
			if e.Reason == hubv1alpha1.DuplicateReplicaEvent && e.EventTime.After(from.Add(-time.Second)) {
				g.Expect(e.Related).NotTo(BeNil())
				g.Expect(e.Related.Name).To(Equal(hubv1alpha1.LeaderElectionID))
				notes = append(notes, e.Note)
			}
		}
		return notes
	}).WithTimeout(timeout).WithPolling(interval).Should(HaveLen(1))
	scrape, err := fl.ScrapeHub("same-b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fleet.Sample(scrape, "configbundle_hub_duplicate_replica")).To(BeEquivalentTo(1))
	g.Eventually(dup.Exited).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	g.Expect(dup.ExitCode()).To(Equal(1))
	to := time.Now()

	// One write of the ConfigMap, the leader's heal, none refused; the leader runs on.
	var writes []string
	for _, w := range writesBetween(g, fl.Member(member).Plane, from, to, byHub) {
		if strings.Contains(w, "configmaps/") {
			writes = append(writes, w)
		}
	}
	g.Expect(writes).To(HaveLen(1), "the hub's writes of ConfigMaps in %s while the duplicate ran", member)
	g.Expect(writesBetween(g, fl.Member(member).Plane, from, to, func(w controlplane.Write) bool { return byHub(w) && w.Code >= 300 })).
		To(BeEmpty(), "writes of the hub that %s refused", member)
	g.Expect(leader.Exited()).To(BeFalse())
	g.Expect(holder(g)).To(Equal("same"))
	g.Expect(lease(g).Annotations[election.IncarnationAnnotation]).To(Equal(held))
}

// TestFaultHubCutShardedReplica: a --sharded replica (the default 15 s lease) reaches the hub
// cluster through a proxy that cuts it off for shardedCut, its connections then left dead. The
// member keeps its Lease, not written at all (a member's fence is valid while its holder's peer
// Lease is, and that survives a cut of a third of the lease), and is healed all along; once the
// cut heals the replica renews its peer Lease again, and runs on.
func TestFaultHubCutShardedReplica(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const member, want, replica = "m1", "through a cut, sharded", "cut0"
	joined(t, member)
	b := createBundle(g, member, "hub-cut-sharded", "web", want)
	t.Cleanup(func() {
		g.Expect(fleet.DeleteBundles(ctx, fl.Member(member).Client, "hub-cut-sharded", timeout)).To(Succeed())
	})
	kubeconfig := proxiedHub(t, g)
	runInstead(t, "")
	hub, err := hubprocess.Start(ctx, hubprocess.Options{Binary: fl.Binary, Kubeconfig: kubeconfig.path, LogPath: fl.LogPath(replica),
		Args: append(append([]string{}, hubArgs...), "--sharded", "--replica-id="+replica), ReadyTimeout: timeout})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { hub.Stop(syscall.SIGTERM) })
	g.Eventually(reportedBy(replica, member)).WithTimeout(joinTimeout).WithPolling(interval).Should(Succeed())
	memberLease := func(g Gomega) *coordinationv1.Lease {
		l := &coordinationv1.Lease{}
		g.Expect(fl.Hub.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: hubv1alpha1.MemberLeasePrefix + "-" + member}, l)).To(Succeed())
		return l
	}
	g.Eventually(func(g Gomega) string { return ptr.Deref(memberLease(g).Spec.HolderIdentity, "") }).
		WithTimeout(timeout).WithPolling(interval).Should(Equal(replica))
	before := memberLease(g)

	kubeconfig.proxy.Partition()
	cut := time.Now()
	tamper(g, member, b)
	g.Eventually(fl.Member(member).Message(b)).WithTimeout(healWithinOutage).WithPolling(10 * time.Millisecond).Should(Equal(want))
	g.Consistently(hub.Exited).WithTimeout(time.Until(cut.Add(shardedCut))).WithPolling(interval).Should(BeFalse())
	kubeconfig.proxy.HealLeavingDead()
	healed := time.Now()
	g.Eventually(func(g Gomega) {
		peer := &coordinationv1.Lease{}
		g.Expect(fl.Hub.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: hubv1alpha1.PeerLeasePrefix + "-" + replica}, peer)).To(Succeed())
		g.Expect(peer.Spec.RenewTime.After(healed)).To(BeTrue())
	}).WithTimeout(sharding.DefaultLeaseDuration).WithPolling(interval).Should(Succeed())
	t.Logf("a cut of %v: the replica's peer Lease renewed again %v after it", shardedCut, time.Since(healed).Round(time.Millisecond))
	after := memberLease(g)
	g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "the member's Lease was kept, not written")
	tamper(g, member, b)
	g.Eventually(fl.Member(member).Message(b)).WithTimeout(healWithinOutage).WithPolling(10 * time.Millisecond).Should(Equal(want))
	g.Expect(hub.Exited()).To(BeFalse())
}

// proxied is a kubeconfig of the hub cluster through a proxy that can cut it off.
type proxied struct {
	path  string
	proxy *netproxy.Proxy
}

// proxiedHub writes a kubeconfig of the hub cluster through a new proxy, closed when t ends.
func proxiedHub(t *testing.T, g Gomega) proxied {
	proxy, err := netproxy.Start(fl.HubPlane.Host())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(proxy.Close()).To(Succeed()) })
	cfg := rest.CopyConfig(fl.HubPlane.Config)
	cfg.Host = "https://" + proxy.Addr() // the hub's serving certificate is for 127.0.0.1
	path := filepath.Join(t.TempDir(), "hub-through-proxy.kubeconfig")
	g.Expect(os.WriteFile(path, fleet.KubeconfigFor(cfg), 0o600)).To(Succeed())
	return proxied{path: path, proxy: proxy}
}

// writeSlack is how long after its fence let it leave a write may land in a member's audit log.
const writeSlack = 200 * time.Millisecond

// pauseHub pauses the hub cluster's API server (SIGSTOP) and returns the function that resumes
// it and says when; the test's cleanup resumes it if the test did not.
func pauseHub(t *testing.T) (resume func() time.Time) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(fl.HubPlane.Pause()).To(Succeed())
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = fl.HubPlane.Resume()
		}
	})
	return func() time.Time {
		g.Expect(fl.HubPlane.Resume()).To(Succeed())
		resumed = true
		return time.Now()
	}
}

// runInstead stops the suite's hub and, unless name is empty, starts the hub process name with
// args instead; the test's cleanup stops it and starts the suite's hub again.
func runInstead(t *testing.T, name string, args ...string) *hubprocess.Process {
	t.Helper()
	g := NewWithT(t)
	fl.StopHub(fleet.HubName, syscall.SIGTERM)
	t.Cleanup(func() {
		fl.StopHub(name, syscall.SIGTERM)
		g.Expect(startHub()).To(Succeed())
	})
	if name == "" {
		return nil
	}
	p, err := fl.StartHub(context.Background(), name, args...)
	g.Expect(err).NotTo(HaveOccurred())
	return p
}

// reported checks that member's MemberCluster is Ready and counts the heals of its bundles, and
// that the Fleet counts the heals of every member, with a heartbeat since.
func reported(g Gomega, member string, since time.Time) {
	bundles := &configbundlev1alpha1.ConfigBundleList{}
	g.Expect(fl.Member(member).Client.List(context.Background(), bundles)).To(Succeed())
	var heals int64
	for _, b := range bundles.Items {
		heals += b.Status.Heals
	}
	mc := fl.MemberCluster(member)(g)
	g.Expect(mc).To(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason))
	g.Expect(mc.Status.Heals).To(BeEquivalentTo(heals), "member %s's heals", member)
	list := &hubv1alpha1.MemberClusterList{}
	g.Expect(fl.Hub.List(context.Background(), list)).To(Succeed())
	var all int64
	for _, mc := range list.Items {
		all += mc.Status.Heals
	}
	f := fl.Fleet(g)
	g.Expect(f.Status.Heals).To(BeEquivalentTo(all), "the Fleet's heals")
	g.Expect(f.Status.HeartbeatTime).NotTo(BeNil())
	g.Expect(f.Status.HeartbeatTime.Time).To(BeTemporally(">=", since.Truncate(time.Second)), "the Fleet's heartbeat")
}

// reportedBy returns a check that replica reports every MemberCluster, and that the members
// given are Ready.
func reportedBy(replica string, ready ...string) func(Gomega) {
	return func(g Gomega) {
		list := &hubv1alpha1.MemberClusterList{}
		g.Expect(fl.Hub.List(context.Background(), list)).To(Succeed())
		for _, mc := range list.Items {
			g.Expect(mc.Status.Replica).To(Equal(replica), "member %s's replica", mc.Name)
		}
		for _, name := range ready {
			g.Expect(fl.MemberCluster(name)(g)).To(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason))
		}
	}
}

// lease returns the leader-election Lease.
func lease(g Gomega) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	g.Expect(fl.Hub.Get(context.Background(), client.ObjectKey{Namespace: secretNS, Name: hubv1alpha1.LeaderElectionID}, l)).To(Succeed())
	return l
}

// holder returns the identity holding the leader-election Lease.
func holder(g Gomega) string { return ptr.Deref(lease(g).Spec.HolderIdentity, "") }

// hubLeaseWrites returns the writes of the leader-election Lease the hub cluster served so far.
func hubLeaseWrites(g Gomega) []controlplane.Write {
	writes, err := fl.HubPlane.Writes()
	g.Expect(err).NotTo(HaveOccurred())
	var out []controlplane.Write
	for _, w := range writes {
		if w.Resource == "leases" && w.Name == hubv1alpha1.LeaderElectionID && strings.HasPrefix(w.UserAgent, hubv1alpha1.UserAgentPrefix) && w.Code < 300 {
			out = append(out, w)
		}
	}
	return out
}

// byHub keeps the writes of the hub.
func byHub(w controlplane.Write) bool {
	return strings.HasPrefix(w.UserAgent, hubv1alpha1.UserAgentPrefix)
}
