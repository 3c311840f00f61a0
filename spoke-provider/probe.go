package spokeprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/version"
)

// probe checks a member every ProbeInterval until its connection ends.
func (p *Provider) probe(name string, conn *connection) {
	ticker := time.NewTicker(p.opts.ProbeInterval)
	defer ticker.Stop()
	for {
		select {
		case <-conn.ctx.Done():
			return
		case <-ticker.C:
		}
		ctx, cancel := context.WithTimeout(conn.ctx, p.opts.ProbeTimeout)
		version, err := conn.serverVersion(ctx)
		cancel()
		if conn.ctx.Err() != nil {
			return
		}
		p.observe(name, conn, version, err)
	}
}

// observe records a probe's result.
func (p *Provider) observe(name string, conn *connection, version string, err error) {
	p.mu.Lock()
	m, ok := p.members[name]
	var changed, recovered bool
	if ok {
		changed, recovered = m.probed(conn, version, err, time.Now(), p.opts.FailureThreshold)
	}
	p.mu.Unlock()
	switch {
	case recovered:
		p.log.Info("Member reachable again", "cluster", name)
	case changed && err != nil:
		p.log.Info("Member unreachable", "cluster", name, "error", err.Error())
	}
	if changed {
		p.changed(name)
	}
	if recovered {
		p.ready(name)
	}
}

// serverVersion asks the member for its version: the probe.
func (c *connection) serverVersion(ctx context.Context) (string, error) {
	raw, err := c.discovery.Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return "", err
	}
	info := version.Info{}
	if err := json.Unmarshal(raw, &info); err != nil {
		return "", fmt.Errorf("decoding /version: %w", err)
	}
	return info.GitVersion, nil
}
