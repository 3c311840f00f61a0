package main

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// hubOutage is how long the hub cluster's API server is paused (SIGSTOP) in the hub-outage phase
// (enforcement must survive the hub cluster).
const hubOutage = 30 * time.Second

// hubOutageResults are the figures of the hub-outage phase.
type hubOutageResults struct {
	// Heal is the heal latency of the drifts made while the hub cluster was paused; Errors the
	// drifts not healed in time.
	Heal   latencies
	Errors int
	// Paused is how long the hub cluster was paused.
	Paused time.Duration
	// Reported is the time from the resume until every member's MemberCluster is Ready and the
	// Fleet's heartbeat is newer than the resume: the reports caught up.
	Reported time.Duration
}

// measureHubOutage measures the hub's heal latency while the hub cluster's API server is paused
// for hubOutage (one replica, the default flags), and how soon after the resume its reports are
// fresh again.
func (f *fleet) measureHubOutage(ctx context.Context, cfg benchConfig, res *results, say func(string, ...any)) error {
	if f.hub() == nil {
		if err := f.restartHub(ctx, cfg); err != nil {
			return err
		}
	}
	hm := f.Members()[:cfg.HealMembers]
	out := &res.HubOutage
	say("hub outage: the hub cluster's API server paused for %s, drifts over %d members meanwhile", hubOutage, len(hm))
	if err := f.HubPlane.Pause(); err != nil {
		return err
	}
	paused := time.Now()
	var err error
	for err == nil && time.Since(paused) < hubOutage {
		var l latencies
		var failed int
		l, failed, err = f.drifts(ctx, hm, 4*len(hm))
		out.Heal, out.Errors = append(out.Heal, l...), out.Errors+failed
	}
	out.Paused = time.Since(paused)
	if rerr := f.HubPlane.Resume(); rerr != nil || err != nil {
		return errors.Join(err, rerr)
	}
	resumed := time.Now()
	err = wait.PollUntilContextTimeout(ctx, settlePoll/5, waitTimeout, true, func(ctx context.Context) (bool, error) {
		fl, err := f.GetFleet(ctx)
		if err != nil || fl.Status.HeartbeatTime == nil || fl.Status.HeartbeatTime.Time.Before(resumed.Truncate(time.Second)) {
			return false, nil
		}
		return f.AllReady(ctx, hubv1alpha1.ConnectedReason, f.Members()...), nil
	})
	out.Reported = time.Since(resumed)
	return err
}

// printHubOutage prints the hub-outage phase's figures.
func (r *results) printHubOutage(p printer) {
	o := r.HubOutage
	if o.Paused == 0 {
		return
	}
	p("\nHub cluster's API server paused %s (one replica): %d drifts healed meanwhile, p50 %s, p90 %s, p99 %s, max %s, %d not healed in time; reports fresh again %s after the resume (the Fleet's heartbeat is written every 10 s)",
		o.Paused.Round(time.Second), len(o.Heal), ms(o.Heal.pct(50)), ms(o.Heal.pct(90)), ms(o.Heal.pct(99)), ms(o.Heal.pct(100)), o.Errors, o.Reported.Round(time.Millisecond))
}
