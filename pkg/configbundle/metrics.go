package configbundle

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// Metrics of the reconciler, per member cluster, registered with controller-runtime's registry
// (served on the hub's --metrics-bind-address).
var (
	reconcilesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configbundle_reconciles_total",
		Help: "ConfigBundle reconciles per member cluster and result (success, error, terminal, notConnected).",
	}, []string{"cluster", "result"})

	healsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configbundle_heals_total",
		Help: "Drift corrections of managed ConfigMaps per member cluster.",
	}, []string{"cluster"})

	healLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "configbundle_heal_latency_seconds",
		Help:    "Time from the hub seeing a managed ConfigMap change (watch event) to the heal being written.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16), // 1 ms to about 33 s
	}, []string{"cluster"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(reconcilesTotal, healsTotal, healLatency)
}

// recordMetrics counts a reconcile and, when it healed, the heal and its latency.
func recordMetrics(cluster multicluster.ClusterName, s *scope, seenAt time.Time, seen bool, err error) {
	result := "success"
	switch {
	case errors.Is(err, reconcile.TerminalError(nil)):
		result = "terminal"
	case err != nil:
		result = "error"
	}
	reconcilesTotal.WithLabelValues(string(cluster), result).Inc()
	if s == nil || s.healed == nil {
		return
	}
	healsTotal.WithLabelValues(string(cluster)).Inc()
	if seen {
		healLatency.WithLabelValues(string(cluster)).Observe(time.Since(seenAt).Seconds())
	}
}
