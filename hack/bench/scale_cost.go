package main

import (
	"context"
	"time"

	"configbundle.dev/hub/internal/testing/hubprocess"
)

// sampleCost samples every running replica's memory and goroutines (sampleHubs), in replica
// order.
func (s *scaleFleet) sampleCost(ctx context.Context) ([]costPoint, error) {
	procs := make([]*hubprocess.Process, 0, len(s.replicas))
	for _, rep := range s.replicas {
		procs = append(procs, rep.proc)
	}
	return sampleHubs(ctx, procs)
}

// holeSettle is how long the replicas get to try the black holes (a probe interval) before
// their cost is sampled.
const holeSettle = 10 * time.Second

// joinAndCost has the running replicas join the point's members and samples their cost at
// each step: with no member, with the black holes registered (after holeSettle), and with every
// member joined and caught up; then it records the replicas' shares.
func (s *scaleFleet) joinAndCost(ctx context.Context, p *scalePoint) error {
	bases, err := s.sampleCost(ctx)
	if err != nil {
		return err
	}
	s.say("scale: registering %d black holes, then joining %d members one at a time", p.BlackHoles, p.Healthy)
	if err := s.registerPointHoles(ctx, p); err != nil {
		return err
	}
	if err := sleepCtx(ctx, holeSettle); err != nil {
		return err
	}
	holes, err := s.sampleCost(ctx)
	if err != nil {
		return err
	}
	if err := s.joinMembers(ctx, p); err != nil {
		return err
	}
	if err := s.waitCaughtUp(ctx); err != nil {
		return err
	}
	ats, err := s.sampleCost(ctx)
	if err != nil {
		return err
	}
	p.Replica = make([]replicaCost, len(ats))
	for i, at := range ats {
		p.Replica[i] = replicaCost{ID: s.replicas[i].ID, Base: bases[i], Holes: holes[i], At: at}
	}
	return s.shares(ctx, p)
}

// perHealthyMember is the replicas' memory (RSS, heap) and goroutines per healthy member: what
// joining them added, the black holes already registered.
func (p scalePoint) perHealthyMember() (rss, heap, goroutines float64) {
	return p.growth(p.Healthy, func(r replicaCost) (costPoint, costPoint) { return r.Holes, r.At })
}

// perMember is the replicas' memory (RSS) over their empty selves per member, black holes
// included.
func (p scalePoint) perMember() float64 {
	var rss float64
	for _, r := range p.Replica {
		rss += r.At.RSS - r.Base.RSS
	}
	return rss / float64(p.Members)
}

// perBlackHole is the replicas' memory (RSS, heap) and goroutines per black hole registered.
func (p scalePoint) perBlackHole() (rss, heap, goroutines float64) {
	return p.growth(p.BlackHoles, func(r replicaCost) (costPoint, costPoint) { return r.Base, r.Holes })
}

// growth is what the replicas' memory (RSS, heap) and goroutines grew by between the two
// samples span picks of each, per one of n; zero for n = 0.
func (p scalePoint) growth(n int, span func(replicaCost) (from, to costPoint)) (rss, heap, goroutines float64) {
	if n == 0 {
		return 0, 0, 0
	}
	for _, r := range p.Replica {
		from, to := span(r)
		rss += to.RSS - from.RSS
		heap += to.Heap - from.Heap
		goroutines += to.Goroutines - from.Goroutines
	}
	return rss / float64(n), heap / float64(n), goroutines / float64(n)
}

// totalRSS is the replicas' resident memory together.
func (p scalePoint) totalRSS() float64 {
	var total float64
	for _, r := range p.Replica {
		total += r.At.RSS
	}
	return total
}

// perManaged is what joining the healthy members a replica manages added to its memory, per
// member.
func (r replicaCost) perManaged() (rss, heap float64) {
	if r.HealthyShare == 0 {
		return 0, 0
	}
	n := float64(r.HealthyShare)
	return (r.At.RSS - r.Holes.RSS) / n, (r.At.Heap - r.Holes.Heap) / n
}
