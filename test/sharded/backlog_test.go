package sharded

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"configbundle.dev/hub/internal/testing/fleet"
)

// Sizes and bounds of TestQuietMemberHealsDuringBacklogOnTheSameReplica.
const (
	backlogBundles   = 5000
	backlogCreators  = 16
	backlogNS        = "backlog"
	backlogWindow    = 25 * time.Second
	healBound        = 2 * time.Second // the bound the contract sets
	tamperPeriod     = time.Second
	backlogCleanup   = 3 * time.Minute
	minHealsMeasured = int(backlogWindow/tamperPeriod) / 2
)

// TestQuietMemberHealsDuringBacklogOnTheSameReplica: of two members managed by the same
// replica, one gets 5,000 bundles at once while the other's ConfigMap is tampered with every
// second; every heal in the quiet member takes less than 2 s.
func TestQuietMemberHealsDuringBacklogOnTheSameReplica(t *testing.T) {
	RegisterTestingT(t)
	g, ctx := NewWithT(t), context.Background()
	owners := settledOwners(t, "r0", "r1", "r2")
	var quiet, busy string
	for _, id := range []string{"r0", "r1", "r2"} {
		if ms := membersOf(owners, id); len(ms) >= 2 {
			quiet, busy = ms[0], ms[1]
			break
		}
	}
	g.Expect(busy).NotTo(BeEmpty(), "no replica manages two members: %v", owners)
	bc := fl.Member(busy).Client
	g.Expect(fleet.EnsureNamespace(ctx, bc, backlogNS)).To(Succeed())
	t.Cleanup(func() { g.Expect(fleet.DeleteBundles(ctx, bc, backlogNS, backlogCleanup)).To(Succeed()) })

	start := time.Now()
	created := make(chan error, 1)
	var took time.Duration // the creation's, read after created
	go func() {
		err := fleet.CreateBundles(ctx, bc, backlogNS, "b", "backlog", backlogBundles, backlogCreators)
		took = time.Since(start)
		created <- err
	}()
	key := client.ObjectKey{Namespace: bundleNS, Name: bundleName}
	tp := fleet.StartTampering(fl.Member(quiet).Client, []client.ObjectKey{key}, func(client.ObjectKey) string { return desired(quiet) }, tamperPeriod)
	timer := time.NewTimer(time.Until(start.Add(backlogWindow)))
	<-timer.C
	heals, err := tp.Stop()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(<-created).To(Succeed())
	t.Logf("%d bundles created in %s (replica %s) in %s; heals in %s meanwhile (%d): %s", backlogBundles, busy, owners[busy],
		took.Round(time.Millisecond), quiet, len(heals), fleet.HealSummary(heals))
	g.Expect(len(heals)).To(BeNumerically(">=", minHealsMeasured), "heals measured in %s", backlogWindow)
	for i, d := range heals {
		g.Expect(d).To(BeNumerically("<=", healBound), "heal %d of %d in %s", i+1, len(heals), quiet)
	}
}
