package placement

import (
	"github.com/prometheus/client_golang/prometheus"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
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

// The FleetBundles' counts as their status says them (status.clusters), one series per
// FleetBundle, exported by the replica that writes that status: the leader, or with --sharded
// the elected replica, whose status is the sum of every replica's share. A FleetBundle's series
// go with it. Alert on configbundle_fleetbundle_failed > 0 for 10m (FleetBundleFailing), and on
// configbundle_fleetbundle_rollout_stalled > 0 for 5m (FleetBundleRolloutStalled).
var (
	fleetBundleSelected = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configbundle_fleetbundle_selected",
		Help: "Members the FleetBundle's clusterSelector selects (status.clusters.selected).",
	}, []string{"namespace", "name"})
	fleetBundleReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configbundle_fleetbundle_ready",
		Help: "Selected members where the FleetBundle's bundle is Ready (status.clusters.ready).",
	}, []string{"namespace", "name"})
	fleetBundleFailed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configbundle_fleetbundle_failed",
		Help: "Selected members where placement or the FleetBundle's bundle failed, or that are not Ready (status.clusters.failed; status.failedClusters names them).",
	}, []string{"namespace", "name"})
	fleetBundleUpdated = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configbundle_fleetbundle_updated",
		Help: "Selected members that hold the FleetBundle's updateRevision (status.clusters.updated); equal to selected once a rollout is complete.",
	}, []string{"namespace", "name"})
	fleetBundleRolloutStalled = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configbundle_fleetbundle_rollout_stalled",
		Help: "1 while the FleetBundle's rollout cannot proceed without someone acting (its Stalled condition is True: RolloutHalted, RolledBack), else 0.",
	}, []string{"namespace", "name"})
)

// fleetBundleGauges are the per-FleetBundle series, deleted together with the FleetBundle.
var fleetBundleGauges = []*prometheus.GaugeVec{fleetBundleSelected, fleetBundleReady, fleetBundleFailed,
	fleetBundleUpdated, fleetBundleRolloutStalled}

// cachedConfigMaps is the number of ConfigMaps the hub's cache holds: the FleetBundles' sources,
// labelled hub.configbundle.dev/source=true, and no other. Counted on every change of one.
var cachedConfigMaps = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "configbundle_hub_cached_configmaps",
	Help: "ConfigMaps in the hub's cache: the FleetBundles' sources (labelled hub.configbundle.dev/source=true); it caches no other ConfigMap.",
})

// cachedSecrets is the number of Secrets the hub's cache holds: the members' kubeconfig Secrets,
// the FleetBundles' source Secrets (labelled hub.configbundle.dev/source=true) and the hub's
// snapshots of them, and no other. Counted on every change of one.
var cachedSecrets = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "configbundle_hub_cached_secrets",
	Help: "Secrets in the hub's cache: the members' kubeconfig Secrets, the FleetBundles' source Secrets (labelled hub.configbundle.dev/source=true) and the hub's snapshots of them; it caches no other Secret.",
})

func init() {
	ctrlmetrics.Registry.MustRegister(placementLatency, cachedConfigMaps, cachedSecrets)
	for _, g := range fleetBundleGauges {
		ctrlmetrics.Registry.MustRegister(g)
	}
}

// setFleetBundleMetrics publishes a FleetBundle's counts and whether its rollout is stalled from
// its status. Without spec.rollout there is no Stalled condition: the rollout is never stalled.
func setFleetBundleMetrics(fb *hubv1alpha1.FleetBundle) {
	n := fb.Status.Clusters
	fleetBundleSelected.WithLabelValues(fb.Namespace, fb.Name).Set(float64(n.Selected))
	fleetBundleReady.WithLabelValues(fb.Namespace, fb.Name).Set(float64(n.Ready))
	fleetBundleFailed.WithLabelValues(fb.Namespace, fb.Name).Set(float64(n.Failed))
	fleetBundleUpdated.WithLabelValues(fb.Namespace, fb.Name).Set(float64(n.Updated))
	stalled := 0.0
	if apimeta.IsStatusConditionTrue(fb.Status.Conditions, hubv1alpha1.StalledCondition) {
		stalled = 1
	}
	fleetBundleRolloutStalled.WithLabelValues(fb.Namespace, fb.Name).Set(stalled)
}

// deleteFleetBundleMetrics removes the series of a FleetBundle that is gone.
func deleteFleetBundleMetrics(key types.NamespacedName) {
	for _, g := range fleetBundleGauges {
		g.DeleteLabelValues(key.Namespace, key.Name)
	}
}
