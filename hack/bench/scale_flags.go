package main

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// scaleConfig sizes the scale curve (scale.go). Each field says what it sizes.
type scaleConfig struct {
	// Points are the member counts of the curve, ascending; BlackHoleShare of each (rounded)
	// are black holes, the others slim members (real kube-apiservers on one shared etcd).
	Points         []int
	BlackHoleShare float64
	// Replicas are the hub replica counts measured at every point; more than one run with
	// --sharded, each with its own --replica-id.
	Replicas []int
	// HealMembers (at most) hold Bundles each; the heal measurement makes Drifts drifts over
	// them per turn, in Rounds rounds of the hub's turn then the floor's.
	HealMembers, Bundles, Drifts, Rounds int
	// Quiet is the steady-state window in which writes and CPU are counted.
	Quiet time.Duration
	// LeaseDuration, if set, is passed to sharded replicas as --lease-duration.
	LeaseDuration time.Duration
}

// fullScaleConfig is the curve of `make bench`: up to maxMembers, the most this machine hosts
// (capacity.go and docs/performance.md say why).
func fullScaleConfig() scaleConfig {
	return scaleConfig{Points: []int{1, 4, 16, maxMembers}, BlackHoleShare: 0.2, Replicas: []int{1, 3},
		HealMembers: 2, Bundles: 50, Drifts: 400, Rounds: 2, Quiet: 60 * time.Second}
}

// smokeScaleConfig is the smoke run's curve: one point of 5 members, one a black hole.
func smokeScaleConfig() scaleConfig {
	return scaleConfig{Points: []int{5}, BlackHoleShare: 0.2, Replicas: []int{1},
		HealMembers: 2, Bundles: 10, Drifts: 24, Rounds: 1, Quiet: 3 * time.Second}
}

// maxMembers is the largest point of the full curve.
const maxMembers = 250

// scaleFlags holds the scale curve's flags until they are applied.
type scaleFlags struct {
	points, replicas                           *string
	only                                       *bool
	drifts, rounds, bundles, capacity, capStep *int
	quiet, lease                               *time.Duration
}

// bindScaleFlags defines the scale curve's flags on the default flag set.
func bindScaleFlags() *scaleFlags {
	return &scaleFlags{
		points:   flag.String("scale", "", fmt.Sprintf("Member counts of the scale curve, comma-separated, 20%% of each black-holed; \"none\" skips it (default: the configuration's, %v in the full run).", fullScaleConfig().Points)),
		replicas: flag.String("scale-replicas", "", "Hub replica counts of the scale curve, comma-separated; over 1 they run --sharded (default 1,3 in the full run)."),
		only:     flag.Bool("scale-only", false, "Run the scale curve alone, none of the other phases."),
		drifts:   flag.Int("scale-drifts", 0, "Drifts per heal turn of each scale point (default: the configuration's)."),
		rounds:   flag.Int("scale-rounds", 0, "Heal rounds (hub, then floor) of each scale point (default: the configuration's)."),
		bundles:  flag.Int("scale-bundles", 0, "ConfigBundles in each heal member of the scale curve (default: the configuration's)."),
		quiet:    flag.Duration("scale-quiet", 0, "The steady-state window of each scale point (default: the configuration's)."),
		lease:    flag.Duration("scale-lease-duration", 0, "--lease-duration of sharded replicas (default: the hub's)."),
		capacity: flag.Int("scale-capacity", 0, "Run the capacity probe alone: add slim members, idle, up to this many, until the machine's limit."),
		capStep:  flag.Int("scale-capacity-step", 0, "Members added per step of the capacity probe (default: the configuration's)."),
	}
}

// apply sets the flags given (set) in cfg.
func (s *scaleFlags) apply(cfg *benchConfig, set map[string]bool) error {
	var err error
	if set["scale"] {
		if cfg.Scale.Points, err = parseCounts(*s.points); err != nil {
			return fmt.Errorf("--scale: %w", err)
		}
	}
	if set["scale-replicas"] {
		if cfg.Scale.Replicas, err = parseCounts(*s.replicas); err != nil || len(cfg.Scale.Replicas) == 0 {
			return fmt.Errorf("--scale-replicas: at least one count: %w", err)
		}
	}
	cfg.ScaleOnly = *s.only
	for name, apply := range map[string]func(){
		"scale-drifts": func() { cfg.Scale.Drifts = *s.drifts }, "scale-rounds": func() { cfg.Scale.Rounds = *s.rounds },
		"scale-bundles": func() { cfg.Scale.Bundles = *s.bundles }, "scale-quiet": func() { cfg.Scale.Quiet = *s.quiet },
		"scale-lease-duration": func() { cfg.Scale.LeaseDuration = *s.lease }, "scale-capacity": func() { cfg.Capacity = *s.capacity },
		"scale-capacity-step": func() { cfg.CapacityStep = *s.capStep },
	} {
		if set[name] {
			apply()
		}
	}
	if cfg.Scale.Rounds < 1 || cfg.Scale.Drifts < 1 || cfg.Scale.Bundles < 1 || cfg.CapacityStep < 1 {
		return fmt.Errorf("--scale-rounds, --scale-drifts, --scale-bundles and --scale-capacity-step must be at least 1")
	}
	return nil
}

// parseCounts parses "1,4,16" into ascending, distinct positive counts; "" and "none" are none.
func parseCounts(s string) ([]int, error) {
	if s == "" || s == "none" {
		return nil, nil
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive count", part)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
