package election

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/leaderelection"
)

// Elector elects one process among those that run it, with a Lock, as long as its context
// lasts: it campaigns, leads until it cannot renew the Lease in time, and campaigns again. It
// never ends the process. Work that only the elected process may do asks Leading before it
// writes and is resynchronised by OnElected each time the process is elected.
type Elector struct {
	lock    *Lock
	timings Timings
	log     logr.Logger

	mu sync.Mutex // guards leading and onElected; never held while a callback runs
	// leading is true from the election until client-go gives the Lease up.
	leading   bool
	onElected []func()
}

// NewElector returns an elector that holds lock with timings; log receives its elections and
// losses.
func NewElector(lock *Lock, timings Timings, log logr.Logger) *Elector {
	e := &Elector{lock: lock, timings: timings, log: log}
	lock.OnValidAgain(e.validAgain)
	return e
}

// Leading reports whether this process is elected and certainly holds the Lease (Lock.Valid).
func (e *Elector) Leading() bool {
	e.mu.Lock()
	leading := e.leading
	e.mu.Unlock()
	return leading && e.lock.Valid()
}

// OnElected calls fn, in a goroutine of its own, each time this process is elected, and at
// once if it is elected already.
func (e *Elector) OnElected(fn func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.onElected = append(e.onElected, fn)
	if e.leading {
		go fn()
	}
}

// Start campaigns, leads and campaigns again until ctx ends; then it releases the Lease if it
// holds it.
func (e *Elector) Start(ctx context.Context) error {
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            e.lock,
			LeaseDuration:   e.timings.LeaseDuration,
			RenewDeadline:   e.timings.RenewDeadline,
			RetryPeriod:     e.timings.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            e.lock.inner.LeaseMeta.Name, // leader_election_master_status{name}, as controller-runtime's
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: e.started,
				OnStoppedLeading: e.stopped,
			},
		})
		if err != nil {
			return fmt.Errorf("configuring the election of %s: %w", e.lock.Describe(), err)
		}
		le.Run(ctx) // returns when the Lease is lost, or ctx ends
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every process campaigns.
func (e *Elector) NeedLeaderElection() bool { return false }

// started runs when this process is elected; ctx ends when it stops leading (client-go
// cancels it before it calls stopped, so a late start changes nothing).
func (e *Elector) started(ctx context.Context) {
	e.mu.Lock()
	if ctx.Err() != nil {
		e.mu.Unlock()
		return
	}
	e.leading = true
	fns := append([]func(){}, e.onElected...)
	e.mu.Unlock()
	e.log.Info("Elected for the hub-wide work", "lease", e.lock.Describe())
	for _, fn := range fns {
		go fn()
	}
}

// validAgain runs when the Lease is Valid again after a renewal slower than the margin: Leading
// said false meanwhile, and the work it refused is resynchronised as on an election.
func (e *Elector) validAgain() {
	e.mu.Lock()
	fns := []func(){}
	if e.leading {
		fns = append(fns, e.onElected...)
	}
	e.mu.Unlock()
	for _, fn := range fns {
		go fn()
	}
}

// stopped runs whenever a campaign ends, elected or not.
func (e *Elector) stopped() {
	e.mu.Lock()
	was := e.leading
	e.leading = false
	e.mu.Unlock()
	if was {
		e.log.Info("Lost the election for the hub-wide work; campaigning again", "lease", e.lock.Describe())
	}
}
