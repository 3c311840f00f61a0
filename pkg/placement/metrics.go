package placement

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// placementLatency is, per member, the time from the hub finding that the member must get a
// FleetBundle's bundle (a new FleetBundle, a member newly selected) or its changed template, to
// the write that places it; retries (a missing namespace, a refused write) included. Heals are
// configbundle_heal_latency_seconds' and the placed bundles' own.
var placementLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "configbundle_placement_latency_seconds",
	Help:    "Time from the hub finding that a member must get a FleetBundle's bundle or its new template to the write that places it, per member.",
	Buckets: prometheus.ExponentialBuckets(0.001, 2, 16), // 1 ms to about 33 s
}, []string{"cluster"})

func init() {
	ctrlmetrics.Registry.MustRegister(placementLatency)
}
