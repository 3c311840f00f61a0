package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	fixture "configbundle.dev/hub/internal/testing/fleet"
)

// The backlog phase: a quiet member's heals while another member receives
// BacklogBundles bundles at once, against the same member's heals without the backlog.
const (
	// goalBacklogP99 is the goal: the quiet member's p99 during the backlog at most twice its
	// p99 without.
	goalBacklogP99 = 2.0
	// backlogNS holds the busy member's bundles; backlogCreators create them in parallel.
	backlogNS       = "bench-backlog"
	backlogCreators = 16
)

// backlogResults are the figures of the backlog phase.
type backlogResults struct {
	Bundles                   int
	Quiet, Busy               string
	Alone, During             latencies
	AloneErrors, DuringErrors int
	Created                   time.Duration // the time the busy member's bundles took to create
	// QueueWaitP99 bounds the p99 of the quiet member's waits in the hub's work queue during
	// the backlog (the bucket of configbundle_member_queue_wait_seconds it falls in); the rest
	// of a heal is the machine, not the queue. QueueWaits is their number.
	QueueWaitP99 time.Duration
	QueueWaits   uint64
}

// missed says whether the goal was missed.
func (b backlogResults) missed() bool {
	return b.DuringErrors > 0 || ratio(b.During.pct(99), b.Alone.pct(99)) > goalBacklogP99
}

// measureBacklog measures the first heal member's heals alone, then while the last member (no
// bundles of its own) receives cfg.BacklogBundles bundles at once; then it deletes them and
// waits until the hub's queue is empty.
func (f *fleet) measureBacklog(ctx context.Context, cfg benchConfig, res *results, say func(string, ...any)) error {
	if cfg.BacklogBundles < 1 {
		return nil
	}
	if f.hub() == nil {
		say("backlog: starting the hub, waiting until it has caught up with the fleet")
		if err := f.restartHub(ctx, cfg); err != nil {
			return err
		}
	}
	all := f.Members()
	quiet, busy := all[:1], all[len(all)-1]
	b := &res.Backlog
	b.Bundles, b.Quiet, b.Busy = cfg.BacklogBundles, quiet[0].Name, busy.Name
	say("backlog: %d drifts in %s alone", cfg.Drifts, b.Quiet)
	var err error
	if b.Alone, b.AloneErrors, err = f.drifts(ctx, quiet, cfg.Drifts); err != nil {
		return err
	}

	say("backlog: %d drifts in %s while %s receives %d bundles at once", cfg.Drifts, b.Quiet, b.Busy, cfg.BacklogBundles)
	if err := fixture.EnsureNamespace(ctx, busy.Client, backlogNS); err != nil {
		return err
	}
	before, err := scrape(f.hub().MetricsAddr)
	if err != nil {
		return err
	}
	start := time.Now()
	created := make(chan error, 1)
	go func() {
		err := fixture.CreateBundles(ctx, busy.Client, backlogNS, "backlog", "backlog", cfg.BacklogBundles, backlogCreators)
		b.Created = time.Since(start)
		created <- err
	}()
	b.During, b.DuringErrors, err = f.drifts(ctx, quiet, cfg.Drifts)
	err = errors.Join(err, <-created)
	if after, serr := scrape(f.hub().MetricsAddr); serr == nil {
		b.QueueWaitP99, b.QueueWaits = waitP99(before, after, b.Quiet)
	}

	say("backlog: deleting %d bundles of %s, waiting until the hub's queue is empty", cfg.BacklogBundles, b.Busy)
	return errors.Join(err, f.deleteBacklog(ctx, busy))
}

// deleteBacklog deletes the bundles of backlogNS of m and their ConfigMaps, and waits until the
// hub's configbundle queue is empty.
func (f *fleet) deleteBacklog(ctx context.Context, m *member) error {
	if err := fixture.DeleteBundles(ctx, m.Client, backlogNS, waitTimeout); err != nil {
		return fmt.Errorf("deleting the backlog of %s: %w", m.Name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, settlePoll, waitTimeout, true, func(context.Context) (bool, error) {
		metrics, err := scrape(f.hub().MetricsAddr)
		return err == nil && metrics.sum("workqueue_depth", func(l map[string]string) bool { return l["name"] == "configbundle" }) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the hub to work through the deletion of the backlog: %w", err)
	}
	return nil
}

// waitP99 is the upper bound of the bucket of configbundle_member_queue_wait_seconds that holds
// the p99 of the waits of member between the scrapes before and after, and their number.
func waitP99(before, after metrics, member string) (time.Duration, uint64) {
	// bucketsOf is the cumulative count by upper bound, and the count (+Inf).
	bucketsOf := func(m metrics) (map[float64]uint64, uint64) {
		for _, s := range m["configbundle_member_queue_wait_seconds"].GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "cluster" && l.GetValue() == member {
					out := map[float64]uint64{}
					for _, b := range s.GetHistogram().GetBucket() {
						out[b.GetUpperBound()] = b.GetCumulativeCount()
					}
					return out, s.GetHistogram().GetSampleCount()
				}
			}
		}
		return map[float64]uint64{}, 0
	}
	b, bn := bucketsOf(before)
	a, an := bucketsOf(after)
	total := an - bn
	for _, le := range slices.Sorted(maps.Keys(a)) {
		if n := a[le] - b[le]; total > 0 && float64(n) >= 0.99*float64(total) {
			return time.Duration(le * float64(time.Second)), total
		}
	}
	return 0, total
}

func (r *results) printBacklog(p printer) {
	b := r.Backlog
	if b.Bundles == 0 {
		return
	}
	p("\n1b. Heal latency during another member's backlog: heals in %s alone, and while %s receives %d bundles at once (created in %s)", b.Quiet, b.Busy, b.Bundles, b.Created.Round(100*time.Millisecond))
	p("| %s heals | p50 | p99 | max | drifts | not healed |", b.Quiet)
	p("|---|---|---|---|---|---|")
	p("| alone | %s | %s | %s | %d | %d |", ms(b.Alone.pct(50)), ms(b.Alone.pct(99)), ms(b.Alone.pct(100)), len(b.Alone), b.AloneErrors)
	p("| during the backlog | %s | %s | %s | %d | %d |", ms(b.During.pct(50)), ms(b.During.pct(99)), ms(b.During.pct(100)), len(b.During), b.DuringErrors)
	verdict := "ok"
	if b.missed() {
		verdict = "FAIL"
	}
	p("%s's waits in the hub's work queue during the backlog: p99 at most %s (%d waits; configbundle_member_queue_wait_seconds)", b.Quiet, ms(b.QueueWaitP99), b.QueueWaits)
	p("p99 during / alone: %.2fx (goal: at most %.1fx, every drift healed): %s", ratio(b.During.pct(99), b.Alone.pct(99)), goalBacklogP99, verdict)
}
