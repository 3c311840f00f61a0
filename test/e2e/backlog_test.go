package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"configbundle.dev/hub/internal/testing/fleet"
)

// Sizes and bounds of TestQuietMemberHealsDuringAnotherMembersBacklog.
const (
	// backlogBundles are created at once in the busy member.
	backlogBundles = 5000
	// backlogCreators create them in parallel.
	backlogCreators = 16
	// backlogWindow is how long the heals are measured from the start of the backlog, and
	// from a restarted hub's start; the backlog lasts longer on this machine.
	backlogWindow = 25 * time.Second
	// healBound is the contract's: every heal in the quiet member within 2 s.
	healBound = 2 * time.Second
	// tamperPeriod is how often the quiet member's ConfigMaps are tampered with, one at a time.
	tamperPeriod = time.Second
	// cleanupTimeout bounds the deletion of the backlog.
	cleanupTimeout = 3 * time.Minute
)

// TestQuietMemberHealsDuringAnotherMembersBacklog: one member (m3) gets 5,000 bundles at once
// while another (m2) has its ConfigMaps tampered with every second. Every heal in the quiet
// member takes less than 2 s while the hub works through the backlog, and again after a restart
// of the hub (with --leader-elect, the default install) that lists the busy member's bundles
// anew. The hub hands its workers fairly across members (package fairqueue); with one queue
// for all, first in first out, a heal waited behind the whole backlog (over 60 s).
func TestQuietMemberHealsDuringAnotherMembersBacklog(t *testing.T) {
	const quiet, busy, ns = "m2", "m3", "backlog"
	g, ctx := NewWithT(t), context.Background()
	joined(t, quiet, busy)
	var keys []client.ObjectKey
	t.Cleanup(func() { g.Expect(fleet.DeleteBundles(ctx, fl.Member(quiet).Client, ns, cleanupTimeout)).To(Succeed()) })
	for i := range 3 {
		keys = append(keys, client.ObjectKeyFromObject(createBundle(g, quiet, ns, fmt.Sprintf("quiet-%d", i), "desired")))
	}
	ensureNamespace(g, busy, ns)
	t.Cleanup(func() { g.Expect(fleet.DeleteBundles(ctx, fl.Member(busy).Client, ns, cleanupTimeout)).To(Succeed()) })

	start := time.Now()
	created := make(chan error, 1)
	var took time.Duration // the creation's, read after created
	go func() {
		err := fleet.CreateBundles(ctx, fl.Member(busy).Client, ns, "b", "backlog", backlogBundles, backlogCreators)
		took = time.Since(start)
		created <- err
	}()
	during := measureHeals(t, quiet, keys, start.Add(backlogWindow))
	g.Expect(<-created).To(Succeed())
	t.Logf("%d bundles created in %s in %s; heals in %s in the first %s (%d): %s", backlogBundles, busy, took.Round(time.Millisecond),
		quiet, backlogWindow, len(during), fleet.HealSummary(during))
	expectHealsWithin(t, during, "while the hub worked through the backlog")

	// A restart lists every bundle of the busy member again, through the same workers.
	fl.StopHub(fleet.HubName, syscall.SIGTERM)
	t.Cleanup(func() {
		fl.StopHub(fleet.HubName, syscall.SIGTERM)
		g.Expect(startHub()).To(Succeed())
	})
	_, err := fl.StartHub(ctx, fleet.HubName, "--leader-elect")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fl.WaitReported(ctx, fleet.HubName)).To(Succeed())
	after := measureHeals(t, quiet, keys, time.Now().Add(backlogWindow))
	t.Logf("heals in %s after a restart of the hub (--leader-elect) with %d bundles in %s (%d): %s", quiet, backlogBundles, busy, len(after), fleet.HealSummary(after))
	expectHealsWithin(t, after, "after a restart of the hub")
}

// measureHeals tampers with the ConfigMaps of keys in member, one every tamperPeriod, until
// deadline, and returns the heal latencies.
func measureHeals(t *testing.T, member string, keys []client.ObjectKey, deadline time.Time) []time.Duration {
	t.Helper()
	tp := fleet.StartTampering(fl.Member(member).Client, keys, func(client.ObjectKey) string { return "desired" }, tamperPeriod)
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	<-timer.C
	heals, err := tp.Stop()
	if err != nil {
		t.Fatalf("tampering with %s: %v", member, err)
	}
	return heals
}

func expectHealsWithin(t *testing.T, heals []time.Duration, when string) {
	t.Helper()
	if len(heals) < int(backlogWindow/tamperPeriod)/2 {
		t.Errorf("%s: only %d heals measured in %s", when, len(heals), backlogWindow)
	}
	for i, d := range heals {
		if d > healBound {
			t.Errorf("%s: heal %d of %d took %s, want at most %s", when, i+1, len(heals), d.Round(time.Millisecond), healBound)
		}
	}
}
