package main

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Goals of the scale curve, checked at its largest point.
const (
	// goalScaleP99 bounds the hub's heal p99 as a ratio to the floor's.
	goalScaleP99 = 3.0
	// goalMemberRSS bounds the hub's resident memory per healthy member.
	goalMemberRSS = 1 << 20
	// goalShareSpread bounds how far a replica's memory per managed member may be from the
	// replicas' mean: memory proportional to the share.
	goalShareSpread = 0.25
)

// printScale prints the scale curve's tables and the goals its largest point missed (and its
// sharded points' takeovers).
func (r *results) printScale(p printer, cfg benchConfig) {
	sc := r.Scale
	if len(sc.Points) == 0 && len(sc.Skipped) == 0 {
		return
	}
	p("\n6. Scale curve: %.0f%% of the members black-holed (accept, never answer), the others slim kube-apiservers on one shared etcd; per row, fresh hub replicas join every member one at a time; heal latency over %d rounds of %d drifts, hub then floor",
		100*cfg.Scale.BlackHoleShare, cfg.Scale.Rounds, cfg.Scale.Drifts)
	p("| members (black holes) | replicas | join p50 / p99 | heal p50 / p99 | floor p50 / p99 | p50 / floor | p99 / floor | writes in steady state: members / heartbeat / leases / other | hub CPU in steady state | black holes not Ready |")
	p("|---|---|---|---|---|---|---|---|---|---|")
	for _, pt := range sc.Points {
		st, hub, floor := pt.Steady, pt.Hub.all(), pt.Floor.all()
		p("| %d (%d) | %d | %s / %s | %s / %s | %s / %s | %.2fx | %.2fx | %d / %d / %d / %d in %.0fs | %.2fs (%.1f%% of a core) | %d of %d |",
			pt.Members, pt.BlackHoles, pt.Replicas, ms(pt.Joins.pct(50)), ms(pt.Joins.pct(99)), ms(hub.pct(50)), ms(hub.pct(99)),
			ms(floor.pct(50)), ms(floor.pct(99)), ratio(hub.pct(50), floor.pct(50)), ratio(hub.pct(99), floor.pct(99)),
			st.ToMembers, st.Heartbeats, st.Leases, len(st.Other), st.Window.Seconds(), st.hubCPU(), 100*st.hubCPU()/st.Window.Seconds(), pt.HolesNotReady, pt.BlackHoles)
	}
	r.printScaleHealPath(p)
	r.printScaleCost(p)
	r.printScaleMachine(p)
	r.printReplicas(p)
	r.printTakeovers(p)
	r.printScaleNotes(p)
}

// printScaleCost prints the replicas' memory and goroutines at each row.
func (r *results) printScaleCost(p printer) {
	p("\nhub cost (all replicas together; the least RSS and heap of ten samples over 5 s): per black hole registered, then per healthy member joined")
	p("| members (black holes) | replicas | hub RSS | per black hole: RSS / heap / goroutines | per healthy member: RSS / heap / goroutines | per member, black holes included: RSS |")
	p("|---|---|---|---|---|---|")
	for _, pt := range r.Scale.Points {
		hr, hh, hg := pt.perBlackHole()
		mr, mh, mg := pt.perHealthyMember()
		p("| %d (%d) | %d | %s | %s / %s / %.1f | %s / %s / %.1f | %s |", pt.Members, pt.BlackHoles, pt.Replicas, mib(pt.totalRSS()),
			kib(hr), kib(hh), hg, mib2(mr), mib2(mh), mg, mib2(pt.perMember()))
	}
}

func kib(b float64) string { return fmt.Sprintf("%.0f KiB", b/1024) }

// mib2 renders bytes in MiB to two decimals: a figure compared with a goal of 1 MiB.
func mib2(b float64) string { return fmt.Sprintf("%.2f MiB", b/1024/1024) }

// printScaleMachine prints what the members cost the machine at each row, in its steady window.
func (r *results) printScaleMachine(p printer) {
	p("\nthe machine in each row's steady window (members' kube-apiservers and etcd; busy cores include the hub and anything else running)")
	p("| members | replicas | kube-apiservers | kube-apiserver RSS (anon), mean | etcd RSS | MemAvailable | members' CPU | machine busy | open files |")
	p("|---|---|---|---|---|---|---|---|---|")
	for _, pt := range r.Scale.Points {
		l := pt.Steady.Load
		p("| %d | %d | %d | %s (%s) | %s | %s | %.2f cores | %.2f cores | %d |", pt.Members, pt.Replicas, pt.Healthy, mib(l.APIServerRSS),
			mib(l.APIServerAnon), mib(l.EtcdRSS), mib(l.MemAvailable), l.FleetCores, l.MachineCores, l.FDs)
	}
}

// printReplicas prints each sharded replica's share and memory.
func (r *results) printReplicas(p printer) {
	header := false
	for _, pt := range r.Scale.Points {
		if pt.Replicas < 2 {
			continue
		}
		if !header {
			p("\nsharded replicas: members managed (by their Leases; healthy ones in brackets; by MemberCluster status.replica) and memory")
			p("| members | replica | managed (healthy) | status.replica | RSS | over its empty self | per healthy member it manages: RSS / heap | goroutines |")
			p("|---|---|---|---|---|---|---|---|")
			header = true
		}
		for _, rc := range pt.Replica {
			rss, heap := rc.perManaged()
			p("| %d | %s | %d (%d) | %d | %s | %s | %s / %s | %.0f |", pt.Members, rc.ID, rc.Share, rc.HealthyShare, rc.StatusShare,
				mib(rc.At.RSS), mib(rc.At.RSS-rc.Base.RSS), mib2(rss), mib2(heap), rc.At.Goroutines)
		}
	}
}

// printTakeovers prints the takeover after a replica's kill -9 at each sharded point.
func (r *results) printTakeovers(p printer) {
	header := false
	for _, pt := range r.Scale.Points {
		t := pt.Takeover
		if t.Victim == "" {
			continue
		}
		if !header {
			p("\ntakeover after kill -9 (sharded points): the replica holding the first heal member's Lease killed, one of that member's ConfigMaps tampered with at once")
			p("| members | replicas | victim: members whose Lease it held | drift healed after the kill | all its Leases taken over after | bound: lease duration + probe interval | met? |")
			p("|---|---|---|---|---|---|---|")
			header = true
		}
		met := "no"
		if t.met() {
			met = "yes"
		}
		p("| %d | %d | %s: %d | %s | %s | %s | %s |", pt.Members, pt.Replicas, t.Victim, t.Members, t.within(t.Healed), t.within(t.Leases), t.Bound, met)
	}
}

// within renders a time of the takeover, or that it did not happen within the wait.
func (t takeover) within(d time.Duration) string {
	if d <= 0 {
		return fmt.Sprintf("not within %s", t.Wait)
	}
	return secs(d)
}

// printScaleNotes prints the unplanned steady-state writes, what was skipped and the goals.
func (r *results) printScaleNotes(p printer) {
	for _, pt := range r.Scale.Points {
		if len(pt.Steady.Other) > 0 {
			p("unplanned steady-state writes at %d members, %d replicas: %s", pt.Members, pt.Replicas, summary(groupWrites(pt.Steady.Other)))
		}
		if pt.HubErrors+pt.FloorErrors > 0 {
			p("drifts not healed at %d members, %d replicas: hub %d, floor %d", pt.Members, pt.Replicas, pt.HubErrors, pt.FloorErrors)
		}
	}
	for _, s := range r.Scale.Skipped {
		p("skipped: %s", s)
	}
	if missed := r.Scale.missedGoals(); len(missed) > 0 {
		p("scale goals missed at the largest point (the takeover at any sharded point): %s", strings.Join(missed, "; "))
	} else if len(r.Scale.Points) > 0 {
		p("scale goals missed at the largest point (the takeover at any sharded point): none (heal p99 <= %.0fx the floor, <= %s per healthy member, replicas within %.0f%% of their mean per managed member, takeover after kill -9 within the lease duration and one probe interval)",
			goalScaleP99, mib(goalMemberRSS), 100*goalShareSpread)
	}
}

// missedGoals names the goals the largest point missed, with the figure that missed, for every
// replica count, and the takeovers that missed theirs at any sharded point.
func (s scaleResults) missedGoals() []string {
	largest := 0
	for _, pt := range s.Points {
		largest = max(largest, pt.Members)
	}
	var missed []string
	for _, pt := range s.Points {
		if t := pt.Takeover; t.Victim != "" && !t.met() {
			missed = append(missed, fmt.Sprintf("%d members, %d replicas: takeover after kill -9 within %s (drift healed: %s, Leases taken over: %s)",
				pt.Members, pt.Replicas, t.Bound, t.within(t.Healed), t.within(t.Leases)))
		}
		if pt.Members != largest {
			continue
		}
		if q := ratio(pt.Hub.all().pct(99), pt.Floor.all().pct(99)); q > goalScaleP99 {
			missed = append(missed, fmt.Sprintf("%d replicas: heal p99 <= %.0fx the floor (%.2fx)", pt.Replicas, goalScaleP99, q))
		}
		if rss, _, _ := pt.perHealthyMember(); rss > goalMemberRSS {
			missed = append(missed, fmt.Sprintf("%d replicas: <= %s per healthy member (%s)", pt.Replicas, mib(goalMemberRSS), mib2(rss)))
		}
		if spread := pt.shareSpread(); spread > goalShareSpread {
			missed = append(missed, fmt.Sprintf("%d replicas: memory per managed member within %.0f%% of the mean (%.0f%%)", pt.Replicas, 100*goalShareSpread, 100*spread))
		}
	}
	return missed
}

// shareSpread is the largest relative distance of a sharded replica's memory per managed
// healthy member from the replicas' mean; 0 for a single hub.
func (pt scalePoint) shareSpread() float64 {
	if len(pt.Replica) < 2 {
		return 0
	}
	var per []float64
	var mean float64
	for _, rc := range pt.Replica {
		rss, _ := rc.perManaged()
		per = append(per, rss)
		mean += rss / float64(len(pt.Replica))
	}
	if mean <= 0 {
		return math.Inf(1)
	}
	var spread float64
	for _, v := range per {
		spread = max(spread, math.Abs(v-mean)/mean)
	}
	return spread
}
