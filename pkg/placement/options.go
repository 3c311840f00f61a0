package placement

import (
	"time"

	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
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
	// Owns reports whether this replica manages the member (always, unless sharded).
	Owns(name string) bool
}

// Options configure placement. The zero value is ready to use; each field documents its
// default.
type Options struct {
	// MaxConcurrentReconciles is the number of placement workers shared by all pairs.
	// Defaults to 8.
	MaxConcurrentReconciles int

	// ReconcileTimeout bounds one placement reconcile. Defaults to 30 seconds.
	ReconcileTimeout time.Duration

	// NotConnectedRetry is how soon a pair whose member is not Ready is tried again.
	// Defaults to 10 seconds (the provider's probe interval is a good value).
	NotConnectedRetry time.Duration

	// NamespaceMissingRetry is how soon a pair whose namespace is missing in the member is tried
	// again: namespace events of the members are not watched. Defaults to 5 seconds.
	NamespaceMissingRetry time.Duration

	// RetryBaseDelay is the delay before a failed placement is retried; it doubles with every
	// further failure of the pair. Defaults to 1 second.
	RetryBaseDelay time.Duration

	// RetryMaxDelay caps the retry delay. Defaults to 1 minute.
	RetryMaxDelay time.Duration

	// MinStatusInterval is the least time between two status writes of one FleetBundle that
	// change only its counts (and the messages that quote them); a change of its Ready
	// condition's status or reason is written at once. A placement in many members then costs a
	// few status writes, not one per member. Defaults to 1 second.
	MinStatusInterval time.Duration

	// FieldOwner is the field manager of placement's writes and the reporting controller of its
	// Events. Defaults to hubv1alpha1.FieldOwner.
	FieldOwner string

	// Sharded runs both controllers on every hub replica (sharded replicas): placement for the
	// members engaged with the replica; fleetbundle-status to write the replica's share of each
	// FleetBundle's status (status.replicas) and, on the elected replica only, the totals and
	// the finalizer. Defaults to false: both wait for leader election, when the manager has it.
	Sharded bool

	// Replica is this replica's --replica-id, the key of its share. Required when Sharded.
	Replica string

	// LiveReplicas returns the ids of the live replicas: the elected replica drops the shares of
	// the others. Required when Sharded.
	LiveReplicas func() []string
}

func (o *Options) defaults() {
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = 8
	}
	if o.ReconcileTimeout <= 0 {
		o.ReconcileTimeout = 30 * time.Second
	}
	if o.NotConnectedRetry <= 0 {
		o.NotConnectedRetry = 10 * time.Second
	}
	if o.NamespaceMissingRetry <= 0 {
		o.NamespaceMissingRetry = 5 * time.Second
	}
	if o.RetryBaseDelay <= 0 {
		o.RetryBaseDelay = time.Second
	}
	if o.RetryMaxDelay <= 0 {
		o.RetryMaxDelay = time.Minute
	}
	if o.MinStatusInterval <= 0 {
		o.MinStatusInterval = time.Second
	}
	if o.FieldOwner == "" {
		o.FieldOwner = hubv1alpha1.FieldOwner
	}
}
