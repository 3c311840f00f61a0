package sharded

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"

	"configbundle.dev/hub/internal/testing/netproxy"
)

// TestReplicaPartitionedFromTheHub: one replica's connection to the hub's API server is
// black-holed (a partition from the hub only: its members stay reachable). Its members are
// taken over once its peer Lease is judged dead, it writes to none of them after its validity
// has ended, and the other replicas' members are healed as promptly as ever meanwhile. When the
// cut heals it takes back its share, through the Leases.
func TestReplicaPartitionedFromTheHub(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	settledOwners(t, "r0", "r1", "r2")
	victim := "r2"
	alive := others(victim)

	// Restart the victim with its hub connection through a proxy that can black-hole it.
	proxy, err := netproxy.Start(fl.HubPlane.Host())
	Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = proxy.Close() })
	fl.StopHub(victim, syscall.SIGTERM)
	t.Cleanup(func() {
		fl.StopHub(victim, syscall.SIGTERM)
		restore(t, victim)
	})
	_, err = fl.StartReplica(ctx, victim, "--kubeconfig="+proxiedKubeconfig(t, proxy.Addr()))
	Expect(err).NotTo(HaveOccurred())
	own := settledOwners(t, "r0", "r1", "r2")
	lost := membersOf(own, victim)
	Expect(lost).NotTo(BeEmpty(), "replica %s manages no member: %v", victim, own)

	proxy.Partition()
	cut := time.Now()
	// Drift a member of another replica at once: its owner heals it as promptly as ever.
	kept := membersOf(own, alive[0])[0]
	Expect(drift(kept, "drifted during the partition")).To(Succeed())
	expectHealed(t, kept)
	healedKept := time.Since(cut)

	taken := settledOwners(t, alive...)
	tookOver := time.Since(cut)
	// The victim's validity ends two thirds of a lease after its last renewal began, so its last
	// write to a member answered by then at the latest.
	lapse := cut.Add(leaseDuration * 2 / 3)
	d := startDrifting(lost, 20*time.Millisecond)
	Eventually(func() int { return len(healsOf(healsIn(t, cut, time.Now(), alive...), lost)) }).
		WithTimeout(timeout).WithPolling(interval).Should(BeNumerically(">=", len(lost)))
	d.Stop()
	expectHealed(t, lost...)
	for _, m := range lost {
		Expect(taken[m]).NotTo(Equal(victim))
		for _, w := range replicaWrites(t, m, victim) {
			Expect(w.At).To(BeTemporally("<=", lapse), "member %s: %s wrote %s %s/%s at %s, after its Lease lapsed at %s",
				m, victim, w.Verb, w.Resource, w.Name, w.At.Format(time.StampMicro), lapse.Format(time.StampMicro))
		}
	}
	t.Logf("replica %s cut off from the hub: a drift in %s (of %s) healed %s after the cut; its members %v taken over %s after it (bound: %s)",
		victim, kept, alive[0], healedKept.Round(time.Millisecond), lost, tookOver.Round(time.Millisecond), takeoverBound)
	Expect(tookOver).To(BeNumerically("<=", takeoverBound+probeInterval), "takeover")
	Expect(healedKept).To(BeNumerically("<", leaseDuration/2), "the other replicas are not held up")

	proxy.Heal()
	back := settledOwners(t, "r0", "r1", "r2")
	Expect(membersOf(back, victim)).To(Equal(lost), "replica %s takes back its share", victim)
	expectHealed(t, names...)
	t.Logf("hand-overs in the members' audit logs, none with two writers: %d", expectOneWriterAtATime(t, names...))
}

// proxiedKubeconfig writes the hub's kubeconfig with its server at addr, and returns its path.
func proxiedKubeconfig(t *testing.T, addr string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(fl.HubKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + addr
	}
	path := filepath.Join(t.TempDir(), "hub-proxied.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
