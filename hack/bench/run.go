package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"configbundle.dev/hub/config"
	"configbundle.dev/hub/internal/testing/controlplane"
	fixture "configbundle.dev/hub/internal/testing/fleet"
)

// benchConfig sizes a run. Each field says what it sizes.
type benchConfig struct {
	HubBinary string
	// Members is the largest member count of the cost curve (1, 2, 4, ... Members).
	Members int
	// ThroughputMembers get BundlesPerMember bundles each.
	ThroughputMembers, BundlesPerMember int
	// Unmanaged ConfigMaps (1 KiB of data each) are created in one member without bundles.
	Unmanaged int
	// HealMembers are tampered with, Drifts times in all, per heal-latency run.
	HealMembers, Drifts int
	// Rounds of the heal measurement, each the hub's run then the floor's.
	Rounds int
	// BlackHoles are Secrets whose server accepts connections and never answers, registered
	// while a member joins.
	BlackHoles int
	// PausedShare of the members are SIGSTOPped during the isolation run.
	PausedShare float64
	// PollInterval is the seed operator's polling period, for its latency model.
	PollInterval time.Duration
	// Quiet is the steady-state window in which writes and CPU are counted. The full run's is
	// longer than the period of any periodic write the hub has had (a MemberCluster's
	// lastSeenTime, every minute): a shorter window sees such a write only when it happens to
	// fall into it.
	Quiet time.Duration
	// Placements are the template changes of the placement phase (and as many of the floor's);
	// FleetBundles are created at once for its memory figure, each placed in every member.
	Placements, FleetBundles int
	// Scale sizes the scale curve (scale.go); no member counts skip it. ScaleOnly skips every
	// other phase.
	Scale     scaleConfig
	ScaleOnly bool
	// BacklogBundles are created at once in one member while another's heals are measured
	// (backlog.go); 0 skips it.
	BacklogBundles int
	// RolloutSoak is the soakTime of each stage of the rollout phase (rollout.go); 0 skips it.
	// RolloutOnly runs the members' join and the rollout phase alone.
	RolloutSoak time.Duration
	RolloutOnly bool
	// PlacementOnly runs the members' join and the placement phase alone.
	PlacementOnly bool
	// HealOnly runs the members' join, the convergence of their bundles and the heal phase
	// alone.
	HealOnly bool
	// HistoryTenants are the tenants of the revision history phase (history.go); 0 skips it.
	// HistoryOnly runs it alone, with no member joined.
	HistoryTenants int
	HistoryOnly    bool
	// RestartBundles are created over the first restartMembers members before a restart of the
	// hub (restart.go); 0 skips it. RestartOnly runs the members' join and the restart phase
	// alone, on restartMembers members at most.
	RestartBundles int
	RestartOnly    bool
	// Capacity, if set, makes the run the capacity probe alone (capacity.go): up to Capacity
	// slim members, CapacityStep at a time.
	Capacity, CapacityStep int
}

func fullConfig() benchConfig {
	return benchConfig{Members: 16, ThroughputMembers: 4, BundlesPerMember: 1000, Unmanaged: 10000,
		HealMembers: 2, Drifts: 320, Rounds: 5, BlackHoles: 2, PausedShare: 0.2, PollInterval: 10 * time.Second, Quiet: 70 * time.Second,
		Placements: 50, FleetBundles: 100, Scale: fullScaleConfig(), CapacityStep: 20, BacklogBundles: 5000, RolloutSoak: 2 * time.Second,
		HistoryTenants: 10, RestartBundles: 20000}
}

func smokeConfig() benchConfig {
	return benchConfig{Members: 4, ThroughputMembers: 2, BundlesPerMember: 20, Unmanaged: 200,
		HealMembers: 2, Drifts: 24, Rounds: 2, BlackHoles: 1, PausedShare: 0.25, PollInterval: 10 * time.Second, Quiet: 3 * time.Second,
		Placements: 4, FleetBundles: 5, Scale: smokeScaleConfig(), CapacityStep: 2, BacklogBundles: 100, RolloutSoak: time.Second,
		HistoryTenants: 2, RestartBundles: 400}
}

// results are the figures of a run.
type results struct {
	Machine string

	Rounds                            []healRound
	IsolatedHeal                      latencies
	IsolatedHealErrors, PausedMembers int

	Bundles           int
	ConvergeTime      time.Duration
	ConvergedAt       time.Time          // when the benchmark saw every bundle Ready
	WritesPerBundle   float64            // the hub's writes to the members until then, per bundle
	WritesByVerb      map[string]float64 // the same, by API verb
	ConvergeHubWrites int                // the hub's writes to the hub cluster until then
	Steady            steadyState
	SteadyReconciles  []string
	SteadyCPU         float64 // share of one core

	Cost            []costPoint // empty members
	CostWithBundles costPoint   // ThroughputMembers with their bundles
	CostUnmanaged   costPoint   // after the unmanaged ConfigMaps
	EmptyBaseline   costPoint   // the member count the bundle and unmanaged figures compare with

	JoinTimes       []time.Duration // reachable members, black holes registered
	Unreachable     int             // black-hole Secrets reported Unreachable or Connecting, not Ready
	MembersAtJoin   int
	HealedAllDrifts bool

	Placement placementResults
	Backlog   backlogResults

	HubOutage hubOutageResults

	Rollout rolloutResults

	History historyResults
	Restart restartResults

	Scale scaleResults
}

// healedAll reports whether every drift of every run was healed in time.
func (r *results) healedAll(cfg benchConfig) bool {
	if len(r.Rounds) != cfg.Rounds || len(r.IsolatedHeal) != cfg.Drifts || r.IsolatedHealErrors != 0 {
		return false
	}
	for _, round := range r.Rounds {
		if round.HubErrors != 0 || round.FloorErrors != 0 || len(round.Hub) != cfg.Drifts || len(round.Floor) != cfg.Drifts {
			return false
		}
	}
	return true
}

type costPoint struct {
	Members, Bundles, Unmanaged int
	RSS, Heap                   float64 // bytes
	Goroutines                  float64
}

// cpOutput, if set (BENCH_DEBUG=1), receives the control planes' output.
var cpOutput io.Writer

// run measures everything, in the order that lets each phase reuse the fleet of the previous
// one, then the scale curve on a fleet of its own (the first fleet stopped). progress receives
// what it is doing.
func run(ctx context.Context, cfg benchConfig, progress io.Writer) (*results, error) {
	say := func(format string, args ...any) { fmt.Fprintf(progress, "bench: "+format+"\n", args...) }
	res := &results{Machine: machine(), WritesByVerb: map[string]float64{}}
	if cfg.RolloutOnly {
		return res, runRolloutOnly(ctx, cfg, res, say)
	}
	if cfg.PlacementOnly {
		return res, runPlacementOnly(ctx, cfg, res, say)
	}
	if cfg.HealOnly {
		res.MembersAtJoin = cfg.Members
		return res, onFleet(ctx, cfg, res, say, (*fleet).joinAll, (*fleet).measureConvergence, (*fleet).measureHeal)
	}
	if cfg.HistoryOnly {
		cfg.Members = 1 // the phase needs no member: one control plane of a member, never joined
		return res, onFleet(ctx, cfg, res, say, (*fleet).measureHistory)
	}
	if cfg.RestartOnly {
		cfg.Members = min(cfg.Members, restartMembers)
		return res, onFleet(ctx, cfg, res, say, (*fleet).joinAll, (*fleet).measureRestart)
	}
	if !cfg.ScaleOnly {
		if err := runPhases(ctx, cfg, res, say); err != nil {
			return res, err
		}
		res.HealedAllDrifts = res.healedAll(cfg)
	}
	return res, measureScale(ctx, cfg, res, say)
}

// runPhases runs every phase but the scale curve on one fleet of full control planes.
func runPhases(ctx context.Context, cfg benchConfig, res *results, say func(string, ...any)) error {
	return onFleet(ctx, cfg, res, say,
		(*fleet).measureJoin, (*fleet).measureConvergence, (*fleet).measureUnmanaged, (*fleet).measureHeal,
		(*fleet).measurePlacement, (*fleet).measureBacklog, (*fleet).measureHubOutage, (*fleet).measureRollout, (*fleet).measureRestart, (*fleet).measureHistory)
}

// runRolloutOnly runs the members' join and the rollout phase alone (--rollout-only).
func runRolloutOnly(ctx context.Context, cfg benchConfig, res *results, say func(string, ...any)) error {
	return onFleet(ctx, cfg, res, say, (*fleet).joinAll, (*fleet).measureRollout)
}

// runPlacementOnly runs the members' join and the placement phase alone (--placement-only): no
// member holds bundles of its own, and the hub is stopped before the phase restarts it, as after
// the heal rounds of the full run.
func runPlacementOnly(ctx context.Context, cfg benchConfig, res *results, say func(string, ...any)) error {
	cfg.ThroughputMembers = 0
	stop := func(f *fleet, _ context.Context, _ benchConfig, _ *results, _ func(string, ...any)) error {
		f.stopHub()
		return nil
	}
	return onFleet(ctx, cfg, res, say, (*fleet).joinAll, stop, (*fleet).measurePlacement)
}

// onFleet starts a fleet of cfg.Members full control planes and the hub, and runs phases on it.
func onFleet(ctx context.Context, cfg benchConfig, res *results, say func(string, ...any),
	phases ...func(*fleet, context.Context, benchConfig, *results, func(string, ...any)) error) error {
	say("starting %d control planes", cfg.Members+1)
	f, err := startFleet(ctx, cfg)
	if err != nil {
		return err
	}
	defer f.close()
	if err := f.startHub(ctx); err != nil {
		return err
	}
	for _, p := range phases {
		if err := p(f, ctx, cfg, res, say); err != nil {
			return err
		}
	}
	return nil
}

// joinAll joins every member, measuring nothing.
func (f *fleet) joinAll(ctx context.Context, _ benchConfig, _ *results, _ func(string, ...any)) error {
	for _, m := range f.Members() {
		if _, err := f.join(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// startFleet starts the hub's control plane and cfg.Members members', each logging the writes
// it serves.
func startFleet(ctx context.Context, cfg benchConfig) (*fleet, error) {
	crds, err := config.MemberCRDs()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, cfg.Members)
	for i := 1; i <= cfg.Members; i++ {
		names = append(names, fmt.Sprintf("m%02d", i))
	}
	opts := fleetOptions(cfg)
	opts.Members = controlplane.Named(controlplane.Options{CRDs: crds, StartTimeout: 5 * time.Minute, AuditWrites: true, Fsync: true, Output: cpOutput}, names...)
	f, err := fixture.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &fleet{Fleet: f, cfg: cfg}, nil
}

// measureJoin measures join and cost per empty member: members join one by one, black holes
// registered first.
func (f *fleet) measureJoin(ctx context.Context, cfg benchConfig, res *results, say func(string, ...any)) error {
	say("registering %d black holes and %d members", cfg.BlackHoles, cfg.Members)
	holes, err := f.registerBlackHoles(ctx, cfg.BlackHoles)
	if err != nil {
		return err
	}
	defer holes.close()
	for i, m := range f.Members() {
		took, err := f.join(ctx, m)
		if err != nil {
			return err
		}
		res.JoinTimes = append(res.JoinTimes, took)
		if n := i + 1; n&(n-1) == 0 || n == len(f.Members()) { // 1, 2, 4, 8, ...
			p, err := f.cost(ctx, n, 0, 0)
			if err != nil {
				return err
			}
			res.Cost = append(res.Cost, p)
		}
	}
	res.MembersAtJoin = len(f.Members())
	if res.Unreachable, err = f.notReady(ctx, holes.names); err != nil {
		return err
	}
	res.EmptyBaseline = res.Cost[len(res.Cost)-1]
	return nil
}

// measureConvergence measures convergence throughput, writes per bundle and the steady state.
func (f *fleet) measureConvergence(ctx context.Context, cfg benchConfig, res *results, say func(string, ...any)) error {
	tm := f.Members()[:cfg.ThroughputMembers]
	say("creating %d bundles in each of %d members", cfg.BundlesPerMember, len(tm))
	if err := f.converge(ctx, tm, cfg.BundlesPerMember, res); err != nil {
		return err
	}
	say("steady state: counting writes and CPU for %s", cfg.Quiet)
	if err := f.steady(ctx, res); err != nil {
		return err
	}
	var err error
	res.CostWithBundles, err = f.cost(ctx, len(f.Members()), cfg.ThroughputMembers*cfg.BundlesPerMember, 0)
	return err
}

// measureUnmanaged measures the cost of ConfigMaps no bundle owns, in a member without bundles.
func (f *fleet) measureUnmanaged(ctx context.Context, cfg benchConfig, res *results, say func(string, ...any)) error {
	um := f.Members()[len(f.Members())-1]
	say("creating %d unmanaged ConfigMaps in %s", cfg.Unmanaged, um.Name)
	if err := f.createUnmanaged(ctx, um, cfg.Unmanaged); err != nil {
		return err
	}
	var err error
	res.CostUnmanaged, err = f.cost(ctx, len(f.Members()), cfg.ThroughputMembers*cfg.BundlesPerMember, cfg.Unmanaged)
	return err
}

// createUnmanaged creates n ConfigMaps of 1 KiB that no bundle owns.
func (f *fleet) createUnmanaged(ctx context.Context, m *member, n int) error {
	if err := fixture.EnsureNamespace(ctx, m.Client, "unmanaged"); err != nil {
		return err
	}
	payload := string(make([]byte, 1024))
	return parallel(ctx, n, 16, func(ctx context.Context, i int) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unmanaged-%05d", i), Namespace: "unmanaged"},
			Data: map[string]string{"payload": payload}}
		return m.Client.Create(ctx, cm)
	})
}

// parallel runs fn for 0..n-1 with the given concurrency and returns the first error.
func parallel(ctx context.Context, n, workers int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}
