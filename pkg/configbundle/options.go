package configbundle

import (
	"cmp"
	"context"
	"time"

	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/sharding"
)

// Defaults of Options.
const (
	// DefaultResyncPeriod is the default of Options.ResyncPeriod.
	DefaultResyncPeriod = 10 * time.Minute
	// DefaultRetryBaseDelay is the default of Options.RetryBaseDelay.
	DefaultRetryBaseDelay = 3 * time.Second
	// DefaultRetryMaxDelay is the default of Options.RetryMaxDelay.
	DefaultRetryMaxDelay = time.Minute
	// DefaultMaxConcurrentReconciles is the default of Options.MaxConcurrentReconciles.
	DefaultMaxConcurrentReconciles = 8
	// DefaultReconcileTimeout is the default of Options.ReconcileTimeout.
	DefaultReconcileTimeout = 30 * time.Second
	// DefaultFieldOwner is the default of Options.FieldOwner: the hub's.
	DefaultFieldOwner = hubv1alpha1.FieldOwner
	// DefaultNotConnectedRetry is the default of Options.NotConnectedRetry.
	DefaultNotConnectedRetry = 10 * time.Second
	// DefaultHealStatusDelay is the default of Options.HealStatusDelay.
	DefaultHealStatusDelay = time.Second
)

// Options configure the Reconciler. The zero value of a field means its default, which its
// comment gives.
type Options struct {
	// ResyncPeriod is how often a bundle is reconciled with no event, a safety net under the
	// watches (each bundle gets up to 10% jitter). Defaults to DefaultResyncPeriod (10
	// minutes).
	ResyncPeriod time.Duration

	// RetryBaseDelay is the delay before a failed reconcile of a bundle is retried; it doubles
	// with every further failure of that bundle. Defaults to DefaultRetryBaseDelay (3 seconds).
	RetryBaseDelay time.Duration

	// RetryMaxDelay caps the retry delay. Defaults to DefaultRetryMaxDelay (1 minute).
	RetryMaxDelay time.Duration

	// MaxConcurrentReconciles is the number of workers shared by all member clusters, handed
	// out fairly across them (package fairqueue). Defaults to DefaultMaxConcurrentReconciles (8).
	MaxConcurrentReconciles int

	// MaxConcurrentReconcilesPerMember caps the workers one member cluster holds at once, so
	// that a member with a backlog (a storm, the initial list of thousands of bundles, a
	// fighting writer) or a slow one leaves workers to the others. Defaults to half of
	// MaxConcurrentReconciles, rounded up (4 of the default 8).
	MaxConcurrentReconcilesPerMember int

	// ReconcileTimeout bounds one reconcile, so that a hanging member cannot hold a worker.
	// Defaults to DefaultReconcileTimeout (30 seconds).
	ReconcileTimeout time.Duration

	// FieldOwner is the field manager of the reconciler's writes and the reporting controller of
	// its Events. Defaults to DefaultFieldOwner.
	FieldOwner string

	// Connected, if set, is asked before each reconcile whether the member can be reached. While
	// it returns an error the member is left alone and the bundle is retried after
	// NotConnectedRetry, so that no worker waits on an unreachable member; an error wrapping
	// multicluster.ErrClusterNotFound drops the request instead. Defaults to nil: every member is
	// assumed reachable.
	Connected func(multicluster.ClusterName) error

	// NotConnectedRetry is the delay before a bundle of an unreachable member is tried again.
	// Defaults to DefaultNotConnectedRetry (10 seconds).
	NotConnectedRetry time.Duration

	// HealStatusDelay is how long a status that would only count heals (status.heals,
	// lastHealTime, the ConfigMap the heal wrote) waits after the first heal it counts, so
	// that a heal costs one write on its hot path, the ConfigMap's, and the heals of a fighting
	// writer are counted by one status write per delay. The heal metric, logs and Events are not
	// delayed. Defaults to DefaultHealStatusDelay (1 second).
	HealStatusDelay time.Duration

	// ResyncOn, if set, is called once, when the controller starts, with a function that
	// enqueues every bundle of a member cluster; the caller calls it whenever a member's bundles
	// must all be reconciled now, so that a member that comes back after an outage is healed at
	// once (the hub passes its provider's OnReady). As the member's cache may still hold what
	// it held before the outage, the bundles whose bundle or ConfigMap changed meanwhile (two
	// lists of metadata tell) are reconciled on a live read. The function does not block.
	// Defaults to nil.
	ResyncOn func(resync func(name string))

	// HubSources resolves the spec.hubSource of a bundle with target Secret to the data of its
	// Secret, from what the hub holds. Defaults to nil: no bundle with target Secret gets a
	// Secret (SourceNotFound).
	HubSources HubSources

	// Replica is this hub replica. A sharded one (sharding.New) runs the controller on every
	// hub replica, each for the members engaged with it, instead of only on the elected one.
	// Defaults to the zero Replica: not sharded.
	Replica sharding.Replica
}

// defaults applies the defaults of Options: the one place they are applied. A negative
// number or duration is taken as unset.
func (o *Options) defaults() {
	o.ResyncPeriod = cmp.Or(max(o.ResyncPeriod, 0), DefaultResyncPeriod)
	o.RetryBaseDelay = cmp.Or(max(o.RetryBaseDelay, 0), DefaultRetryBaseDelay)
	o.RetryMaxDelay = cmp.Or(max(o.RetryMaxDelay, 0), DefaultRetryMaxDelay)
	o.MaxConcurrentReconciles = cmp.Or(max(o.MaxConcurrentReconciles, 0), DefaultMaxConcurrentReconciles)
	o.MaxConcurrentReconcilesPerMember = cmp.Or(max(o.MaxConcurrentReconcilesPerMember, 0), (o.MaxConcurrentReconciles+1)/2)
	o.ReconcileTimeout = cmp.Or(max(o.ReconcileTimeout, 0), DefaultReconcileTimeout)
	o.FieldOwner = cmp.Or(o.FieldOwner, DefaultFieldOwner)
	o.NotConnectedRetry = cmp.Or(max(o.NotConnectedRetry, 0), DefaultNotConnectedRetry)
	o.HealStatusDelay = cmp.Or(max(o.HealStatusDelay, 0), DefaultHealStatusDelay)
}

// HubSources resolves the spec.hubSource of a bundle with target Secret in a member to the data
// of its Secret. An error wrapping ErrSourceNotFound, whose message says why and names no value,
// makes the bundle Ready=False, SourceNotFound, with no Secret written; another is retried. It
// must read only caches: it runs on every reconcile of the bundle, heals included.
type HubSources func(ctx context.Context, member multicluster.ClusterName, bundle *configbundlev1alpha1.ConfigBundle) (map[string][]byte, error)
