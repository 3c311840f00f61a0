package spokeprovider

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// membersGauge counts the members by the reason of their Ready condition: alert on
// configbundle_hub_members{ready="false"} > 0.
var membersGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "configbundle_hub_members",
	Help: "Member clusters by readiness and reason (Connected, Unreachable, InvalidKubeconfig, ...).",
}, []string{"ready", "reason"})

// The probes of each member this replica manages: alert on
// time() - configbundle_member_last_probe_success_timestamp_seconds > 60.
var (
	probeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "configbundle_member_probe_duration_seconds",
		Help:    "Duration of each probe of a member's API server (GET /version, a SelfSubjectRulesReview of the hub's rights, and discovery of the CRDs), failed probes included.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 13), // 1 ms to about 4 s (the probe timeout is 3 s)
	}, []string{"cluster"})
	lastProbeSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configbundle_member_last_probe_success_timestamp_seconds",
		Help: "When the member last answered a probe or a connection attempt (Unix time).",
	}, []string{"cluster"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(membersGauge, probeDuration, lastProbeSuccess)
}

// recordAnswer records that a member answered (a probe, or the connection's checks) at now.
func recordAnswer(name string, now time.Time) {
	lastProbeSuccess.WithLabelValues(name).Set(float64(now.UnixNano()) / 1e9)
}

// forgetMemberMetrics removes a member's probe series: it left, or another replica manages it.
func forgetMemberMetrics(name string) {
	probeDuration.DeleteLabelValues(name)
	lastProbeSuccess.DeleteLabelValues(name)
}

// updateMetrics recounts the members by state.
func (p *Provider) updateMetrics() {
	p.metricsMu.Lock()
	defer p.metricsMu.Unlock()
	counts := p.countMembers()
	membersGauge.Reset()
	for k, n := range counts {
		membersGauge.WithLabelValues(k[0], k[1]).Set(n)
	}
}

// countMembers counts the members by readiness ("true", "false") and reason.
func (p *Provider) countMembers() map[[2]string]float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	counts := map[[2]string]float64{}
	for _, m := range p.members {
		ready := "false"
		if m.state.Ready {
			ready = "true"
		}
		counts[[2]string{ready, m.state.Reason}]++
	}
	return counts
}
