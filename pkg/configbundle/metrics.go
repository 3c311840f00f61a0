package configbundle

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/pkg/fairqueue"
)

// Metrics of the reconciler, per member cluster, registered with controller-runtime's registry
// (served on the hub's --metrics-bind-address).
var (
	reconcilesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configbundle_reconciles_total",
		Help: "ConfigBundle reconciles per member cluster and result (success, error, terminal, notConnected, fenced).",
	}, []string{"cluster", "result"})

	reconcileErrorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configbundle_reconcile_errors_total",
		Help: "Failed ConfigBundle reconciles per member cluster and cause: the Ready reason of the write that failed (CreateFailed, UpdateFailed, InvalidConfigMap, InvalidSecret), Forbidden when only the status could not be written and the member forbade it, StatusWriteFailed when only the status could not be written otherwise, ReadFailed when the bundle or its ConfigMap could not be read.",
	}, []string{"cluster", "reason"})

	healsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configbundle_heals_total",
		Help: "Drift corrections of managed ConfigMaps per member cluster.",
	}, []string{"cluster"})

	fightsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configbundle_fights_total",
		Help: "Fights per member cluster: a managed ConfigMap healed FightHeals times within FightWindow, as another writer keeps changing it.",
	}, []string{"cluster"})

	healLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "configbundle_heal_latency_seconds",
		Help:    "Time from the hub seeing a managed ConfigMap change (watch event) to the heal being written.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16), // 1 ms to about 33 s
	}, []string{"cluster"})

	memberQueueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configbundle_member_queue_depth",
		Help: "ConfigBundles of a member cluster waiting in the work queue for a worker (ready now; delayed retries and resyncs are not counted).",
	}, []string{"cluster"})

	memberUnsynced = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configbundle_member_unsynced_bundles",
		Help: "ConfigBundles a member cluster held when it connected that the hub has not reconciled once since; 0 once its first full reconcile is done (its MemberCluster is Synced). Alert when above 0 for long.",
	}, []string{"cluster"})

	memberQueueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "configbundle_member_queue_wait_seconds",
		Help:    "Time a ConfigBundle of a member cluster waited in the work queue, from ready to handed to a worker.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16), // 1 ms to about 33 s
	}, []string{"cluster"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(reconcilesTotal, reconcileErrorsTotal, healsTotal, fightsTotal, healLatency, memberQueueDepth, memberQueueWait, memberUnsynced)
}

// queueMetrics are the work queue's figures of each member cluster; a member's series are
// deleted when its part of the queue is dropped, empty and idle (within a ResyncPeriod of the
// member leaving).
type queueMetrics struct{}

var _ fairqueue.MemberMetrics = queueMetrics{}

func (queueMetrics) Depth(cluster string, depth int) {
	memberQueueDepth.WithLabelValues(cluster).Set(float64(depth))
}

func (queueMetrics) Waited(cluster string, wait time.Duration) {
	memberQueueWait.WithLabelValues(cluster).Observe(wait.Seconds())
}

func (queueMetrics) Forget(cluster string) {
	memberQueueDepth.DeleteLabelValues(cluster)
	memberQueueWait.DeleteLabelValues(cluster)
}

// recordMetrics counts a reconcile and, when it healed, the heal, its latency and the fight it
// made, if any.
func recordMetrics(cluster multicluster.ClusterName, s *scope, seenAt time.Time, seen bool, err error) {
	result := "success"
	switch {
	case errors.Is(err, reconcile.TerminalError(nil)):
		result = "terminal"
	case err != nil:
		result = "error"
	}
	reconcilesTotal.WithLabelValues(string(cluster), result).Inc()
	if err != nil {
		reconcileErrorsTotal.WithLabelValues(string(cluster), failureReason(s)).Inc()
	}
	if s == nil || s.healed == nil {
		return
	}
	healsTotal.WithLabelValues(string(cluster)).Inc()
	if s.fight {
		fightsTotal.WithLabelValues(string(cluster)).Inc()
	}
	if seen {
		healLatency.WithLabelValues(string(cluster)).Observe(s.healedAt.Sub(seenAt).Seconds())
	}
}

// failureReason names the cause of a failed reconcile: the write that failed first (a status
// write the member forbade: Forbidden).
func failureReason(s *scope) string {
	switch {
	case s == nil:
		return configbundlev1alpha1.ReadFailedReason
	case s.failure != "":
		return s.failure
	case apierrors.IsForbidden(s.statusErr):
		return configbundlev1alpha1.ForbiddenReason
	case s.statusErr != nil:
		return configbundlev1alpha1.StatusWriteFailedReason
	default:
		return configbundlev1alpha1.ReadFailedReason
	}
}
