package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
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
	// healBound is the issue's: every heal in the quiet member within 2 s.
	healBound = 2 * time.Second
	// tamperPeriod is how often the quiet member's ConfigMaps are tampered with, one at a time.
	tamperPeriod = time.Second
	// healPoll is how often a tampered ConfigMap is read back.
	healPoll = 10 * time.Millisecond
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
	for i := range 3 {
		keys = append(keys, client.ObjectKeyFromObject(createBundle(g, quiet, ns, fmt.Sprintf("quiet-%d", i), "desired")))
	}
	ensureNamespace(g, busy, ns)
	t.Cleanup(func() { deleteBacklog(t, busy, ns) })

	heals := startTampering(t, quiet, keys)
	start := time.Now()
	createBacklog(t, busy, ns)
	created := time.Since(start)
	waitFor(t, start.Add(backlogWindow))
	during := heals.stop(t)
	t.Logf("%d bundles created in %s in %s; heals in %s meanwhile (%d): %s", backlogBundles, busy, created.Round(time.Millisecond),
		quiet, len(during), summary(during))
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
	heals = startTampering(t, quiet, keys)
	waitFor(t, time.Now().Add(backlogWindow))
	after := heals.stop(t)
	t.Logf("heals in %s after a restart of the hub (--leader-elect) with %d bundles in %s (%d): %s", quiet, backlogBundles, busy, len(after), summary(after))
	expectHealsWithin(t, after, "after a restart of the hub")
}

// createBacklog creates backlogBundles bundles in namespace ns of member, backlogCreators at a
// time.
func createBacklog(t *testing.T, member, ns string) {
	t.Helper()
	c := fl.Member(member).Client
	names := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range backlogCreators {
		wg.Go(func() {
			for name := range names {
				if err := c.Create(context.Background(), fleet.NewBundle(ns, name, "backlog")); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range backlogBundles {
		names <- fmt.Sprintf("b-%05d", i)
	}
	close(names)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d bundles not created, the first: %v", len(errs), errs[0])
	}
}

// deleteBacklog deletes the bundles of namespace ns of member and their ConfigMaps (the
// member runs no garbage collector), and waits until the bundles are gone.
func deleteBacklog(t *testing.T, member, ns string) {
	g, ctx, c := NewWithT(t), context.Background(), fl.Member(member).Client
	g.Expect(c.DeleteAllOf(ctx, &configbundlev1alpha1.ConfigBundle{}, client.InNamespace(ns))).To(Succeed())
	g.Expect(c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns))).To(Succeed())
	g.Eventually(func(g Gomega) {
		list := &configbundlev1alpha1.ConfigBundleList{}
		g.Expect(c.List(ctx, list, client.InNamespace(ns), client.Limit(1))).To(Succeed())
		g.Expect(list.Items).To(BeEmpty())
	}).WithTimeout(cleanupTimeout).WithPolling(time.Second).Should(Succeed())
}

// tampering tampers with a member's ConfigMaps, one every tamperPeriod, and measures how long
// each takes to be healed: from the tamper to the ConfigMap read back with its desired message.
type tampering struct {
	cancel context.CancelFunc
	done   chan struct{}
	heals  []time.Duration
	err    error
}

func startTampering(t *testing.T, member string, keys []client.ObjectKey) *tampering {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tp := &tampering{cancel: cancel, done: make(chan struct{})}
	c := fl.Member(member).Client
	go func() {
		defer close(tp.done)
		pace := time.NewTicker(tamperPeriod)
		defer pace.Stop()
		for i := 0; ; i++ {
			key := keys[i%len(keys)]
			tampered := time.Now()
			if tp.err = fleet.Tamper(ctx, c, key, "tampered"); tp.err != nil {
				return
			}
			poll := time.NewTicker(healPoll)
			for {
				if msg, err := fleet.Message(ctx, c, key); err == nil && msg == "desired" {
					tp.heals = append(tp.heals, time.Since(tampered))
					break
				}
				select {
				case <-ctx.Done():
					poll.Stop()
					tp.heals = append(tp.heals, time.Since(tampered)) // not healed yet: at least this
					return
				case <-poll.C:
				}
			}
			poll.Stop()
			select {
			case <-ctx.Done():
				return
			case <-pace.C:
			}
		}
	}()
	return tp
}

// stop stops tampering and returns the heal latencies.
func (tp *tampering) stop(t *testing.T) []time.Duration {
	t.Helper()
	tp.cancel()
	<-tp.done
	if tp.err != nil && !errors.Is(tp.err, context.Canceled) {
		t.Fatalf("tampering: %v", tp.err)
	}
	return tp.heals
}

// waitFor waits until deadline, the end of a measurement window.
func waitFor(t *testing.T, deadline time.Time) {
	t.Helper()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	<-timer.C
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

// summary is the median and the maximum of heals.
func summary(heals []time.Duration) string {
	if len(heals) == 0 {
		return "none"
	}
	s := slices.Sorted(slices.Values(heals))
	return fmt.Sprintf("p50 %s, max %s", s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}
