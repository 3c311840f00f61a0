package coordinator

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"

	"configbundle.dev/hub/pkg/sharding/sharder"
)

// TestOptions: each option sets what it names, over the defaults.
func TestOptions(t *testing.T) {
	reg := newStubRegistry("x")
	reg.self.Weight = 7
	hrw := sharder.NewHRW()
	for _, tc := range []struct {
		name  string
		opt   Option
		check func(g Gomega, c *Coordinator)
	}{
		{name: "peer registry", opt: WithPeerRegistry(reg), check: func(g Gomega, c *Coordinator) {
			g.Expect(c.peers).To(BeIdenticalTo(reg))
			g.Expect(c.self).To(Equal(sharder.PeerInfo{ID: "x", Weight: 7}), "self from the registry")
		}},
		{name: "sharder", opt: WithSharder(hrw), check: func(g Gomega, c *Coordinator) {
			g.Expect(c.sharder).To(BeIdenticalTo(hrw))
		}},
		{name: "shard lease", opt: WithShardLease("ns", "name"), check: func(g Gomega, c *Coordinator) {
			g.Expect([]string{c.cfg.FenceNS, c.cfg.FencePrefix}).To(Equal([]string{"ns", "name"}))
			g.Expect(c.fenceName("Zoo_1")).To(Equal("name-zoo-1"), "one fence per cluster, a DNS-1123 name")
		}},
		{name: "one fence", opt: WithPerClusterLease(false), check: func(g Gomega, c *Coordinator) {
			g.Expect(c.fenceName("zoo")).To(Equal("mcr-shard"))
		}},
		{name: "lease timings", opt: WithLeaseTimings(30*time.Second, 10*time.Second, 750*time.Millisecond), check: func(g Gomega, c *Coordinator) {
			g.Expect([]time.Duration{c.cfg.LeaseDuration, c.cfg.LeaseRenew, c.cfg.FenceThrottle}).To(Equal([]time.Duration{30 * time.Second, 10 * time.Second, 750 * time.Millisecond}))
			g.Expect(c.requestTimeout()).To(Equal(5*time.Second), "every request bounded by half a renew period")
		}},
		{name: "intervals", opt: WithSynchronizationIntervals(5*time.Second, 15*time.Second), check: func(g Gomega, c *Coordinator) {
			g.Expect([]time.Duration{c.cfg.Probe, c.cfg.Rehash}).To(Equal([]time.Duration{5 * time.Second, 15 * time.Second}))
		}},
		{name: "peer weight", opt: WithPeerWeight(3), check: func(g Gomega, c *Coordinator) {
			g.Expect(c.cfg.PeerWeight).To(BeEquivalentTo(3))
		}},
		{name: "no election", opt: func(*Coordinator) {}, check: func(g Gomega, c *Coordinator) {
			g.Expect(c.elected).To(BeNil())
			g.Expect(c.Leading()).To(BeFalse())
		}},
		{name: "election", opt: WithElection("leader"), check: func(g Gomega, c *Coordinator) {
			g.Expect(c.elected).NotTo(BeNil())
			g.Expect(c.elected.fence.nm).To(Equal("leader"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(NewWithT(t), New(nil, logr.Discard(), tc.opt))
		})
	}
}
