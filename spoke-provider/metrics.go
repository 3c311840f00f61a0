package spokeprovider

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// membersGauge counts the members by the reason of their Ready condition: alert on
// configbundle_hub_members{ready="false"} > 0.
var membersGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "configbundle_hub_members",
	Help: "Member clusters by readiness and reason (Connected, Unreachable, InvalidKubeconfig, ...).",
}, []string{"ready", "reason"})

func init() {
	ctrlmetrics.Registry.MustRegister(membersGauge)
}

// updateMetrics recounts the members by state.
func (p *Provider) updateMetrics() {
	p.metricsMu.Lock()
	defer p.metricsMu.Unlock()
	p.mu.Lock()
	counts := map[[2]string]float64{}
	for _, m := range p.members {
		ready := "false"
		if m.state.Ready {
			ready = "true"
		}
		counts[[2]string{ready, m.state.Reason}]++
	}
	p.mu.Unlock()
	membersGauge.Reset()
	for k, n := range counts {
		membersGauge.WithLabelValues(k[0], k[1]).Set(n)
	}
}
