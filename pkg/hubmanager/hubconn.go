package hubmanager

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
)

// The hub connection's TCP timings, those of the members' connections.
const (
	hubDialTimeout = 30 * time.Second
	hubKeepAlive   = 30 * time.Second
)

// hubConnection returns a copy of cfg whose every TCP connection to the hub cluster the
// returned dialer makes, so that they can all be closed at once when the hub cluster does not
// answer in time (a request of the election, or hubProbe): the next requests then dial again
// instead of waiting on a dead connection until HTTP/2's health check notices, about 45 s later.
func hubConnection(cfg *rest.Config) (*rest.Config, *connrotation.Dialer) {
	dialer := connrotation.NewDialer((&net.Dialer{Timeout: hubDialTimeout, KeepAlive: hubKeepAlive}).DialContext)
	cfg = rest.CopyConfig(cfg)
	cfg.Dial = dialer.DialContext
	return cfg, dialer
}

// hubProbe asks the hub cluster's API server its version every interval, as the provider
// probes the members, and closes every hub connection when it gets no answer within timeout:
// the hub's dead connections are replaced as the members' are. A replica without leader
// election runs it; with it, the election's own requests, bounded, do the same.
type hubProbe struct {
	hub               rest.Interface
	interval, timeout time.Duration
	closeConns        func()
	log               logr.Logger
}

func newHubProbe(cfg *rest.Config, interval, timeout time.Duration, closeConns func(), log logr.Logger) (*hubProbe, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &hubProbe{hub: disc.RESTClient(), interval: interval, timeout: timeout, closeConns: closeConns, log: log}, nil
}

// Start probes until ctx ends.
func (p *hubProbe) Start(ctx context.Context) error {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	answering := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		probeCtx, cancel := context.WithTimeout(ctx, p.timeout)
		err := p.hub.Get().AbsPath("/version").Do(probeCtx).Error()
		timedOut := err != nil && ctx.Err() == nil && errors.Is(probeCtx.Err(), context.DeadlineExceeded)
		cancel()
		switch {
		case timedOut:
			p.closeConns()
			if answering {
				p.log.Info("The hub cluster did not answer in time; its connections are closed and dialled again", "timeout", p.timeout)
			}
			answering = false
		case err == nil && !answering:
			p.log.Info("The hub cluster answers again")
			answering = true
		}
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: it runs on every replica.
func (p *hubProbe) NeedLeaderElection() bool { return false }
