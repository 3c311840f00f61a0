package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
)

// Reasons of a FleetBundle's Ready condition.
//
// AllReadyReason (True), shared with the Fleet: every selected member holds the bundle and it is
// Ready there.
const (
	// ProgressingReason (False): some selected members do not hold the bundle yet, or hold it
	// but it is not Ready yet, and none has failed.
	ProgressingReason = "Progressing"

	// ClustersFailedReason (False): the bundle failed in at least one selected member; the
	// message names the first of them and status.failedClusters lists them.
	ClustersFailedReason = "ClustersFailed"

	// NoClustersSelectedReason (True): the selector selects no member (or is absent), so there is
	// nothing to place and nothing is waited for: the FleetBundle is vacuously Ready, as a
	// Deployment scaled to 0 is available. Health checks that read the Ready condition (kstatus,
	// used by Flux, kpt and Argo CD-style tools) read Current, not InProgress forever; the
	// reason says that nothing is placed, and status.clusters.selected is 0.
	NoClustersSelectedReason = "NoClustersSelected"

	// NameTooLongReason (False): the FleetBundle's namespace and name, joined by a dot, are
	// longer than MaxFleetBundleLabelValue (63) characters, the most a label value holds, so
	// FleetBundleLabel cannot name it: nothing is placed. Recreate it with a shorter name.
	NameTooLongReason = "NameTooLong"

	// InvalidSelectorReason (False): spec.clusterSelector is not a valid label selector (an
	// operator In without values, say): nothing is placed, removed or changed in any member
	// until it is fixed.
	InvalidSelectorReason = "InvalidSelector"
)

// MaxFleetBundleLabelValue is the longest "<namespace>.<name>" of a FleetBundle that can be
// placed: the most characters a label value holds.
const MaxFleetBundleLabelValue = 63

// Reasons of an entry of a FleetBundle's status.failedClusters.
const (
	// ConflictReason: the member has a ConfigBundle of the placed name that the hub did not
	// place; it is left untouched, and placement proceeds once it is gone.
	ConflictReason = "Conflict"

	// NamespaceMissingReason: the member has no namespace of the FleetBundle's namespace's
	// name; the hub does not create namespaces, and places the bundle once one exists.
	NamespaceMissingReason = "NamespaceMissing"

	// NotJoinedReason: a MemberCluster is selected, but its member is not connected yet.
	NotJoinedReason = "NotJoined"

	// PlacementFailedReason: writing the placed ConfigBundle failed; the message says why.
	PlacementFailedReason = "PlacementFailed"

	// A selected member that is not Ready has the reason of its own Ready condition
	// (Connecting, Unreachable, Forbidden, ...); a placed bundle that is not Ready has the reason
	// of its Ready condition (CreateFailed, ConfigMapConflict, ...).
)

// Labels and annotations of a placed ConfigBundle.
const (
	// FleetBundleLabel names the FleetBundle that placed a ConfigBundle, as
	// "<namespace>.<name>" (the hub's namespace and name of the FleetBundle).
	FleetBundleLabel = "hub.configbundle.dev/fleet-bundle"

	// FleetBundleUIDAnnotation holds the uid of the FleetBundle that placed a ConfigBundle. A
	// ConfigBundle without it (or without FleetBundleLabel) was not placed by the hub and is never
	// changed (Conflict); one with FleetBundleLabel and another uid was placed by an earlier
	// FleetBundle of the same name, now gone, and is replaced.
	FleetBundleUIDAnnotation = "hub.configbundle.dev/fleet-bundle-uid"

	// FleetBundleTemplateHashAnnotation holds a hash of the template a placed ConfigBundle was
	// written from. A placed bundle that differs from the template although it carries the hash
	// of the current template was changed by someone else: restoring it is a heal. One that
	// carries another hash is following a template change: not a heal. (A hash rather than the
	// FleetBundle's generation: a change of the selector alone changes the generation but no
	// placed bundle, and must cost no write in the members that stay selected.)
	FleetBundleTemplateHashAnnotation = "hub.configbundle.dev/fleet-bundle-template-hash"

	// PlacementFinalizer keeps a FleetBundle until the bundles it placed are removed.
	PlacementFinalizer = "hub.configbundle.dev/placement"
)

// Reasons of the Events recorded on a FleetBundle.
const (
	// PlacedBundleHealedEvent: a placed ConfigBundle had been edited or deleted in a member and
	// was restored; the message names the member and what changed.
	PlacedBundleHealedEvent = "PlacedBundleHealed"

	// ClusterFailingEvent (Warning): a selected member started failing for the FleetBundle, or
	// now fails for another reason (a Conflict, NamespaceMissing, PlacementFailed, the placed
	// bundle's Ready=False reason such as ConfigMapConflict, or the member's own reason when it is
	// not Ready, such as Unreachable or Forbidden). The related object is the member's
	// MemberCluster, the action the failure's reason, and the note names the member, the reason
	// and its message. One per transition of each member, as the replica that manages the member
	// observes it; a member that is only joining (NotJoined, Connecting) raises none.
	ClusterFailingEvent = "ClusterFailing"

	// ClusterRecoveredEvent (Normal): a member that was failing for the FleetBundle no longer is;
	// the action and the note name the reason it recovered from. A member that stops being
	// selected, or leaves the fleet, while failing raises none.
	ClusterRecoveredEvent = "ClusterRecovered"
)

// MaxFailedClusters is the most entries of a FleetBundle's status.failedClusters; the total is
// status.clusters.failed.
const MaxFailedClusters = 10

// ConfigBundleTemplate is what each selected member gets as a ConfigBundle.
type ConfigBundleTemplate struct {
	// metadata holds the labels and annotations of the placed ConfigBundles.
	// +optional
	Metadata TemplateMetadata `json:"metadata,omitzero"` // omitzero, not omitempty (which never omits a struct): absent stays absent

	// spec is the spec of the placed ConfigBundles, with the rules of a ConfigBundle's spec:
	// the message size bounds, and no change once immutable is true.
	// +required
	Spec configbundlev1alpha1.ConfigBundleSpec `json:"spec"`
}

// TemplateMetadata is the metadata a template sets on the objects it makes.
type TemplateMetadata struct {
	// labels of the placed ConfigBundles, besides FleetBundleLabel.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Labels map[string]string `json:"labels,omitempty"`

	// annotations of the placed ConfigBundles, besides FleetBundleUIDAnnotation.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Annotations map[string]string `json:"annotations,omitempty"`
}

// FleetBundleSpec says what to place and where.
type FleetBundleSpec struct {
	// clusterSelector selects MemberClusters by their labels, with Kubernetes semantics: an
	// empty selector ({}) selects every member, an absent one selects none.
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`

	// template is the ConfigBundle each selected member gets, named like the FleetBundle, in
	// the namespace of the same name as the FleetBundle's.
	// +required
	Template ConfigBundleTemplate `json:"template"`
}

// PlacementCounts counts the members a FleetBundle selects, by how far its bundle got there.
type PlacementCounts struct {
	// selected is the number of MemberClusters the selector selects.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Selected int32 `json:"selected"`

	// applied is the number of selected members that hold the bundle as the template says.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Applied int32 `json:"applied"`

	// ready is the number of selected members where the bundle is Ready.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Ready int32 `json:"ready"`

	// failed is the number of selected members where placement or the bundle failed, or that
	// are not Ready; the first MaxFailedClusters are in status.failedClusters.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Failed int32 `json:"failed"`
}

// ClusterFailure is a selected member where the bundle is not as it should be.
type ClusterFailure struct {
	// cluster is the MemberCluster's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`

	// reason is a CamelCase reason: one of the failedClusters reasons, the member's Ready reason,
	// or the placed bundle's Ready reason.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason"`

	// message says what happened, for a human, shortened to 1024 bytes.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// FleetBundleReplicaStatus is one sharded hub replica's share of a FleetBundle's status: the
// selected members that replica manages.
type FleetBundleReplicaStatus struct {
	// replica is the --replica-id of the replica.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Replica string `json:"replica"`

	// observedGeneration is the generation of the FleetBundle this share was computed for.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// clusters counts the selected members the replica manages.
	// +optional
	Clusters PlacementCounts `json:"clusters"`

	// failedClusters are the first MaxFailedClusters (10) of them that failed, sorted by name.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=10
	FailedClusters []ClusterFailure `json:"failedClusters,omitempty"`

	// heals is how many times this replica restored a placed ConfigBundle.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Heals int64 `json:"heals"`

	// holding is the number of the replica's connected members that hold the bundle: a
	// FleetBundle being deleted keeps its finalizer until every live replica reports 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Holding int32 `json:"holding"`
}

// FleetBundleStatus is where a FleetBundle's bundle stands in the members it selects.
type FleetBundleStatus struct {
	// observedGeneration is the generation the status was computed for.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// clusters counts the selected members.
	// +optional
	Clusters PlacementCounts `json:"clusters"`

	// failedClusters are the first MaxFailedClusters (10) failed members, sorted by name.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=10
	FailedClusters []ClusterFailure `json:"failedClusters,omitempty"`

	// heals is how many times the hub restored a placed ConfigBundle that someone edited or
	// deleted in a member.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Heals int64 `json:"heals"`

	// replicas holds, with sharded hub replicas (--sharded), what each live replica observes of
	// the FleetBundle in the members it manages; the replica elected for the hub-wide work sums
	// them into clusters, failedClusters and heals, and drops the entries of replicas that are
	// gone. Empty without --sharded.
	// +optional
	// +listType=map
	// +listMapKey=replica
	// +kubebuilder:validation:MaxItems=64
	Replicas []FleetBundleReplicaStatus `json:"replicas,omitempty"`

	// conditions hold Ready: True when every selected member holds the bundle and it is Ready
	// there (AllReady), or when none is selected (NoClustersSelected).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// FleetBundle defines a ConfigBundle once, on the hub, and places it in every member cluster its
// selector selects: each gets a ConfigBundle named like the FleetBundle in the namespace of the
// same name, which the member's reconciler then enforces.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fb,categories=configbundle
// +kubebuilder:printcolumn:name="Selected",type=integer,JSONPath=`.status.clusters.selected`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.clusters.ready`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.clusters.failed`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FleetBundle struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says what to place and where.
	// +required
	Spec FleetBundleSpec `json:"spec"`

	// status is where the bundle stands in the selected members.
	// +optional
	Status FleetBundleStatus `json:"status,omitempty"`
}

// FleetBundleList is a list of FleetBundles.
//
// +kubebuilder:object:root=true
type FleetBundleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FleetBundle `json:"items"`
}

func init() {
	register(&FleetBundle{}, &FleetBundleList{})
}
