package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// Goals of the heal latency, as ratios to the floor: the medians over the rounds,
// and the worst single round.
const (
	goalMedianP50, goalMedianP99 = 1.5, 3.0
	goalRoundP50, goalRoundP99   = 2.0, 5.0
)

// settlePoll is how often a restarted hub is checked for having caught up; restartQuiet is how
// long the drifts wait after it has.
const (
	settlePoll   = 500 * time.Millisecond
	restartQuiet = 2 * time.Second
)

// healRound is one round of the heal measurement: the hub's drifts, then the floor's on the same
// objects with the hub stopped.
type healRound struct {
	Hub, Floor             latencies
	HubErrors, FloorErrors int
}

// ratios are the round's hub-to-floor ratios of p50 and p99.
func (r healRound) ratios() (p50, p99 float64) {
	return ratio(r.Hub.pct(50), r.Floor.pct(50)), ratio(r.Hub.pct(99), r.Floor.pct(99))
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// measureHeal measures heal latency in cfg.Rounds rounds, each the hub's turn then the floor's
// (the hub stopped), so that a drift of the machine hits both; the hub is restarted for each
// round after the first and drifts only once it has caught up with the fleet. After the hub's
// first turn it measures again with a share of the members paused (isolation), once.
func (f *fleet) measureHeal(ctx context.Context, cfg benchConfig, res *results, say func(string, ...any)) error {
	hm := f.Members()[:cfg.HealMembers]
	for i := range cfg.Rounds {
		if i > 0 {
			say("round %d of %d: restarting the hub, waiting until it has caught up with the fleet", i+1, cfg.Rounds)
			if err := f.restartHub(ctx, cfg); err != nil {
				return err
			}
		}
		say("round %d of %d: hub, %d drifts over %d members", i+1, cfg.Rounds, cfg.Drifts, len(hm))
		var round healRound
		var err error
		if round.Hub, round.HubErrors, err = f.drifts(ctx, hm, cfg.Drifts); err != nil {
			return err
		}
		if i == 0 {
			if err := f.measureIsolation(ctx, cfg, res, say); err != nil {
				return err
			}
		}
		f.stopHub()
		say("round %d of %d: floor, %d drifts over %d members, hub stopped", i+1, cfg.Rounds, cfg.Drifts, len(hm))
		floor, floorErrors, err := f.floorDrifts(ctx, hm, cfg.Drifts)
		if err != nil {
			return err
		}
		round.Floor, round.FloorErrors = floor.all(), floorErrors
		res.Rounds = append(res.Rounds, round)
	}
	return nil
}

// measureIsolation measures the hub's heal latency while a share of the members hang.
func (f *fleet) measureIsolation(ctx context.Context, cfg benchConfig, res *results, say func(string, ...any)) error {
	all := f.Members()
	hm := all[:cfg.HealMembers]
	paused := all[len(all)-max(1, int(float64(len(all))*cfg.PausedShare+0.999)):]
	paused = slices.DeleteFunc(slices.Clone(paused), func(m *member) bool { return slices.Contains(hm, m) })
	res.PausedMembers = len(paused)
	say("hub with %d of %d members paused: %d drifts", len(paused), len(all), cfg.Drifts)
	for _, m := range paused {
		if err := m.Plane.Pause(); err != nil {
			return err
		}
	}
	var err error
	res.IsolatedHeal, res.IsolatedHealErrors, err = f.drifts(ctx, hm, cfg.Drifts)
	for _, m := range paused {
		err = errors.Join(err, m.Plane.Resume())
	}
	return err
}

// floorDrifts runs the floor on members for the time of n drifts.
func (f *fleet) floorDrifts(ctx context.Context, members []*member, n int) (heals, int, error) {
	stopFloor, err := startFloor(ctx, members)
	if err != nil {
		return heals{}, 0, err
	}
	defer stopFloor()
	return f.driftsByKind(ctx, members, n)
}

// restartHub starts the hub again and waits until it has caught up with the fleet: every member
// Connected, every bundle reconciled, its status recording the current ConfigMap (the floor
// rewrote some), nothing queued; then a moment more for the last writes.
func (f *fleet) restartHub(ctx context.Context, cfg benchConfig) error {
	if err := f.startHub(ctx); err != nil {
		return err
	}
	bundled := f.Members()[:cfg.ThroughputMembers]
	err := wait.PollUntilContextTimeout(ctx, settlePoll, waitTimeout, true, func(ctx context.Context) (bool, error) {
		return f.caughtUp(ctx, bundled, cfg.BundlesPerMember), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the restarted hub to catch up with the fleet: %w", err)
	}
	return sleepCtx(ctx, restartQuiet)
}

// caughtUp reports whether the running hub has caught up with the fleet, as its metrics, the
// MemberClusters and the bundles of the members with bundles (perMember each) say.
func (f *fleet) caughtUp(ctx context.Context, bundled []*member, perMember int) bool {
	if !f.hubMetricsCaughtUp(bundled, perMember) || !f.AllReady(ctx, hubv1alpha1.ConnectedReason, f.Members()...) {
		return false
	}
	for _, m := range bundled {
		if !bundlesRecorded(ctx, m) {
			return false
		}
	}
	return true
}

// hubMetricsCaughtUp reports whether the hub's own metrics say that it has connected every member,
// reconciled every bundle at least once and has nothing queued (controller-runtime's
// workqueue_depth of the configbundle controller).
func (f *fleet) hubMetricsCaughtUp(bundled []*member, perMember int) bool {
	m, err := scrape(f.hub().MetricsAddr)
	if err != nil {
		return false
	}
	connected := m.sum("configbundle_hub_members", func(l map[string]string) bool {
		return l["ready"] == "true" && l["reason"] == hubv1alpha1.ConnectedReason
	})
	if int(connected) != len(f.Members()) {
		return false
	}
	for _, b := range bundled {
		done := m.sum("configbundle_reconciles_total", func(l map[string]string) bool { return l["cluster"] == b.Name && l["result"] == "success" })
		if int(done) < perMember {
			return false
		}
	}
	return m.sum("workqueue_depth", func(l map[string]string) bool { return l["name"] == "configbundle" }) == 0
}

// bundlesRecorded reports whether every bench bundle of m is Ready (Synced) at its generation
// and its status records its ConfigMap as it is now.
func bundlesRecorded(ctx context.Context, m *member) bool {
	bundles := &configbundlev1alpha1.ConfigBundleList{}
	configMaps := &corev1.ConfigMapList{}
	if m.Client.List(ctx, bundles, client.InNamespace("bench")) != nil || m.Client.List(ctx, configMaps, client.InNamespace("bench")) != nil {
		return false
	}
	current := make(map[string]*corev1.ConfigMap, len(configMaps.Items))
	for i := range configMaps.Items {
		current[configMaps.Items[i].Name] = &configMaps.Items[i]
	}
	for _, b := range bundles.Items {
		c := meta.FindStatusCondition(b.Status.Conditions, configbundlev1alpha1.ReadyCondition)
		cm, ref := current[b.Name], b.Status.ConfigMapRef
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != configbundlev1alpha1.SyncedReason || b.Status.ObservedGeneration != b.Generation ||
			cm == nil || ref == nil || ref.UID != cm.UID || ref.ResourceVersion != cm.ResourceVersion {
			return false
		}
	}
	return true
}

// healSummary is the median and the spread of the rounds' ratios.
type healSummary struct {
	MedianP50, MinP50, MaxP50 float64
	MedianP99, MinP99, MaxP99 float64
	WorstP50Round             int // 1-based
	WorstP99Round             int
}

func (r *results) healSummary() healSummary {
	var p50s, p99s []float64
	var s healSummary
	for i, round := range r.Rounds {
		p50, p99 := round.ratios()
		p50s, p99s = append(p50s, p50), append(p99s, p99)
		if p50 >= slices.Max(p50s) {
			s.WorstP50Round = i + 1
		}
		if p99 >= slices.Max(p99s) {
			s.WorstP99Round = i + 1
		}
	}
	if len(p50s) == 0 {
		return s
	}
	s.MedianP50, s.MinP50, s.MaxP50 = median(p50s), slices.Min(p50s), slices.Max(p50s)
	s.MedianP99, s.MinP99, s.MaxP99 = median(p99s), slices.Min(p99s), slices.Max(p99s)
	return s
}

// median is the middle value, or the mean of the two middle values.
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// missedGoals names the heal-latency goals this run missed, with the figure that missed.
func (s healSummary) missedGoals() []string {
	var missed []string
	if s.MedianP50 > goalMedianP50 {
		missed = append(missed, fmt.Sprintf("median p50 <= %.1fx (%.2fx)", goalMedianP50, s.MedianP50))
	}
	if s.MedianP99 > goalMedianP99 {
		missed = append(missed, fmt.Sprintf("median p99 <= %.1fx (%.2fx)", goalMedianP99, s.MedianP99))
	}
	if s.MaxP50 > goalRoundP50 {
		missed = append(missed, fmt.Sprintf("no round's p50 over %.1fx (round %d: %.2fx)", goalRoundP50, s.WorstP50Round, s.MaxP50))
	}
	if s.MaxP99 > goalRoundP99 {
		missed = append(missed, fmt.Sprintf("no round's p99 over %.1fx (round %d: %.2fx)", goalRoundP99, s.WorstP99Round, s.MaxP99))
	}
	return missed
}

// pooled returns the latencies of every round, the hub's and the floor's.
func (r *results) pooled() (hub, floor latencies) {
	for _, round := range r.Rounds {
		hub, floor = append(hub, round.Hub...), append(floor, round.Floor...)
	}
	return hub, floor
}

func (r *results) printHeal(p printer, cfg benchConfig) {
	p("\n1. Heal latency (tampering write acknowledged -> healed object seen through a watch), %d drifts over %d members per turn, %d rounds of hub then floor",
		cfg.Drifts, cfg.HealMembers, len(r.Rounds))
	p("| round | hub p50 | hub p99 | floor p50 | floor p99 | p50 / floor | p99 / floor | drifts hub / floor |")
	p("|---|---|---|---|---|---|---|---|")
	for i, round := range r.Rounds {
		p50, p99 := round.ratios()
		p("| %d | %s | %s | %s | %s | %.2fx | %.2fx | %d / %d |", i+1, ms(round.Hub.pct(50)), ms(round.Hub.pct(99)),
			ms(round.Floor.pct(50)), ms(round.Floor.pct(99)), p50, p99, len(round.Hub), len(round.Floor))
	}
	s := r.healSummary()
	p("median over %d rounds: p50 %.2fx of the floor (%.2fx–%.2fx), p99 %.2fx (%.2fx–%.2fx)",
		len(r.Rounds), s.MedianP50, s.MinP50, s.MaxP50, s.MedianP99, s.MinP99, s.MaxP99)
	if missed := s.missedGoals(); len(missed) > 0 {
		p("goals missed: %s", strings.Join(missed, "; "))
	} else {
		p("goals missed: none (median p50 <= %.1fx, median p99 <= %.1fx, no round over %.1fx / %.1fx)", goalMedianP50, goalMedianP99, goalRoundP50, goalRoundP99)
	}
	r.printHealers(p, cfg)
}

// printHealers prints the healers' latencies over all rounds, the paused run's and the seed
// operator's model.
func (r *results) printHealers(p printer, cfg benchConfig) {
	hub, floor := r.pooled()
	p("\n| healer (all rounds) | p50 | p90 | p99 | drifts | p50 / floor | p99 / floor |")
	p("|---|---|---|---|---|---|---|")
	row := func(name string, l latencies) {
		p("| %s | %s | %s | %s | %d | %.2fx | %.2fx |", name, ms(l.pct(50)), ms(l.pct(90)), ms(l.pct(99)), len(l),
			ratio(l.pct(50), floor.pct(50)), ratio(l.pct(99), floor.pct(99)))
	}
	row("floor: minimal client-go informer + one update per event", floor)
	row("ConfigBundle Hub", hub)
	row(fmt.Sprintf("ConfigBundle Hub, %d of %d members paused (once, after round 1)", r.PausedMembers, r.MembersAtJoin), r.IsolatedHeal)
	if o := r.HubOutage; o.Paused > 0 {
		row(fmt.Sprintf("ConfigBundle Hub, the hub cluster's API server paused %s (once, at the end)", o.Paused.Round(time.Second)), o.Heal)
	}
	p("| seed operator's model: poll every %s (expected latency N/2, model not measured) | %s | %s | %s | - | - | - |",
		cfg.PollInterval, ms(cfg.PollInterval/2), ms(cfg.PollInterval*9/10), ms(cfg.PollInterval*99/100))
}
