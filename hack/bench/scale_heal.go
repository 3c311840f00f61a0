package main

import (
	"fmt"
	"time"
)

// Where the hub's heal time goes at each point of the scale curve: the heal latencies by drift
// kind, the hub's beside the floor's, and the hub's own account of the part between the watch
// event and the written heal (its metrics, over its turns of the point's rounds).

// meanOf is a histogram's sum (seconds) and count of observations.
type meanOf struct {
	Sum   float64
	Count uint64
}

// mean is the mean observation, 0 without any.
func (m meanOf) mean() time.Duration {
	if m.Count == 0 {
		return 0
	}
	return time.Duration(m.Sum / float64(m.Count) * float64(time.Second))
}

// plus and minus add and subtract totals.
func (m meanOf) plus(o meanOf) meanOf  { return meanOf{Sum: m.Sum + o.Sum, Count: m.Count + o.Count} }
func (m meanOf) minus(o meanOf) meanOf { return meanOf{Sum: m.Sum - o.Sum, Count: m.Count - o.Count} }

// hubHealTime is the hub's account of its heals, summed over replicas: how long the heal
// members' bundles waited in the work queue (configbundle_member_queue_wait_seconds, every
// reconcile) and the time from the watch event to the heal written
// (configbundle_heal_latency_seconds).
type hubHealTime struct {
	QueueWait, EventToHeal meanOf
}

// add and sub add and subtract accounts: what was observed between two scrapes is the later
// one less the earlier.
func (t hubHealTime) add(o hubHealTime) hubHealTime {
	return hubHealTime{QueueWait: t.QueueWait.plus(o.QueueWait), EventToHeal: t.EventToHeal.plus(o.EventToHeal)}
}

func (t hubHealTime) sub(o hubHealTime) hubHealTime {
	return hubHealTime{QueueWait: t.QueueWait.minus(o.QueueWait), EventToHeal: t.EventToHeal.minus(o.EventToHeal)}
}

// histogram totals a histogram over the series whose labels match (nil: all).
func (m metrics) histogram(name string, match func(labels map[string]string) bool) meanOf {
	var out meanOf
	for _, s := range m[name].GetMetric() {
		if (match == nil || match(labelsOf(s))) && s.Histogram != nil {
			out.Sum += s.GetHistogram().GetSampleSum()
			out.Count += s.GetHistogram().GetSampleCount()
		}
	}
	return out
}

// hubHealTimeNow scrapes every replica and totals their account of the heal members' heals.
func (s *scaleFleet) hubHealTimeNow() (hubHealTime, error) {
	names := map[string]bool{}
	for _, m := range s.healMembers() {
		names[m.Name] = true
	}
	healMember := func(l map[string]string) bool { return names[l["cluster"]] }
	var t hubHealTime
	for _, rep := range s.replicas {
		m, err := scrape(rep.proc.MetricsAddr)
		if err != nil {
			return t, err
		}
		t = t.add(hubHealTime{
			QueueWait:   m.histogram("configbundle_member_queue_wait_seconds", healMember),
			EventToHeal: m.histogram("configbundle_heal_latency_seconds", healMember),
		})
	}
	return t, nil
}

// printScaleHealPath prints, for every point, the heal latencies by drift kind and the hub's
// account of its part.
func (r *results) printScaleHealPath(p printer) {
	if len(r.Scale.Points) == 0 {
		return
	}
	p("\nwhere the heal time goes: by drift kind, the hub's heal p50 / p99 beside the floor's; the hub's mean queue wait and mean time from the watch event to the heal written, from its metrics (configbundle_member_queue_wait_seconds, configbundle_heal_latency_seconds) over its turns")
	p("| members | replicas | drift | hub p50 / p99 | floor p50 / p99 | p50 / floor | p99 / floor | hub mean: tamper to heal seen | floor mean | hub mean: queue wait / event to heal written |")
	p("|---|---|---|---|---|---|---|---|---|---|")
	for _, pt := range r.Scale.Points {
		for k, kind := range driftKinds {
			hub, floor := pt.Hub[k], pt.Floor[k]
			own := ""
			if k == 0 {
				own = fmt.Sprintf("%s / %s (%d / %d)", ms(pt.HubHealTime.QueueWait.mean()), ms(pt.HubHealTime.EventToHeal.mean()),
					pt.HubHealTime.QueueWait.Count, pt.HubHealTime.EventToHeal.Count)
			}
			p("| %d | %d | %s | %s / %s | %s / %s | %.2fx | %.2fx | %s | %s | %s |", pt.Members, pt.Replicas, kind,
				ms(hub.pct(50)), ms(hub.pct(99)), ms(floor.pct(50)), ms(floor.pct(99)),
				ratio(hub.pct(50), floor.pct(50)), ratio(hub.pct(99), floor.pct(99)), ms(hub.mean()), ms(floor.mean()), own)
		}
	}
}

// mean is the mean latency, 0 without any.
func (l latencies) mean() time.Duration {
	if len(l) == 0 {
		return 0
	}
	var total time.Duration
	for _, d := range l {
		total += d
	}
	return total / time.Duration(len(l))
}
