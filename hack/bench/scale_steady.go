package main

import (
	"context"
	"time"
)

// scaleSteady is what the steady-state window of a scale point saw.
type scaleSteady struct {
	Window time.Duration
	// HubCPU are the replicas' CPU seconds in the window, in replica order.
	HubCPU []float64
	// Load is the members' cost and the machine's load in the window.
	Load machineLoad
	// ToMembers, Heartbeats and Leases count the hub's writes in the window, as the API servers
	// served them: to the members, the Fleet's heartbeat (planned), the replicas' Leases
	// (planned when sharded: their renewals); Other are the rest, to the hub cluster.
	ToMembers, Heartbeats, Leases int
	Other                         []servedWrite
}

// hubCPU is the replicas' CPU seconds together.
func (s scaleSteady) hubCPU() float64 {
	var total float64
	for _, c := range s.HubCPU {
		total += c
	}
	return total
}

// steadyWindow waits settleTime, then counts the replicas' CPU, the machine's load and the
// hub's writes for cfg.Quiet.
func (s *scaleFleet) steadyWindow(ctx context.Context) (scaleSteady, error) {
	s.say("scale: steady state: counting writes and CPU for %s", s.cfg.Quiet)
	if err := sleepCtx(ctx, settleTime); err != nil {
		return scaleSteady{}, err
	}
	pids := make([]int, 0, len(s.replicas))
	for _, rep := range s.replicas {
		pids = append(pids, rep.proc.Pid())
	}
	from := time.Now()
	load, hubCPU, err := loadOver(ctx, s.cfg.Quiet, s.Shared, pids)
	if err != nil {
		return scaleSteady{}, err
	}
	to := time.Now()
	st := scaleSteady{Window: to.Sub(from), HubCPU: hubCPU, Load: load}
	if err := sleepCtx(ctx, auditGrace); err != nil {
		return st, err
	}
	all, err := s.servedWrites()
	if err != nil {
		return st, err
	}
	for _, w := range hubWritesIn(all, from, to) {
		switch {
		case w.Plane != hubPlane:
			st.ToMembers++
		case w.planned():
			st.Heartbeats++
		case w.Resource == "leases":
			st.Leases++
		default:
			st.Other = append(st.Other, w)
		}
	}
	return st, nil
}
