package main

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// The scale curve: for each member count of cfg.Scale.Points, a share of them
// black-holed, and for each replica count, a fresh hub (or fresh sharded replicas) joins every
// member, then the benchmark measures its memory and goroutines per healthy member, the joins,
// the writes and CPU of a steady-state window, and heal latency against the floor; sharded, the
// takeover after a replica's kill -9 (scale_takeover.go). The members are slim
// control planes on one shared etcd (controlplane.Shared), started once and kept from one point
// to the next; black holes are TCP listeners that accept connections and never answer.

// scalePoint is the measurement of one member count with one replica count.
type scalePoint struct {
	Members, Healthy, BlackHoles, Replicas int
	// Joins are the healthy members' joins (Secret -> MemberCluster Ready), one at a time, the
	// black holes registered first; HolesNotReady the black holes not Ready after them.
	Joins         latencies
	HolesNotReady int
	// Replica are the replicas' costs and shares, in replica order.
	Replica []replicaCost
	// Hub and Floor are the heal latencies of every round, by drift kind; HealMembers were
	// tampered with.
	Hub, Floor heals
	// HubHealTime is the replicas' own account of the heal members' heals in their turns.
	HubHealTime            hubHealTime
	HubErrors, FloorErrors int
	HealMembers            int
	// Steady is what the steady-state window saw.
	Steady scaleSteady
	// Takeover is the takeover after a replica's kill -9, at sharded points only.
	Takeover takeover
}

// replicaCost is one hub replica at a point: its identity, the members it manages (by its
// Leases; sharded replicas only), its cost with no member (Base), with the point's black holes
// registered (Holes) and with every member joined (At).
type replicaCost struct {
	ID                  string
	Share, HealthyShare int
	StatusShare         int // MemberClusters whose status.replica names it
	Base, Holes, At     costPoint
}

// scaleResults are the curve's points, in the order measured, and what was skipped.
type scaleResults struct {
	Points  []scalePoint
	Skipped []string
}

// blackHolesAt is how many of n members are black holes.
func (c scaleConfig) blackHolesAt(n int) int {
	return int(math.Round(c.BlackHoleShare * float64(n)))
}

// measureScale runs the scale curve: points in ascending order, each with every replica
// count, so that every replica count of a point sees the same members running.
func measureScale(ctx context.Context, cfg benchConfig, res *results, say func(string, ...any)) error {
	sc := cfg.Scale
	if len(sc.Points) == 0 {
		return nil
	}
	replicas := sc.Replicas
	if slices.Max(replicas) > 1 && !supportsSharding(cfg.HubBinary) {
		res.Scale.Skipped = append(res.Scale.Skipped, fmt.Sprintf("replica counts over 1: %s has no --sharded flag yet", cfg.HubBinary))
		replicas = []int{1}
	}
	s, err := newScaleFleet(ctx, cfg, say)
	if err != nil {
		return err
	}
	defer s.close()
	for _, n := range sc.Points {
		if err := s.grow(ctx, n-sc.blackHolesAt(n)); err != nil {
			return err
		}
		for _, r := range replicas {
			say("scale: %d members (%d black-holed), %d hub replica(s)", n, sc.blackHolesAt(n), r)
			p, err := s.measurePoint(ctx, n, r)
			if err != nil {
				return fmt.Errorf("scale point of %d members, %d replicas: %w", n, r, err)
			}
			res.Scale.Points = append(res.Scale.Points, p)
		}
	}
	return nil
}

// supportsSharding reports whether the hub binary has the --sharded flag: in hub run, or in
// hub itself for a binary built before hub run existed.
func supportsSharding(binary string) bool {
	run, _ := exec.Command(binary, "run", "--help").CombinedOutput()
	root, _ := exec.Command(binary, "--help").CombinedOutput()
	return strings.Contains(string(run)+string(root), "--sharded")
}

// measurePoint measures n members with r replicas: fresh replicas join every member and their
// cost is measured (joinAndCost), then the steady state; then the heal members get their
// bundles and heal latency is measured; sharded, a replica is then killed and its takeover
// measured; then the members are unregistered.
func (s *scaleFleet) measurePoint(ctx context.Context, n, r int) (scalePoint, error) {
	p := scalePoint{Members: n, BlackHoles: s.cfg.blackHolesAt(n), Replicas: r}
	p.Healthy = n - p.BlackHoles
	if err := s.startReplicas(ctx, r); err != nil {
		return p, err
	}
	defer s.reset(ctx)
	if err := s.joinAndCost(ctx, &p); err != nil {
		return p, err
	}
	var err error
	if p.Steady, err = s.steadyWindow(ctx); err != nil {
		return p, err
	}
	if err := s.createHealBundles(ctx); err != nil {
		return p, err
	}
	if err := s.waitCaughtUp(ctx); err != nil {
		return p, err
	}
	if err := s.measureScaleHeal(ctx, &p); err != nil {
		return p, err
	}
	if r < 2 {
		return p, nil
	}
	return p, s.measureTakeover(ctx, &p)
}

// measureScaleHeal measures heal latency in rounds, each the hub's turn then the floor's with
// the replicas stopped; it leaves the replicas running and caught up.
func (s *scaleFleet) measureScaleHeal(ctx context.Context, p *scalePoint) error {
	hm := s.healMembers()
	p.HealMembers = len(hm)
	for i := range s.cfg.Rounds {
		s.say("scale: round %d of %d: hub, %d drifts over %d members", i+1, s.cfg.Rounds, s.cfg.Drifts, len(hm))
		before, err := s.hubHealTimeNow()
		if err != nil {
			return err
		}
		hub, hubErrs, err := s.driftsByKind(ctx, hm, s.cfg.Drifts)
		if err != nil {
			return err
		}
		after, err := s.hubHealTimeNow()
		if err != nil {
			return err
		}
		p.HubHealTime = p.HubHealTime.add(after.sub(before))
		s.stopReplicas()
		s.say("scale: round %d of %d: floor, hub stopped", i+1, s.cfg.Rounds)
		floor, floorErrs, err := s.floorDrifts(ctx, hm, s.cfg.Drifts)
		if err != nil {
			return err
		}
		p.Hub.add(hub)
		p.Floor.add(floor)
		p.HubErrors, p.FloorErrors = p.HubErrors+hubErrs, p.FloorErrors+floorErrs
		if err := s.startReplicas(ctx, p.Replicas); err != nil {
			return err
		}
		if err := s.waitCaughtUp(ctx); err != nil {
			return err
		}
	}
	return nil
}

// scaleTimeout bounds each wait of the scale curve: at a hundred members on two cores, a
// restart of the hub and its catching up take longer than at sixteen.
const scaleTimeout = 10 * time.Minute
