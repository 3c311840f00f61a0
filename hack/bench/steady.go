package main

import (
	"fmt"
	"time"
)

// steadyState is what the hub wrote once every bundle had converged, as the API servers served
// it.
type steadyState struct {
	// From and To bound the window.
	From, To time.Time
	// Writes are the hub's writes in the window, Unplanned those of them that are not planned.
	Writes    []servedWrite
	Unplanned []unplannedWrite
	// Settle are the hub's writes between convergence and the window.
	Settle []servedWrite
}

// counts returns the hub's writes in the window: to the members, planned to the hub cluster,
// and unplanned to the hub cluster.
func (s steadyState) counts() (members, planned, unplannedHub int) {
	for _, w := range s.Writes {
		switch {
		case w.planned():
			planned++
		case w.Plane == hubPlane:
			unplannedHub++
		default:
			members++
		}
	}
	return members, planned, unplannedHub
}

// silent reports whether the hub made no unplanned write in the window.
func (s steadyState) silent() bool { return len(s.Unplanned) == 0 }

// printSteady prints the hub's writes in the steady-state window by control plane, resource,
// verb and user agent, and, if any is unplanned, the FAIL line and the writes one by one.
func (r *results) printSteady(p printer) {
	s := r.Steady
	zero := r.ConvergedAt
	p("\nsteady state: the hub's writes from %+.1fs to %+.1fs after all Ready, as the API servers served them",
		s.From.Sub(zero).Seconds(), s.To.Sub(zero).Seconds())
	p("| control plane | resource | verb | user agent | writes | response codes | |")
	p("|---|---|---|---|---|---|---|")
	groups := groupWrites(s.Writes)
	for _, g := range groups {
		kind := "UNPLANNED"
		if g.Planned {
			kind = "planned: the Fleet's heartbeat"
		}
		p("| %s | %s | %s | %s | %d | %s | %s |", g.Plane, g.What, g.Verb, g.UserAgent, g.Count, g.codes(), kind)
	}
	if len(groups) == 0 {
		p("| - | - | - | - | 0 | - | |")
	}
	p("the hub's writes between all Ready and the window: %s", summary(groupWrites(s.Settle)))
	if s.silent() {
		return
	}
	p("FAIL: steady state is not silent: %d unplanned writes of the hub in %.0fs (times relative to all Ready)%s",
		len(s.Unplanned), s.To.Sub(s.From).Seconds(), listed(len(s.Unplanned)))
	for i, u := range s.Unplanned {
		if i == maxListed {
			break
		}
		p("  %s", u.describe(zero))
	}
}

// listed says how many of n writes are listed.
func listed(n int) string {
	if n <= maxListed {
		return ":"
	}
	return fmt.Sprintf(", the first %d:", maxListed)
}
