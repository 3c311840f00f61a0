package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
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
	// syncWatch bounds how long the Synced condition of the busy member and the Fleet are
	// watched after a restart of the hub: beyond the heals measured after it. The backlog's first
	// full reconcile takes longer (two writes for each bundle not reconciled before the restart, at
	// the member client's 50 QPS); package fleet proves that Synced follows it to the end.
	syncWatch = 45 * time.Second
)

// TestQuietMemberHealsDuringAnotherMembersBacklog: one member (m3) gets 5,000 bundles at once
// while another (m2) has its ConfigMaps tampered with every second. Every heal in the quiet
// member takes less than 2 s while the hub works through the backlog, and again after a restart
// of the hub (with --leader-elect, the default install) that lists the busy member's bundles
// anew. The hub hands its workers fairly across members (package fairqueue); with one queue
// for all, first in first out, a heal waited behind the whole backlog (over 60 s). After the
// restart, m3's MemberCluster says Synced=False (Syncing) until the hub has reconciled each of
// its bundles once, and the restarted hub never reports the Fleet AllReady before that.
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
	restarted := time.Now()
	watched := watchSync(busy, restarted)
	_, err := fl.StartHub(ctx, fleet.HubName, "--leader-elect")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fl.WaitReported(ctx, fleet.HubName)).To(Succeed())
	after := measureHeals(t, quiet, keys, time.Now().Add(backlogWindow))
	t.Logf("heals in %s after a restart of the hub (--leader-elect) with %d bundles in %s (%d): %s", quiet, backlogBundles, busy, len(after), fleet.HealSummary(after))
	expectHealsWithin(t, after, "after a restart of the hub")

	s := <-watched
	synced := fmt.Sprintf("not Synced within %s", syncWatch)
	if !s.syncedAt.IsZero() {
		synced = fmt.Sprintf("Synced at %s", s.syncedAt.Sub(restarted).Round(time.Millisecond))
	}
	t.Logf("%s after the restart: Syncing (%q) at %s, %s", busy, s.syncing, s.syncingAt.Sub(restarted).Round(time.Millisecond), synced)
	g.Expect(s.syncing).To(MatchRegexp(`^\d+ of \d+ ConfigBundles left to reconcile since the member connected$`))
	g.Expect(s.early).To(BeEmpty(), "the Fleet AllReady while %s was not synced", busy)
}

// syncSeen is what watchSync saw of a member and the Fleet after a restart of the hub.
type syncSeen struct {
	// syncing is the first message of the member's Synced condition while False, and when.
	syncing   string
	syncingAt time.Time
	// syncedAt is when the member was first seen Synced after it was seen Syncing.
	syncedAt time.Time
	// early are the Fleet's Ready messages seen AllReady, written after the restart, while the
	// member was not synced.
	early []string
}

// watchSync watches the Synced condition of a member and the Fleet's Ready from a restart of the
// hub at restarted until the member is Synced again, at most syncWatch, and sends what it saw.
func watchSync(member string, restarted time.Time) <-chan syncSeen {
	out := make(chan syncSeen, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), syncWatch)
		defer cancel()
		var s syncSeen
		// The watch ends when the member is synced or at syncWatch, whichever comes first.
		_ = wait.PollUntilContextCancel(ctx, interval/2, true, func(ctx context.Context) (bool, error) {
			f, err := fl.GetFleet(ctx)
			if err != nil || f.Status.HeartbeatTime == nil || !f.Status.HeartbeatTime.After(restarted.Truncate(time.Second)) {
				return false, nil // the Fleet of the hub that stopped
			}
			mc, err := fl.GetMemberCluster(ctx, member)
			if err != nil {
				return false, nil
			}
			ready := meta.FindStatusCondition(f.Status.Conditions, hubv1alpha1.ReadyCondition)
			allReady := ready != nil && ready.Reason == hubv1alpha1.AllReadyReason
			switch c := meta.FindStatusCondition(mc.Status.Conditions, hubv1alpha1.SyncedCondition); {
			case c != nil && c.Status == metav1.ConditionFalse && c.Reason == hubv1alpha1.SyncingReason:
				if s.syncingAt.IsZero() && strings.Contains(c.Message, "left to reconcile") {
					s.syncing, s.syncingAt = c.Message, time.Now()
				}
				if allReady { // read before the MemberCluster, which is only ever more synced
					s.early = append(s.early, ready.Message)
				}
			case c != nil && c.Status == metav1.ConditionTrue && !s.syncingAt.IsZero() && s.syncedAt.IsZero():
				s.syncedAt = time.Now()
			}
			return !s.syncedAt.IsZero(), nil
		})
		out <- s
	}()
	return out
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
