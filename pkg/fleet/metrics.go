package fleet

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// credentialsExpiry is the expiry of each member's credential, as a Unix timestamp: alert on
// configbundle_member_credentials_expiry_timestamp_seconds - time() < 7 * 86400. A member whose
// credential does not say when it expires has no series.
var credentialsExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "configbundle_member_credentials_expiry_timestamp_seconds",
	Help: "When the credential of a member's kubeconfig expires (Unix time), from its token's exp claim or its client certificate.",
}, []string{"cluster"})

func init() {
	ctrlmetrics.Registry.MustRegister(credentialsExpiry)
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
