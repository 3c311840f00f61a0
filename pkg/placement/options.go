package placement

import (
	"cmp"
	"time"

	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/sharding"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// Members is what placement needs from the provider (*spokeprovider.Provider).
type Members interface {
	// Connected returns nil if the member is connected and answering (see
	// spokeprovider.Provider.Connected).
	Connected(name multicluster.ClusterName) error
	// State returns what the provider knows of a member.
	State(name string) (spokeprovider.State, bool)
	// OnReady registers fn to be called when a member becomes Ready.
	OnReady(fn func(name string))
}

// Defaults of Options.
const (
	// DefaultMaxConcurrentReconciles is the default of Options.MaxConcurrentReconciles.
	DefaultMaxConcurrentReconciles = 8
	// DefaultStatusMaxConcurrentReconciles is the default of
	// Options.StatusMaxConcurrentReconciles.
	DefaultStatusMaxConcurrentReconciles = 2
	// DefaultReconcileTimeout is the default of Options.ReconcileTimeout.
	DefaultReconcileTimeout = 30 * time.Second
	// DefaultNotConnectedRetry is the default of Options.NotConnectedRetry.
	DefaultNotConnectedRetry = 10 * time.Second
	// DefaultNamespaceMissingRetry is the default of Options.NamespaceMissingRetry.
	DefaultNamespaceMissingRetry = 5 * time.Second
	// DefaultRetryBaseDelay is the default of Options.RetryBaseDelay.
	DefaultRetryBaseDelay = time.Second
	// DefaultRetryMaxDelay is the default of Options.RetryMaxDelay.
	DefaultRetryMaxDelay = time.Minute
	// DefaultMinStatusInterval is the default of Options.MinStatusInterval.
	DefaultMinStatusInterval = time.Second
	// DefaultFieldOwner is the default of Options.FieldOwner: the hub's.
	DefaultFieldOwner = hubv1alpha1.FieldOwner
)

// Options configure placement. The zero value of a field means its default, which its comment
// gives.
type Options struct {
	// MaxConcurrentReconciles is the number of placement workers shared by all pairs.
	// Defaults to DefaultMaxConcurrentReconciles (8).
	MaxConcurrentReconciles int

	// StatusMaxConcurrentReconciles is the number of workers of the fleetbundle-status
	// controller, shared by all FleetBundles. Defaults to DefaultStatusMaxConcurrentReconciles
	// (2).
	StatusMaxConcurrentReconciles int

	// ReconcileTimeout bounds one reconcile of either controller. Defaults to
	// DefaultReconcileTimeout (30 seconds).
	ReconcileTimeout time.Duration

	// NotConnectedRetry is how soon a pair whose member is not Ready is tried again.
	// Defaults to DefaultNotConnectedRetry (10 seconds; the provider's probe interval is a good
	// value).
	NotConnectedRetry time.Duration

	// NamespaceMissingRetry is how soon a pair whose namespace is missing in the member is tried
	// again: namespace events of the members are not watched. Defaults to
	// DefaultNamespaceMissingRetry (5 seconds).
	NamespaceMissingRetry time.Duration

	// RetryBaseDelay is the delay before a failed placement is retried; it doubles with every
	// further failure of the pair. Defaults to DefaultRetryBaseDelay (1 second).
	RetryBaseDelay time.Duration

	// RetryMaxDelay caps the retry delay. Defaults to DefaultRetryMaxDelay (1 minute).
	RetryMaxDelay time.Duration

	// MinStatusInterval is the least time between two status writes of one FleetBundle that
	// change only its counts (and the messages that quote them); a change of its Ready
	// condition's status or reason is written at once. A placement in many members then costs a
	// few status writes, not one per member. Defaults to DefaultMinStatusInterval (1 second).
	MinStatusInterval time.Duration

	// FieldOwner is the field manager of placement's writes and the reporting controller of its
	// Events. Defaults to DefaultFieldOwner.
	FieldOwner string

	// Replica is this hub replica. A sharded one (sharding.New) runs both controllers on every
	// hub replica: placement for the members engaged with the replica; fleetbundle-status to
	// write the replica's share of each FleetBundle's status (status.replicas, keyed by the
	// Replica's ID, for the members it owns) and, on the elected replica only, the totals of
	// the live replicas' shares and the finalizer. Defaults to the zero Replica: not sharded;
	// both controllers wait for leader election, when the manager has it.
	Replica sharding.Replica
}

// defaults applies the defaults of Options: the one place they are applied. A negative
// number or duration is taken as unset.
func (o *Options) defaults() {
	o.MaxConcurrentReconciles = cmp.Or(max(o.MaxConcurrentReconciles, 0), DefaultMaxConcurrentReconciles)
	o.StatusMaxConcurrentReconciles = cmp.Or(max(o.StatusMaxConcurrentReconciles, 0), DefaultStatusMaxConcurrentReconciles)
	o.ReconcileTimeout = cmp.Or(max(o.ReconcileTimeout, 0), DefaultReconcileTimeout)
	o.NotConnectedRetry = cmp.Or(max(o.NotConnectedRetry, 0), DefaultNotConnectedRetry)
	o.NamespaceMissingRetry = cmp.Or(max(o.NamespaceMissingRetry, 0), DefaultNamespaceMissingRetry)
	o.RetryBaseDelay = cmp.Or(max(o.RetryBaseDelay, 0), DefaultRetryBaseDelay)
	o.RetryMaxDelay = cmp.Or(max(o.RetryMaxDelay, 0), DefaultRetryMaxDelay)
	o.MinStatusInterval = cmp.Or(max(o.MinStatusInterval, 0), DefaultMinStatusInterval)
	o.FieldOwner = cmp.Or(o.FieldOwner, DefaultFieldOwner)
}
