package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"configbundle.dev/hub/pkg/sharding"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// Takeover after kill -9: at a sharded point, after the heal rounds, the replica
// that holds the first heal member's Lease is killed with SIGKILL and one of that member's
// ConfigMaps tampered with at once. The survivors must heal it, and hold every member Lease the
// dead replica held, within one lease duration and one probe interval of the kill.

// takeover is what the kill -9 of one sharded replica showed: the replica killed, how many
// members' Leases it held, and the time from the kill until the drift made in one of them was
// seen healed (Healed) and until a survivor held every one of its Leases (Leases), zero if not
// within Wait. Bound is the goal: the replicas' lease duration plus one probe interval.
type takeover struct {
	Victim                      string
	Members                     int
	Healed, Leases, Bound, Wait time.Duration
}

// met reports whether the drift was healed and the Leases taken over within the bound.
func (t takeover) met() bool {
	return t.Healed > 0 && t.Leases > 0 && t.Healed <= t.Bound && t.Leases <= t.Bound
}

// Timings of the takeover measurement.
const (
	// takeoverWaits bounds each wait of the takeover, in bounds (lease duration plus probe
	// interval), and never beyond scaleTimeout.
	takeoverWaits = 4
	// leasePoll is how often the members' Leases are listed during a takeover.
	leasePoll = 100 * time.Millisecond
)

// measureTakeover kills the replica that holds the first heal member's Lease with SIGKILL,
// tampers with one of that member's ConfigMaps at once, and measures the takeover in
// p.Takeover. The survivors are left running; the dead replica is no longer in s.replicas.
func (s *scaleFleet) measureTakeover(ctx context.Context, p *scalePoint) error {
	m, victim, lost, err := s.takeoverVictim(ctx)
	if err != nil {
		return err
	}
	desired, err := desiredConfigMaps(ctx, m)
	if err != nil {
		return fmt.Errorf("reading the bench bundles of %s: %w", m.Name, err)
	}
	if len(desired) == 0 {
		return fmt.Errorf("no bench bundles in %s", m.Name)
	}
	name := slices.Min(slices.Collect(maps.Keys(desired)))
	events, stop, err := watchTargets(ctx, m, []string{name})
	if err != nil {
		return fmt.Errorf("watching the bench ConfigMaps of %s: %w", m.Name, err)
	}
	defer stop()
	t := takeover{Victim: victim.ID, Members: len(lost), Bound: s.takeoverBound()}
	t.Wait = min(takeoverWaits*t.Bound, scaleTimeout)
	s.say("scale: takeover: killing %s (SIGKILL; it holds %d members' Leases), then drifting %s/%s", victim.ID, len(lost), m.Name, name)
	killed := s.kill(victim)
	since, err := tamper(ctx, m, name, 0)
	if err != nil {
		return err
	}
	deadline := killed.Add(t.Wait)
	var wg sync.WaitGroup
	wg.Go(func() {
		healed, err := awaitHeal(ctx, m, name, desired[name], events[name], since, time.Until(deadline))
		t.Healed = s.since(killed, healed, err)
	})
	wg.Go(func() {
		taken, err := s.awaitLeases(ctx, lost, deadline)
		t.Leases = s.since(killed, taken, err)
	})
	wg.Wait()
	p.Takeover = t
	s.say("scale: takeover: drift healed after %s, Leases taken over after %s (bound %s; 0s: not within %s)",
		t.Healed.Round(time.Millisecond), t.Leases.Round(time.Millisecond), t.Bound, t.Wait)
	return ctx.Err()
}

// takeoverVictim returns the first heal member, the running replica that holds its Lease and
// the members whose Lease that replica holds.
func (s *scaleFleet) takeoverVictim(ctx context.Context) (*member, *hubReplica, []string, error) {
	hm := s.healMembers()
	if len(hm) == 0 {
		return nil, nil, nil, errors.New("no healthy member to drift in for the takeover")
	}
	holders, err := s.leaseHolders(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	victim := s.replica(holders[hm[0].Name])
	if victim == nil {
		return nil, nil, nil, fmt.Errorf("no running replica holds the Lease of %s (its holder: %q)", hm[0].Name, holders[hm[0].Name])
	}
	return hm[0], victim, heldBy(holders, victim.ID), nil
}

// since returns the time from the kill to at, or zero (and says why) if err.
func (s *scaleFleet) since(killed, at time.Time, err error) time.Duration {
	if err != nil {
		s.say("scale: takeover: %v", err)
		return 0
	}
	return at.Sub(killed)
}

// replica returns the running replica id, nil if none runs.
func (s *scaleFleet) replica(id string) *hubReplica {
	i := slices.IndexFunc(s.replicas, func(r *hubReplica) bool { return r.ID == id })
	if id == "" || i < 0 {
		return nil
	}
	return s.replicas[i]
}

// heldBy returns the members whose Lease holder is id.
func heldBy(holders map[string]string, id string) []string {
	var members []string
	for member, holder := range holders {
		if holder == id {
			members = append(members, member)
		}
	}
	return members
}

// kill ends the replica rep with SIGKILL, as a crash would, waits until it has exited and
// drops it from s.replicas; it returns the time the signal was sent.
func (s *scaleFleet) kill(rep *hubReplica) time.Time {
	killed := time.Now()
	s.StopHub(rep.name, syscall.SIGKILL)
	s.replicas = slices.DeleteFunc(s.replicas, func(r *hubReplica) bool { return r == rep })
	return killed
}

// awaitLeases waits, until deadline, for every Lease of the members to be held by a running
// replica, and returns when that was first seen.
func (s *scaleFleet) awaitLeases(ctx context.Context, members []string, deadline time.Time) (time.Time, error) {
	var taken time.Time
	err := wait.PollUntilContextTimeout(ctx, leasePoll, time.Until(deadline), true, func(ctx context.Context) (bool, error) {
		holders, err := s.leaseHolders(ctx)
		if err != nil {
			return false, nil
		}
		for _, m := range members {
			if s.replica(holders[m]) == nil {
				return false, nil
			}
		}
		taken = time.Now()
		return true, nil
	})
	if err != nil {
		return taken, fmt.Errorf("the Leases of %d members not taken over: %w", len(members), err)
	}
	return taken, nil
}

// takeoverBound is the takeover goal: the sharded replicas' lease duration plus
// one probe interval, as their flags set them (BENCH_HUB_ARGS included), else the hub's
// defaults.
func (s *scaleFleet) takeoverBound() time.Duration {
	args := append(fleetOptions(s.fleet.cfg).HubArgs, s.shardedArgs("")...)
	return flagDuration(args, "lease-duration", sharding.DefaultLeaseDuration) +
		flagDuration(args, "probe-interval", spokeprovider.DefaultProbeInterval)
}

// flagDuration returns the duration of the last flag name in args (-name=value, --name=value
// or the value in the next argument), def if there is none.
func flagDuration(args []string, name string, def time.Duration) time.Duration {
	d := def
	for i, a := range args {
		flagName, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || flagName != name {
			continue
		}
		if !hasValue && i+1 < len(args) {
			value = args[i+1]
		}
		if v, err := time.ParseDuration(value); err == nil {
			d = v
		}
	}
	return d
}
