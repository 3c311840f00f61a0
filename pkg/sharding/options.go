package sharding

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/multicluster-runtime/pkg/util/sanitize"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// Defaults and bounds of Options.
const (
	// DefaultLeaseDuration is the default of Options.LeaseDuration.
	DefaultLeaseDuration = 15 * time.Second
	// MinLeaseDuration is the shortest Options.LeaseDuration: Leases count whole seconds and
	// are renewed every third of their duration.
	MinLeaseDuration = 3 * time.Second
	// DefaultPeerRefreshInterval is the default of Options.PeerRefreshInterval.
	DefaultPeerRefreshInterval = time.Second
)

// Timings of sharded replicas that are not options.
const (
	// decisionInterval is how often a replica decides which members it should run, tries to
	// take the Leases of those it does not hold yet (multicluster-runtime's "probe"), and looks
	// whether the live replicas changed. Each look is in memory; the peer Leases are listed
	// every refresh interval, and a dead replica is dropped when its Lease expires.
	decisionInterval = 250 * time.Millisecond
	// fenceThrottle spaces out failed attempts to take one member's Lease: a member whose
	// previous owner died is taken within this long of the Lease's expiry.
	fenceThrottle = 250 * time.Millisecond
)

// Options configure a sharded Replica. The zero value of a field means its default, which its
// comment gives.
type Options struct {
	// Namespace holds the peer Leases and the members' Leases. Defaults to
	// hubv1alpha1.DefaultSecretNamespace.
	Namespace string

	// ReplicaID is this replica's identity, unique among the replicas: it names its peer
	// Lease, holds the Leases of the members it manages and is written to their
	// MemberClusters' status.replica. Defaults to DefaultReplicaID().
	ReplicaID string

	// LeaseDuration is the duration of the peer Leases and the members' Leases, renewed every
	// third of it: a dead replica's members are taken over after about this long. At least
	// MinLeaseDuration. Defaults to DefaultLeaseDuration.
	LeaseDuration time.Duration

	// PeerRefreshInterval is how often the peer Leases are listed, and never less often than
	// every third of LeaseDuration: a replica that left cleanly is noticed within this long (a
	// dead one when its Lease expires, whatever the refresh). Defaults to
	// DefaultPeerRefreshInterval.
	PeerRefreshInterval time.Duration
}

// complete returns o with its defaults applied: the one place they are applied.
func (o Options) complete() Options {
	o.Namespace = cmp.Or(o.Namespace, hubv1alpha1.DefaultSecretNamespace)
	o.ReplicaID = cmp.Or(o.ReplicaID, DefaultReplicaID())
	o.LeaseDuration = cmp.Or(o.LeaseDuration, DefaultLeaseDuration)
	o.PeerRefreshInterval = cmp.Or(o.PeerRefreshInterval, DefaultPeerRefreshInterval)
	return o
}

// DefaultReplicaID is the default of Options.ReplicaID: $POD_NAME (the downward API in
// config/default), else the host's name made a DNS-1123 name, else "".
func DefaultReplicaID() string {
	return cmp.Or(os.Getenv("POD_NAME"), hostname())
}

// hostname returns the host's name as a DNS-1123 name, or "" if it has none.
func hostname() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return sanitize.DNS1123(h)
	}
	return ""
}

// Validate reports a lease duration or a replica id the Leases cannot use, as the hub's flags
// (--lease-duration, --replica-id) name them.
func (o Options) Validate() error {
	o = o.complete()
	if o.LeaseDuration < MinLeaseDuration {
		return fmt.Errorf("--lease-duration %s is too short: at least %s (Leases count whole seconds, renewed every third)", o.LeaseDuration, MinLeaseDuration)
	}
	if o.ReplicaID == "" {
		return errors.New("--replica-id is empty, and neither $POD_NAME nor the hostname gives one")
	}
	if errs := validation.IsDNS1123Subdomain(hubv1alpha1.PeerLeasePrefix + "-" + o.ReplicaID); len(errs) > 0 || sanitize.DNS1123(o.ReplicaID) != o.ReplicaID {
		return fmt.Errorf("--replica-id %q cannot name a Lease: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most %d characters",
			o.ReplicaID, validation.DNS1123SubdomainMaxLength-len(hubv1alpha1.PeerLeasePrefix)-1)
	}
	return nil
}
