package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/hubprocess"
)

// smokeTimeout bounds the smoke run on a loaded two-core machine.
const smokeTimeout = 10 * time.Minute

// TestShortRun runs the benchmark once, briefly, so that `make test` sees it work: the members'
// join and the placement phase at the smoke's size, checked as TestSmoke checks them.
func TestShortRun(t *testing.T) {
	cfg := smokeConfig()
	cfg.PlacementOnly = true
	res := runSmall(t, cfg)
	checkPlacement(t, cfg, &res.Placement)
}

// runSmall builds the hub and runs the benchmark with cfg within smokeTimeout.
func runSmall(t *testing.T, cfg benchConfig) *results {
	t.Helper()
	if err := controlplane.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	var err error
	if cfg.HubBinary, err = hubprocess.Build(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), smokeTimeout)
	defer cancel()
	var progress strings.Builder
	res, err := run(ctx, cfg, &progress)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, progress.String())
	}
	return res
}

// TestSmoke runs the benchmark's every phase at a small size, so that it cannot rot
// (`make bench-smoke`; it runs when BENCH_SMOKE=1 and is skipped otherwise). It checks
// correctness only, never a time: every drift is healed by the hub and by the floor in every
// round, every bundle converges, the hub writes nothing unplanned in steady state, the black
// holes do not join, every placement reaches every member with one write of the placed bundle
// per member (none when nothing changed), every member of the scale curve joins and is managed
// by exactly one replica, every drift made around a restart of the hub is healed and the Fleet
// is not AllReady before the hub has reconciled every bundle once, the figures are all there.
func TestSmoke(t *testing.T) {
	if os.Getenv("BENCH_SMOKE") != "1" {
		t.Skip("the full smoke runs with make bench-smoke (BENCH_SMOKE=1)")
	}
	cfg := smokeConfig()
	res := runSmall(t, cfg)
	var table strings.Builder
	res.print(&table, cfg)
	t.Log(table.String())

	if !res.HealedAllDrifts {
		t.Errorf("not every drift of %d per run was healed (the table says how many were)", cfg.Drifts)
	}
	if !res.Steady.silent() {
		t.Errorf("the hub made %d unplanned writes in steady state (see the FAIL line of the table)", len(res.Steady.Unplanned))
	}
	if want := cfg.ThroughputMembers * cfg.BundlesPerMember; res.Bundles != want {
		t.Errorf("converged %d bundles, want %d", res.Bundles, want)
	}
	if res.WritesPerBundle < 2 {
		t.Errorf("%.2f hub writes per bundle: a bundle needs at least a ConfigMap and a status write", res.WritesPerBundle)
	}
	if len(res.JoinTimes) != cfg.Members || res.Unreachable != cfg.BlackHoles {
		t.Errorf("joined %d of %d members, %d of %d black holes not Ready", len(res.JoinTimes), cfg.Members, res.Unreachable, cfg.BlackHoles)
	}
	if len(res.Cost) == 0 || res.CostUnmanaged.RSS == 0 || res.EmptyBaseline.Goroutines == 0 {
		t.Errorf("cost figures missing: %+v", res.Cost)
	}
	checkPlacement(t, cfg, &res.Placement)
	if o := res.HubOutage; len(o.Heal) == 0 || o.Errors != 0 || o.Reported == 0 {
		t.Errorf("hub outage: %d drifts healed, %d not healed in time, reports fresh after %v", len(o.Heal), o.Errors, o.Reported)
	}
	checkRollout(t, &res.Rollout)
	checkHistory(t, cfg, &res.History)
	checkScale(t, cfg, &res.Scale)
	if b := res.Backlog; len(b.Alone) != cfg.Drifts || len(b.During) != cfg.Drifts || b.AloneErrors+b.DuringErrors != 0 {
		t.Errorf("backlog: %d and %d of %d drifts healed alone and during the backlog (errors %d / %d)", len(b.Alone), len(b.During), cfg.Drifts, b.AloneErrors, b.DuringErrors)
	}
	checkRestart(t, cfg, &res.Restart)
	for _, want := range []string{"6. Scale curve", "1. Heal latency", "1b. Heal latency during another member's backlog", "1c. Heal latency right after a hub restart", "floor: minimal client-go informer", fmt.Sprintf("median over %d rounds", cfg.Rounds), "goals missed:",
		"2. Convergence", "steady state: the hub's writes", "3. Cost", "4. Join", "5. Placement", "placement goals missed:", "Hub cluster's API server paused", "7. Staged rollout", "rollout goals missed:",
		"8. Revision history", "history goals missed:"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q", want)
		}
	}
}

// checkRestart checks the restart phase's correctness, never a time: its bundles spread over its
// members, both drifts in each member healed, each member Synced again, and the Fleet never
// AllReady before.
func checkRestart(t *testing.T, cfg benchConfig, rr *restartResults) {
	t.Helper()
	if want := min(cfg.Members, restartMembers); len(rr.Members) != want {
		t.Fatalf("restart: %d members measured, want %d", len(rr.Members), want)
	}
	total := 0
	for _, m := range rr.Members {
		total += m.Bundles
		if m.Away == 0 || m.After == 0 || m.Synced == 0 {
			t.Errorf("restart: %s: drift made while the hub was stopped healed after %v, drift made once connected after %v (0: not healed), Synced after %v",
				m.Name, m.Away, m.After, m.Synced)
		}
	}
	if total != cfg.RestartBundles || rr.FleetEarly != 0 {
		t.Errorf("restart: %d of %d bundles; the Fleet seen AllReady %d times before every member was Synced", total, cfg.RestartBundles, rr.FleetEarly)
	}
}

// checkPlacement checks the placement phase's correctness: every change seen in every member, by
// the hub and by the floor, one write of the placed bundle per member per change, none when
// nothing changed, and the memory figures there.
func checkPlacement(t *testing.T, cfg benchConfig, pr *placementResults) {
	t.Helper()
	if len(pr.Hub) != cfg.Placements || len(pr.Floor) != cfg.Placements || len(pr.Templated) != cfg.Placements || pr.HubErrors+pr.FloorErrors+pr.TemplatedErrors != 0 {
		t.Errorf("placement: %d, %d and %d of %d hub, floor and templated changes seen in every member (errors %d / %d / %d)",
			len(pr.Hub), len(pr.Floor), len(pr.Templated), cfg.Placements, pr.HubErrors, pr.FloorErrors, pr.TemplatedErrors)
	}
	if len(pr.Sourced) != cfg.Placements || pr.SourcedErrors != 0 {
		t.Errorf("placement: %d of %d source changes seen in every member (errors %d)", len(pr.Sourced), cfg.Placements, pr.SourcedErrors)
	}
	if pr.CachedConfigMaps != 1 {
		t.Errorf("placement: %.0f ConfigMaps in the hub's cache, want 1 (the sourced FleetBundle's source alone)", pr.CachedConfigMaps)
	}
	if w := pr.templatedWrites(); w < 0.9999 || w > 1.0001 {
		t.Errorf("placement: %.2f writes of the templated bundle per member per template change, want exactly 1", w)
	}
	if w := pr.placementWrites(); w < 0.9999 || w > 1.0001 {
		t.Errorf("placement: %.2f writes of the placed bundle per member per template change, want exactly 1 (%v)", w, pr.ChangeWrites)
	}
	if len(pr.QuietWrites) != 0 {
		t.Errorf("placement: %d hub writes to the members after changes that need none: %s", len(pr.QuietWrites), summary(groupWrites(pr.QuietWrites)))
	}
	if pr.FleetBundles != cfg.FleetBundles || pr.MemAfter.RSS == 0 {
		t.Errorf("placement: memory figures missing: %d FleetBundles, %+v", pr.FleetBundles, pr.MemAfter)
	}
}

// checkRollout checks the rollout phase's correctness, never a time: every run measured, no
// member outside the canary got a failed revision, no member updated before the stage before its
// own had soaked its soakTime, and the hub's writes of the placed bundle as the contract says: 1 per member
// per revision, 1 more for the rolled-back canary, none to the stages not reached.
func checkRollout(t *testing.T, rr *rolloutResults) {
	t.Helper()
	if len(rr.Runs) != 5 || rr.HaltAfter <= 0 || rr.RolledBackAfter <= 0 || rr.CanaryRestoredAfter <= 0 {
		t.Fatalf("rollout: %d of 5 runs measured; halted after %v, rolled back after %v, canary restored after %v",
			len(rr.Runs), rr.HaltAfter, rr.RolledBackAfter, rr.CanaryRestoredAfter)
	}
	if len(rr.Leaks) > 0 {
		t.Errorf("rollout: members outside the canary got a failed revision: %v", rr.Leaks)
	}
	for _, run := range rr.Runs {
		if short := run.shortSoaks(rr); len(short) > 0 {
			t.Errorf("rollout %s: stages soaked less than soakTime %s: %v", run.What, rr.Soak, short)
		}
		if bad := run.wrongWrites(); len(bad) > 0 {
			t.Errorf("rollout %s (revision %d): writes of the placed bundle per member (got/want): %v", run.What, run.Revision, bad)
		}
	}
}

// checkHistory checks the revision history phase's correctness: every tenant's history pruned
// within the bounds (waitHistoriesPruned), the memory figures there.
func checkHistory(t *testing.T, cfg benchConfig, hr *historyResults) {
	t.Helper()
	if hr.Tenants != cfg.HistoryTenants || hr.Kept == 0 || hr.Kept > cfg.HistoryTenants*historyTemplates || hr.MemAfter.RSS == 0 || hr.PeakRSS == 0 {
		t.Errorf("history: %d of %d tenants, %d revisions kept, memory %+v", hr.Tenants, cfg.HistoryTenants, hr.Kept, hr.MemAfter)
	}
}

// checkScale checks the scale curve's correctness: every point measured with every replica
// count, every healthy member joined, no black hole Ready, every drift healed, each healthy
// member managed by exactly one sharded replica, the cost and steady-state figures there.
func checkScale(t *testing.T, cfg benchConfig, sr *scaleResults) {
	t.Helper()
	if want := len(cfg.Scale.Points) * len(cfg.Scale.Replicas); len(sr.Points) != want {
		t.Fatalf("scale: %d points measured, want %d (skipped: %v)", len(sr.Points), want, sr.Skipped)
	}
	for _, p := range sr.Points {
		at := fmt.Sprintf("scale point of %d members, %d replicas", p.Members, p.Replicas)
		if len(p.Joins) != p.Healthy || p.HolesNotReady != p.BlackHoles {
			t.Errorf("%s: %d of %d members joined, %d of %d black holes not Ready", at, len(p.Joins), p.Healthy, p.HolesNotReady, p.BlackHoles)
		}
		want := cfg.Scale.Drifts * cfg.Scale.Rounds
		hub, floor := p.Hub.all(), p.Floor.all()
		if len(hub) != want || len(floor) != want || p.HubErrors+p.FloorErrors != 0 {
			t.Errorf("%s: %d hub and %d floor heals of %d (errors %d / %d)", at, len(hub), len(floor), want, p.HubErrors, p.FloorErrors)
		}
		if len(p.Replica) != p.Replicas || p.Steady.Window <= 0 || p.Steady.Load.APIServerRSS == 0 {
			t.Errorf("%s: cost or steady-state figures missing: %+v, %+v", at, p.Replica, p.Steady)
		}
		checkShares(t, at, p)
	}
}

// checkShares checks that the replicas' shares of the healthy members add up to them, by Lease
// and by status.replica.
func checkShares(t *testing.T, at string, p scalePoint) {
	t.Helper()
	healthy := 0
	for _, r := range p.Replica {
		if r.At.RSS == 0 || r.Base.RSS == 0 {
			t.Errorf("%s: replica %q has no memory figure", at, r.ID)
		}
		healthy += r.HealthyShare
	}
	if healthy != p.Healthy {
		t.Errorf("%s: the replicas manage %d healthy members, want each of the %d by exactly one: %+v", at, healthy, p.Healthy, p.Replica)
	}
}
