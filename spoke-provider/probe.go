package spokeprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// probe checks a member every ProbeInterval until its connection ends: that it answers (GET
// /version), that it allows the credential Options.Rights (one SelfSubjectRulesReview; see
// checkRights) and that it serves the CRDs (one discovery request per CRD version).
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
		began := time.Now()
		version, err := conn.serverVersion(ctx)
		if err == nil {
			err = p.checkRights(ctx, conn)
		}
		if err == nil {
			err = p.checkCRDs(ctx, conn)
		}
		cancel()
		if conn.ctx.Err() != nil {
			return
		}
		probeDuration.WithLabelValues(name).Observe(time.Since(began).Seconds())
		p.observe(name, conn, version, err)
	}
}

// observe records a probe's result.
func (p *Provider) observe(name string, conn *connection, version string, err error) {
	known, changed, recovered, unreachable := p.recordProbe(name, conn, version, err)
	if known && err == nil {
		recordAnswer(name, time.Now())
	}
	if unreachable {
		// The member's TCP connections may be dead without knowing it (a partition, a middlebox
		// that lost their state): HTTP/2 would reuse them until its health check gives up, 45 s
		// later. Closed, each probe and watch dials afresh, and the first probe that gets through
		// after the outage finds the member.
		conn.dialer.CloseAll()
	}
	switch {
	case recovered:
		p.log.Info("Member reachable again", "cluster", name)
	case changed && err != nil && unreachable:
		p.log.Info("Member unreachable", "cluster", name, "error", err.Error())
	case changed && err != nil:
		p.log.Info("Member not Ready", "cluster", name, "error", err.Error()) // Forbidden, CRDMissing
	}
	if changed {
		p.notifyChanged(name)
	}
	if recovered {
		p.notifyReady(name)
	}
}

// recordProbe records a probe of conn in the member's state (see member.recordProbe). It
// reports whether the member is known (it has not left), whether its State changed, whether it
// recovered, and whether conn is its active connection and the member is Unreachable.
func (p *Provider) recordProbe(name string, conn *connection, version string, err error) (known, changed, recovered, unreachable bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.recordProbeLocked(name, conn, version, err)
}

func (p *Provider) recordProbeLocked(name string, conn *connection, version string, err error) (known, changed, recovered, unreachable bool) {
	m, ok := p.members[name]
	if !ok {
		return false, false, false, false
	}
	changed, recovered = m.recordProbe(conn, version, err, time.Now(), p.opts.FailureThreshold)
	unreachable = m.active == conn && m.state.Reason == hubv1alpha1.UnreachableReason
	return true, changed, recovered, unreachable
}

// checkCRDs makes sure the member still serves the CRDs where the watch of them does not
// (keepCRDs): one discovery request per probe, and only when one is gone, the install of
// ensureCRDs (with InstallCRDs; every write of it fenced: the member is joined) or a CRDMissing
// error.
func (p *Provider) checkCRDs(ctx context.Context, conn *connection) error {
	if len(p.opts.CRDs) == 0 || conn.crds.synced() {
		return nil
	}
	p.enqueueCRDs(conn.name) // it may work now: its note follows
	if missing, err := crdsMissing(conn.disc, p.opts.CRDs); err != nil || !missing {
		return err // a failed discovery request counts as a failed probe, not as a missing CRD
	}
	p.log.Info("Member CRD missing", "cluster", conn.name, "crd", p.opts.CRDs[0].Name, "reinstalling", p.opts.InstallCRDs)
	_, _, err := p.ensureCRDs(ctx, conn.name, conn.cfg, conn.disc, false)
	return err
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

// crdsMissing reports whether the member does not serve a version of one of the CRDs, from
// discovery; an error is a request that failed for another reason than NotFound.
func crdsMissing(disc discovery.DiscoveryInterface, crds []*apiextensionsv1.CustomResourceDefinition) (bool, error) {
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			list, err := disc.ServerResourcesForGroupVersion(crd.Spec.Group + "/" + v.Name)
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			if err != nil {
				return false, fmt.Errorf("reading discovery for %s/%s: %w", crd.Spec.Group, v.Name, err)
			}
			if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == crd.Spec.Names.Plural }) {
				return true, nil
			}
		}
	}
	return false, nil
}
