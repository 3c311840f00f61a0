package fleet

import (
	"cmp"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"configbundle.dev/hub/pkg/configbundle"
	"configbundle.dev/hub/pkg/registration"
	"configbundle.dev/hub/pkg/sharding"
)

// Defaults of Options.
const (
	// DefaultMinWriteInterval is the default of Options.MinWriteInterval.
	DefaultMinWriteInterval = time.Second
	// DefaultRecountInterval is the default of Options.RecountInterval.
	DefaultRecountInterval = time.Minute
	// DefaultCountTimeout is the default of Options.CountTimeout.
	DefaultCountTimeout = 5 * time.Second
	// DefaultCredentialsExpiryWarning is the default of Options.CredentialsExpiryWarning.
	DefaultCredentialsExpiryWarning = 30 * 24 * time.Hour
	// DefaultHeartbeatInterval is the default of Options.HeartbeatInterval.
	DefaultHeartbeatInterval = 10 * time.Second
	// DefaultMaxConcurrentReconciles is the default of Options.MaxConcurrentReconciles.
	DefaultMaxConcurrentReconciles = 4
	// DefaultReconcileTimeout is the default of Options.ReconcileTimeout.
	DefaultReconcileTimeout = 30 * time.Second
)

// Options configure the reports. The zero value of a field means its default, which its
// comment gives.
type Options struct {
	// MinWriteInterval is the least time between two status writes of one MemberCluster that
	// change only its counts; a change of readiness is written at once. Defaults to
	// DefaultMinWriteInterval (1 second).
	MinWriteInterval time.Duration

	// RecountInterval is how often a Ready (or Forbidden) member's bundles are counted again
	// with no event:
	// the outcome of a bundle whose status could not be written (Unreported) changes no watched
	// object. A count that changes nothing writes nothing. Defaults to DefaultRecountInterval
	// (1 minute).
	RecountInterval time.Duration

	// CountTimeout bounds counting a member's bundles from its cache. Defaults to
	// DefaultCountTimeout (5 seconds).
	CountTimeout time.Duration

	// CredentialsExpiryWarning is how long before its credential expires a member's
	// CredentialsValid condition turns False (ExpiresSoon). Defaults to
	// DefaultCredentialsExpiryWarning (30 days).
	CredentialsExpiryWarning time.Duration

	// HeartbeatInterval is how often the Fleet's status.heartbeatTime is refreshed. Defaults to
	// DefaultHeartbeatInterval (10 seconds).
	HeartbeatInterval time.Duration

	// MaxConcurrentReconciles is the number of workers of the MemberCluster controller, shared
	// by all members. Defaults to DefaultMaxConcurrentReconciles (4).
	MaxConcurrentReconciles int

	// ReconcileTimeout bounds one reconcile of a MemberCluster. Defaults to
	// DefaultReconcileTimeout (30 seconds).
	ReconcileTimeout time.Duration

	// Unreported, if set, returns the Ready condition of each bundle of a member whose last
	// reconcile could not write it to the bundle's status (the reconciler's
	// configbundle.Reconciler.Unreported): those bundles are counted by it, not by their stale
	// status. Defaults to nil.
	Unreported func(member string) map[types.NamespacedName]metav1.Condition

	// Sync, if set, says how far the first full reconcile of each member since it connected has
	// got (the reconciler's configbundle.Reconciler.Sync): the MemberCluster's Synced condition
	// says it, and its status is computed again every MinWriteInterval until it is done.
	// Defaults to nil: no Synced condition.
	Sync func(member multicluster.ClusterName) configbundle.Sync

	// Renewal, if set, says when the hub renews a member's credential and whether its last
	// renewal failed (registration.Renewer.State), false if it does not renew it: the
	// CredentialsValid condition says so instead of warning of an expiry the renewal averts.
	// Defaults to nil: no credential is renewed.
	Renewal func(member string) (registration.Renewal, bool)

	// Replica is this hub replica: its ID, if any, is written to the status.replica of the
	// MemberClusters it manages. A sharded one (sharding.New) runs the MemberCluster controller
	// on every replica, each for the members it owns (Replica.Owns), and the Fleet controller
	// too, which writes only on the replica elected for the hub-wide work (Replica.Leading);
	// otherwise both wait for leader election, when the manager has it. Defaults to the zero
	// Replica: not sharded, no status.replica.
	Replica sharding.Replica
}

// defaults applies the defaults of Options: the one place they are applied. A negative
// number or duration is taken as unset.
func (o *Options) defaults() {
	o.MinWriteInterval = cmp.Or(max(o.MinWriteInterval, 0), DefaultMinWriteInterval)
	o.RecountInterval = cmp.Or(max(o.RecountInterval, 0), DefaultRecountInterval)
	o.CountTimeout = cmp.Or(max(o.CountTimeout, 0), DefaultCountTimeout)
	o.CredentialsExpiryWarning = cmp.Or(max(o.CredentialsExpiryWarning, 0), DefaultCredentialsExpiryWarning)
	o.HeartbeatInterval = cmp.Or(max(o.HeartbeatInterval, 0), DefaultHeartbeatInterval)
	o.MaxConcurrentReconciles = cmp.Or(max(o.MaxConcurrentReconciles, 0), DefaultMaxConcurrentReconciles)
	o.ReconcileTimeout = cmp.Or(max(o.ReconcileTimeout, 0), DefaultReconcileTimeout)
}
