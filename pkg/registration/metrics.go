package registration

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The renewal of the members' credentials, one series per member whose credential this replica
// renews: alert when a renewal is overdue by half of what is left of the token's life, time() >
// (configbundle_member_credentials_renewal_timestamp_seconds +
// configbundle_member_credentials_expiry_timestamp_seconds) / 2, before it expires.
var (
	renewalTime = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configbundle_member_credentials_renewal_timestamp_seconds",
		Help: "When the hub renews the token of a member's kubeconfig (Unix time): once 80% of its life has passed. Past it, the renewal is being retried.",
	}, []string{"cluster"})
	renewalFailing = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "configbundle_member_credentials_renewal_failing",
		Help: "1 while the last renewal of the token of a member's kubeconfig failed (it is retried), else 0.",
	}, []string{"cluster"})
	renewalFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configbundle_member_credentials_renewal_failures_total",
		Help: "Renewals of the token of a member's kubeconfig that failed.",
	}, []string{"cluster"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(renewalTime, renewalFailing, renewalFailures)
}
