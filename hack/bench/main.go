// Command bench measures ConfigBundle Hub on real control planes and prints a table: heal latency
// against the physical floor (a minimal client-go healer) and the seed operator's polling model,
// convergence throughput and API writes per bundle, the hub's cost per member and per bundle, and
// join time and heal latency with unreachable members among the healthy ones, heal latency right
// after a restart of the hub with 20,000 bundles, and FleetBundle placement latency against its
// floor, writes per placement and memory per FleetBundle. It exits non-zero
// if the hub writes anything but the Fleet's heartbeat in steady state (counted by the API
// servers). `make bench` runs it; `go test ./hack/bench` runs a small smoke version that checks
// correctness only.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"configbundle.dev/hub/internal/testing/controlplane"
)

func main() {
	cfg, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if cfg.Rounds < 1 {
		fmt.Fprintln(os.Stderr, "bench: --rounds must be at least 1")
		os.Exit(2)
	}
	ctrl.SetLogger(logr.Discard())
	if os.Getenv("BENCH_DEBUG") != "" {
		cpOutput = os.Stderr
	}
	if err := controlplane.CheckAssets(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	ctx, cancel := signalContext()
	defer cancel()
	if cfg.Capacity > 0 {
		os.Exit(probeCapacity(ctx, cfg))
	}
	res, err := run(ctx, cfg, os.Stderr)
	if res != nil {
		res.print(os.Stdout, cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if !cfg.ScaleOnly && !cfg.RolloutOnly && !cfg.PlacementOnly && !cfg.HistoryOnly && !cfg.RestartOnly && !res.Steady.silent() {
		fmt.Fprintln(os.Stderr, "bench: failed: the hub wrote in steady state (see the FAIL line)")
		os.Exit(1)
	}
}

// signalContext returns a context canceled by SIGINT or SIGTERM, and says which one came: a
// long run stopped from elsewhere tells why.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-signals:
			fmt.Fprintf(os.Stderr, "bench: received %v at %s: stopping\n", sig, time.Now().UTC().Format(time.RFC3339))
			cancel()
		case <-ctx.Done():
		}
		signal.Stop(signals)
	}()
	return ctx, cancel
}

// probeCapacity runs the capacity probe alone, prints its table and returns the exit code.
func probeCapacity(ctx context.Context, cfg benchConfig) int {
	say := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...) }
	res, err := runCapacity(ctx, cfg, say)
	if res != nil {
		fmt.Fprintf(os.Stdout, "\nConfigBundle Hub capacity probe — %s — %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), machine())
		res.print(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	return 0
}

// parseFlags returns the configuration the flags ask for: the full one, or the smoke one, with
// the sizes given explicitly.
func parseFlags() (benchConfig, error) {
	var (
		smoke = flag.Bool("smoke", false, "Start from the small smoke configuration (flags given explicitly still apply).")
		bin   = flag.String("hub-binary", "bin/hub", "The hub binary to measure.")
		sizes = map[string]*int{}
		quiet = flag.Duration("quiet", 0, fmt.Sprintf("The steady-state window, from %s after convergence (default: the configuration's).", settleTime))
	)
	for name, usage := range map[string]string{
		"members":      "Member clusters for the cost-per-member curve (measured at 1, 2, 4, ... up to this).",
		"bundles":      "ConfigBundles per member in the throughput run.",
		"drifts":       "Drifts per heal-latency run, spread over the heal members.",
		"unmanaged":    "Unmanaged ConfigMaps created in one member.",
		"rounds":       "Rounds of the heal measurement, each the hub's turn then the floor's.",
		"placements":   "FleetBundle template changes of the placement latency run (and as many of the floor's); 0 skips the placement phase.",
		"fleetbundles": "FleetBundles created at once, each placed in every member, for the hub's memory per FleetBundle.",
		"backlog":      "ConfigBundles created at once in the last member while the first one's heals are measured; 0 skips the backlog phase.",
		"tenants":      "Tenants of the revision history phase, each a FleetBundle at the bounds of its history, for the hub's memory; 0 skips the phase.",
	} {
		sizes[name] = flag.Int(name, 0, usage+" (default: the configuration's)")
	}
	rolloutSoak := flag.Duration("rollout-soak", 0, "The soakTime of each stage of the rollout phase; 0s skips the phase (default: the configuration's, 2s in the full run).")
	rolloutOnly := flag.Bool("rollout-only", false, "Run the rollout phase alone (the members join first), none of the other phases.")
	placementOnly := flag.Bool("placement-only", false, "Run the placement phase alone (the members join first; with its templated FleetBundle), none of the other phases.")
	healOnly := flag.Bool("heal-only", false, "Run the heal phase alone (the members join and their bundles converge first), none of the other phases.")
	historyOnly := flag.Bool("history-only", false, "Run the revision history phase alone (no member joins), none of the other phases.")
	scale, restart := bindScaleFlags(), bindRestartFlags()
	flag.Parse()
	cfg := fullConfig()
	if *smoke {
		cfg = smokeConfig()
	}
	cfg.HubBinary = *bin
	sized := map[string]*int{"members": &cfg.Members, "bundles": &cfg.BundlesPerMember, "drifts": &cfg.Drifts, "unmanaged": &cfg.Unmanaged,
		"rounds": &cfg.Rounds, "placements": &cfg.Placements, "fleetbundles": &cfg.FleetBundles, "backlog": &cfg.BacklogBundles,
		"tenants": &cfg.HistoryTenants}
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) {
		set[f.Name] = true
		if field, ok := sized[f.Name]; ok {
			*field = *sizes[f.Name]
		}
		switch f.Name {
		case "quiet":
			cfg.Quiet = *quiet
		case "rollout-soak":
			cfg.RolloutSoak = *rolloutSoak
		case "rollout-only":
			cfg.RolloutOnly = *rolloutOnly
		case "placement-only":
			cfg.PlacementOnly = *placementOnly
		case "history-only":
			cfg.HistoryOnly = *historyOnly
		case "heal-only":
			cfg.HealOnly = *healOnly
		}
	})
	return cfg, errors.Join(scale.apply(&cfg, set), restart.apply(&cfg, set))
}
