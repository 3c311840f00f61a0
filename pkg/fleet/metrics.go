package fleet

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// credentialsExpiry is the expiry of each member's credential, as a Unix timestamp: alert on
// configbundle_member_credentials_expiry_timestamp_seconds - time() < 7 * 86400. A member whose
// credential does not say when it expires has no series.
var credentialsExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "configbundle_member_credentials_expiry_timestamp_seconds",
	Help: "When the credential of a member's kubeconfig expires (Unix time), from its token's exp claim or its client certificate.",
}, []string{"cluster"})

// The members' health as their MemberClusters report it, one series per member this replica
// manages: alert on configbundle_member_ready == 0 for 5m, configbundle_member_failed_bundles > 0,
// configbundle_bundles_drifted > 0.
var (
	memberReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configbundle_member_ready",
		Help: "1 if the member's MemberCluster is Ready, else 0 (its Ready reason says why).",
	}, []string{"cluster"})
	memberBundles = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configbundle_member_bundles",
		Help: "ConfigBundles in the member, as its MemberCluster counts them (status.bundles.total).",
	}, []string{"cluster"})
	memberFailedBundles = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configbundle_member_failed_bundles",
		Help: "ConfigBundles of the member whose Ready condition is False, as its MemberCluster counts them (status.bundles.failed).",
	}, []string{"cluster"})
	bundlesDrifted = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configbundle_bundles_drifted",
		Help: "ConfigBundles of the member whose ConfigMap drifted and is left so (Ready reason Drifted, driftPolicy Report), as its MemberCluster counts them (status.bundles.drifted).",
	}, []string{"cluster"})
	// memberPaused keeps a member in maintenance out of the alerts on its readiness:
	// ... == 0 unless on (cluster) configbundle_member_paused == 1.
	memberPaused = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configbundle_member_paused",
		Help: "1 while the member is paused for maintenance (MemberCluster spec.paused: placement writes nothing to it), else 0.",
	}, []string{"cluster"})
)

// membersUnowned is the Fleet's status.clusters.unowned on the replica that writes the Fleet,
// 0 on the others: alert on max(configbundle_fleet_members_unowned) > 0 for 2m
// (ConfigBundleMembersUnowned).
var membersUnowned = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "configbundle_fleet_members_unowned",
	Help: "Members that no live hub replica manages (Fleet status.clusters.unowned), on the replica that writes the Fleet; 0 on the others.",
})

func init() {
	ctrlmetrics.Registry.MustRegister(credentialsExpiry, memberReady, memberBundles, memberFailedBundles, bundlesDrifted, memberPaused, membersUnowned)
}

// setMemberMetrics publishes a member's health from the MemberCluster status the hub computed.
func setMemberMetrics(name string, status hubv1alpha1.MemberClusterStatus) {
	ready := 0.0
	if meta.IsStatusConditionTrue(status.Conditions, hubv1alpha1.ReadyCondition) {
		ready = 1
	}
	memberReady.WithLabelValues(name).Set(ready)
	memberBundles.WithLabelValues(name).Set(float64(status.Bundles.Total))
	memberFailedBundles.WithLabelValues(name).Set(float64(status.Bundles.Failed))
	bundlesDrifted.WithLabelValues(name).Set(float64(status.Bundles.Drifted))
	paused := 0.0
	if meta.IsStatusConditionTrue(status.Conditions, hubv1alpha1.PausedCondition) {
		paused = 1
	}
	memberPaused.WithLabelValues(name).Set(paused)
}

// deleteMemberMetrics removes a member's series: it left, or another replica manages it.
func deleteMemberMetrics(name string) {
	for _, g := range []*prometheus.GaugeVec{credentialsExpiry, memberReady, memberBundles, memberFailedBundles, bundlesDrifted, memberPaused} {
		g.DeleteLabelValues(name)
	}
}

func setCredentialsMetric(name string, exp time.Time) {
	if exp.IsZero() {
		deleteCredentialsMetric(name)
		return
	}
	credentialsExpiry.WithLabelValues(name).Set(float64(exp.Unix()))
}

func deleteCredentialsMetric(name string) {
	credentialsExpiry.DeleteLabelValues(name)
}
