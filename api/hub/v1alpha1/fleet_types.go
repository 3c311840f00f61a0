package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons of the Fleet's Ready condition.
const (
	// AllReadyReason (True): every member is Ready and synced, no bundle has failed and no
	// FleetBundle has failed.
	AllReadyReason = "AllReady"

	// MembersNotReadyReason (False): at least one member is not Ready; the message names the
	// first MaxNamedMembers of them.
	MembersNotReadyReason = "MembersNotReady"

	// MembersSyncingReason (False): every member is Ready, but the hub has not yet reconciled
	// once every ConfigBundle some of them held when they connected (their Synced condition is
	// False, Syncing): after a hub restart with thousands of bundles, say. The message names the
	// first MaxNamedMembers of them; their Synced condition says how many bundles are left.
	MembersSyncingReason = "MembersSyncing"

	// BundlesFailedReason (False): every member is Ready, but some bundles are not; the message
	// names the first MaxNamedMembers members with failing bundles, and how many each has.
	BundlesFailedReason = "BundlesFailed"

	// FleetBundlesFailedReason (False): every member is Ready and no bundle has failed, but some
	// FleetBundles have (status.fleetBundles.failed); the message names the first
	// MaxNamedMembers of them, sorted, as namespace/name with their Ready reason.
	FleetBundlesFailedReason = "FleetBundlesFailed"

	// NoMembersReason (False): no member is registered.
	NoMembersReason = "NoMembers"
)

// The Ready reasons of the Fleet go by precedence: NoMembers, then MembersNotReady (a member
// that is not Ready is the likeliest cause of everything else), then MembersSyncing (the counts
// of a member not synced yet may still change), then BundlesFailed, then FleetBundlesFailed,
// then AllReady. The message of a reason that wins over FleetBundlesFailed
// also says how many FleetBundles have failed.

// Reasons of the Events recorded on the Fleet.
const (
	// DuplicateReplicaEvent (Warning): a hub process run with --sharded or --leader-elect found
	// the Lease of its --replica-id (its peer Lease, or the leader-election Lease) held and
	// renewed by another live process: two processes were started with one replica id (the
	// default, the hostname, is the same for two processes on one host). It writes nothing to any
	// member and exits 1 a lease duration later; the process that holds the Lease runs on. The
	// related object is that Lease; the note names both processes (host, pid and a random part).
	DuplicateReplicaEvent = "DuplicateReplica"
)

// FleetName is the name of the one Fleet the hub maintains.
const FleetName = "default"

// MaxNamedMembers is the most members the Fleet's Ready message names.
const MaxNamedMembers = 5

// ClusterCounts counts member clusters.
type ClusterCounts struct {
	// total is the number of members (labelled kubeconfig Secrets).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Total int64 `json:"total"`

	// ready is the number of members whose Ready condition is True.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Ready int64 `json:"ready"`

	// paused is the number of members paused for maintenance (spec.paused), Ready or not.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Paused int64 `json:"paused"`

	// unowned is the number of members that no live hub replica manages: whose status.replica
	// names no live replica. Sharded (--sharded), the live replicas are those whose peer Lease
	// is valid, and a member whose status.replica is empty, not taken by any replica yet, counts
	// too; otherwise the one live replica is the hub that writes the Fleet, and a member counts
	// when its status.replica names another replica (one that is gone), not when it is empty
	// (not reported yet). Counted by the replica that writes the Fleet, again whenever a
	// MemberCluster changes and at every heartbeat, so within a heartbeat of a change of the
	// live replicas. Above zero for long, members are neither reconciled nor reported: see
	// the alert ConfigBundleMembersUnowned.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Unowned int32 `json:"unowned"`
}

// FleetBundleCounts counts the FleetBundles of all namespaces by their Ready condition. A
// FleetBundle in progress, selecting no member (NoClustersSelected) or not reconciled yet is
// neither ready nor failed.
type FleetBundleCounts struct {
	// total is the number of FleetBundles, in all namespaces.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Total int64 `json:"total"`

	// ready is the number of FleetBundles whose Ready condition is True for their current
	// spec: status.observedGeneration equals metadata.generation.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Ready int64 `json:"ready"`

	// failed is the number of FleetBundles whose Ready condition is False with a reason other
	// than Progressing and NoClustersSelected: ClustersFailed, InvalidSelector, NameTooLong.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Failed int64 `json:"failed"`
}

// FleetStatus sums up the MemberClusters and the FleetBundles.
type FleetStatus struct {
	// conditions hold Ready: True when every member is Ready and synced, no bundle has failed
	// and no FleetBundle has failed.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// clusters counts the members.
	// +optional
	Clusters ClusterCounts `json:"clusters"`

	// bundles counts the ConfigBundles of all members (last observed counts for members that
	// are not Ready).
	// +optional
	Bundles BundleCounts `json:"bundles"`

	// fleetBundles counts the FleetBundles of all namespaces.
	// +optional
	FleetBundles FleetBundleCounts `json:"fleetBundles"`

	// heals is the sum of the members' heals.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Heals int64 `json:"heals"`

	// heartbeatTime is when the hub last confirmed this status, refreshed every
	// --heartbeat-interval (10 seconds by default) while a hub runs. A heartbeat older than a
	// few intervals means no hub is watching the fleet, and the rest of the status may be stale:
	// gate on fresh health with `hub status --max-age`, which checks both.
	// +optional
	HeartbeatTime *metav1.Time `json:"heartbeatTime,omitempty"`

	// heartbeatIntervalSeconds is the --heartbeat-interval of the hub that writes this status,
	// in whole seconds (rounded up): `hub status` refuses a --max-age below twice it, which
	// would pass and fail by turns on a healthy fleet.
	// +optional
	// +kubebuilder:validation:Minimum=1
	HeartbeatIntervalSeconds int64 `json:"heartbeatIntervalSeconds,omitempty"`
}

// Fleet is the health of the whole fleet; the hub maintains one, named "default".
// `kubectl wait --for=condition=Ready fleet/default` waits for a healthy fleet, but cannot tell
// whether a hub still watches it: `hub status --max-age=30s` also checks status.heartbeatTime.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=configbundle
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'default'",message="the hub maintains one Fleet, named default"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Clusters",type=integer,JSONPath=`.status.clusters.total`
// +kubebuilder:printcolumn:name="Clusters-Ready",type=integer,JSONPath=`.status.clusters.ready`
// +kubebuilder:printcolumn:name="Paused",type=integer,JSONPath=`.status.clusters.paused`,priority=1
// +kubebuilder:printcolumn:name="Unowned",type=integer,JSONPath=`.status.clusters.unowned`,priority=1
// +kubebuilder:printcolumn:name="Bundles",type=integer,JSONPath=`.status.bundles.total`
// +kubebuilder:printcolumn:name="Bundles-Ready",type=integer,JSONPath=`.status.bundles.ready`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.bundles.failed`
// +kubebuilder:printcolumn:name="Drifted",type=integer,JSONPath=`.status.bundles.drifted`,priority=1
// +kubebuilder:printcolumn:name="Heals",type=integer,JSONPath=`.status.heals`
// +kubebuilder:printcolumn:name="FleetBundles",type=integer,JSONPath=`.status.fleetBundles.total`,priority=1
// +kubebuilder:printcolumn:name="FleetBundles-Failed",type=integer,JSONPath=`.status.fleetBundles.failed`,priority=1
// +kubebuilder:printcolumn:name="Heartbeat",type=date,JSONPath=`.status.heartbeatTime`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Fleet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// status sums up the MemberClusters and the FleetBundles.
	// +optional
	Status FleetStatus `json:"status,omitempty"`
}

// FleetList is a list of Fleets.
//
// +kubebuilder:object:root=true
type FleetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Fleet `json:"items"`
}

func init() {
	register(&Fleet{}, &FleetList{})
}
