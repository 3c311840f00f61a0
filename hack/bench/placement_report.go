package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Goals of the placement latency: the p99 within goalPlacementRatio of the floor's,
// and under goalPlacementP99.
const (
	goalPlacementRatio = 2.0
	goalPlacementP99   = time.Second
)

// countChangeWrites collects the hub's writes from the first template change to the end: those
// of the placed bundle and its ConfigMap in the members (the floor's are in another namespace),
// per change and member, and those to the hub cluster.
func (f *fleet) countChangeWrites(ctx context.Context, from, to time.Time, perMemberChanges int, pr *placementResults) error {
	if err := sleepCtx(ctx, auditGrace); err != nil {
		return err
	}
	all, err := f.servedWrites()
	if err != nil {
		return err
	}
	pr.ChangeWrites = map[string]float64{}
	for _, w := range hubWritesIn(all, from, to) {
		switch {
		case w.Plane == hubPlane:
			if !w.planned() && !ofTemplated(w) && !ofSourced(w) { // their status and revisions: the templated and sourced rows'
				pr.ChangeHubWrites = append(pr.ChangeHubWrites, w)
			}
		case w.Namespace == placementNS && w.Name == templatedName:
			if w.Code < 300 && w.what()+" "+w.Verb == "configbundles update" {
				pr.TemplatedUpdates++
			}
		case w.Namespace != placementNS || w.Name != placementName:
		case w.Code >= 300:
			pr.ChangeRefused++
		default:
			pr.ChangeWrites[w.what()+" "+w.Verb] += 1 / float64(perMemberChanges)
		}
	}
	return nil
}

// placementWrites is the placement controller's writes of the placed bundle per change and
// member: those of configbundles (the member reconciler writes its status and the ConfigMap).
func (pr *placementResults) placementWrites() float64 {
	var n float64
	for k, v := range pr.ChangeWrites {
		if strings.HasPrefix(k, "configbundles ") {
			n += v
		}
	}
	return n
}

// missedGoals names the placement goals this run missed, with the figure that missed.
func (pr *placementResults) missedGoals() []string {
	var missed []string
	hub, floor := pr.Hub.pct(99), pr.Floor.pct(99)
	if r := ratio(hub, floor); r > goalPlacementRatio {
		missed = append(missed, fmt.Sprintf("p99 within %.1fx of the floor (%.2fx)", goalPlacementRatio, r))
	}
	if hub >= goalPlacementP99 {
		missed = append(missed, fmt.Sprintf("p99 under %s (%s)", goalPlacementP99, ms(hub)))
	}
	if w := pr.placementWrites(); w < 0.9999 || w > 1.0001 || pr.ChangeWrites["configbundles update"] < 0.9999 {
		missed = append(missed, fmt.Sprintf("exactly 1 update of the placed bundle per member per change (%.2f)", w))
	}
	if len(pr.QuietWrites) > 0 {
		missed = append(missed, fmt.Sprintf("no write to the members when nothing changed (%d)", len(pr.QuietWrites)))
	}
	if pr.HubErrors+pr.FloorErrors > 0 {
		missed = append(missed, fmt.Sprintf("every change seen in every member within %s (hub %d, floor %d not)", placementTimeout, pr.HubErrors, pr.FloorErrors))
	}
	return append(append(missed, pr.templatedMissed()...), pr.sourcedMissed()...)
}

func (r *results) printPlacement(p printer, cfg benchConfig) {
	pr := &r.Placement
	if cfg.Placements < 1 {
		return
	}
	p("\n5. Placement (FleetBundle template change acknowledged on the hub -> updated ConfigMap seen through a watch in every one of %d members; the max over the members per change), %d changes each, hub and floor alternating",
		pr.Members, cfg.Placements)
	p("| placer | p50 | p90 | p99 | changes | p50 / floor | p99 / floor | first placement (create) |")
	p("|---|---|---|---|---|---|---|---|")
	row := func(name string, l latencies, create time.Duration) {
		p("| %s | %s | %s | %s | %d | %.2fx | %.2fx | %s |", name, ms(l.pct(50)), ms(l.pct(90)), ms(l.pct(99)), len(l),
			ratio(l.pct(50), pr.Floor.pct(50)), ratio(l.pct(99), pr.Floor.pct(99)), ms(create))
	}
	row("floor: minimal client, one merge patch of the ConfigBundle per member in parallel", pr.Floor, pr.FloorCreate)
	row("ConfigBundle Hub: one merge patch of the FleetBundle's template", pr.Hub, pr.HubCreate)
	row("ConfigBundle Hub, templated FleetBundle (GoTemplate): one merge patch of its template", pr.Templated, pr.TemplatedCreate)
	row("ConfigBundle Hub, sourced FleetBundle (dataFrom): one merge patch of its hub source ConfigMap", pr.Sourced, pr.SourcedCreate)
	r.printTemplated(p)
	p("sourced (dataFrom a labelled hub ConfigMap) against the template change: p50 %s vs %s, p99 %s vs %s: %.2fx (goal within %.1fx); ConfigMaps in the hub's cache: %.0f (its sources only); Secrets in the hub's cache: %.0f (the members' kubeconfig Secrets only)",
		ms(pr.Sourced.pct(50)), ms(pr.Hub.pct(50)), ms(pr.Sourced.pct(99)), ms(pr.Hub.pct(99)), ratio(pr.Sourced.pct(99), pr.Hub.pct(99)), goalSourcedRatio, pr.CachedConfigMaps, pr.CachedSecrets)
	r.printPlacementWrites(p)
	r.printPlacementMemory(p)
	if missed := pr.missedGoals(); len(missed) > 0 {
		p("placement goals missed: %s", strings.Join(missed, "; "))
	} else {
		p("placement goals missed: none (p99 within %.1fx of the floor and under %s; 1 write of the placed bundle per member per change; 0 when nothing changed; templated p99 within %.1fx of the untemplated one's)",
			goalPlacementRatio, goalPlacementP99, goalTemplatedRatio)
	}
}

func (r *results) printPlacementWrites(p printer) {
	pr := &r.Placement
	keys := slices.Sorted(maps.Keys(pr.ChangeWrites))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, pr.ChangeWrites[k]))
	}
	changes := max(1, len(pr.Hub)+pr.HubErrors)
	p("\nhub writes per template change per member (API servers): placement %.2f (goal exactly 1); all of the placed bundle's objects: %s; refused: %d",
		pr.placementWrites(), strings.Join(parts, ", "), pr.ChangeRefused)
	p("hub writes to the hub cluster per template change: %.2f (%s)", float64(len(pr.ChangeHubWrites))/float64(changes), summary(groupWrites(pr.ChangeHubWrites)))
	p("after changes that need no write (%s): hub writes to the members %d (goal 0): %s; unplanned to the hub cluster: %s",
		strings.Join(pr.QuietChanges, ", "), len(pr.QuietWrites), summary(groupWrites(pr.QuietWrites)), summary(groupWrites(pr.QuietHubWrites)))
}

func (r *results) printPlacementMemory(p printer) {
	pr := &r.Placement
	p("\n| FleetBundles added | members each | all AllReady after | RSS before -> after | Go heap before -> after | per FleetBundle (RSS / heap) | per placed bundle (heap) |")
	p("|---|---|---|---|---|---|---|")
	n := float64(max(1, pr.FleetBundles))
	dRSS, dHeap := pr.MemAfter.RSS-pr.MemBefore.RSS, pr.MemAfter.Heap-pr.MemBefore.Heap
	p("| %d | %d | %s | %s -> %s | %s -> %s | %.1f KiB / %.1f KiB | %.1f KiB |", pr.FleetBundles, pr.Members, pr.AllReadyAfter.Round(100*time.Millisecond),
		mib(pr.MemBefore.RSS), mib(pr.MemAfter.RSS), mib(pr.MemBefore.Heap), mib(pr.MemAfter.Heap), dRSS/n/1024, dHeap/n/1024,
		dHeap/n/float64(max(1, pr.Members))/1024)
}
