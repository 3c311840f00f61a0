package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons of a MemberCluster's Ready condition.
const (
	// ConnectedReason (True): the hub is connected to the member and reconciles its bundles.
	ConnectedReason = "Connected"

	// RotationFailedReason (True): the Secret's new kubeconfig could not be used; the hub keeps
	// working with the previous one. The message says why the new one failed.
	RotationFailedReason = "RotationFailed"

	// ConnectingReason (False): the hub is connecting to the member for the first time. A
	// routine step of a join: its Event is Normal.
	ConnectingReason = "Connecting"

	// UnreachableReason (False): the member did not answer (connection, or consecutive health
	// probes, failed or timed out). Its bundle counts are those last observed, at lastSeenTime.
	UnreachableReason = "Unreachable"

	// ForbiddenReason (False): the member refused the hub's credential (401 or 403), when
	// connecting or on the first probe that gets the refusal (a revoked or expired token).
	ForbiddenReason = "Forbidden"

	// CRDMissingReason (False): the ConfigBundle CRD is absent from the member, or being
	// deleted (which deletes every ConfigBundle of the member), from the moment the hub's watch
	// of it sees so until it is back and served again: reinstalled by the hub where it may
	// (--install-crds, and the right to create it), or by someone else. The message says which.
	CRDMissingReason = "CRDMissing"

	// CRDNewerReason (True): the member's ConfigBundle CRD carries a higher revision
	// (CRDRevisionAnnotation) than the one this hub embeds (MemberCRDRevision): a newer hub
	// applied it, as in a rolling upgrade of the hub. This hub leaves it alone and keeps
	// reconciling the member with it; the message names both revisions. Not a failure: the
	// member works, and its Event is Normal.
	CRDNewerReason = "CRDNewer"

	// DuplicateClusterReason (False): another member already is this very cluster (same
	// kube-system namespace uid); it is managed once, under the other member's name.
	DuplicateClusterReason = "DuplicateCluster"

	// InvalidKubeconfigReason (False): the Secret has no kubeconfig under the expected key, or
	// it is empty, garbage, or unusable.
	InvalidKubeconfigReason = "InvalidKubeconfig"

	// ExecPluginNotAllowedReason (False): the kubeconfig asks for an exec credential plugin; the
	// hub never runs a program because of a Secret.
	ExecPluginNotAllowedReason = "ExecPluginNotAllowed"

	// AuthProviderNotAllowedReason (False): the kubeconfig asks for an auth-provider plugin.
	AuthProviderNotAllowedReason = "AuthProviderNotAllowed"

	// FileReferenceNotAllowedReason (False): the kubeconfig names a local file (token file,
	// client certificate or key, certificate authority); the hub never reads its own files
	// because of a Secret.
	FileReferenceNotAllowedReason = "FileReferenceNotAllowed"
)

// CredentialsValidCondition is the condition type that says whether the credential of a
// member's kubeconfig is valid for long enough. It is separate from Ready, which is about
// reachability, so that alerts can tell an expiring credential from an outage.
const CredentialsValidCondition = "CredentialsValid"

// Reasons of a MemberCluster's CredentialsValid condition.
const (
	// CredentialsValidReason (True): the credential expires after the warning window (the hub's
	// --credentials-expiry-warning, 30 days by default) or never; or the hub renews it (a token
	// `hub register` issued, renewed once 80% of its life has passed) and its last renewal did
	// not fail: the message says when it expires and when it is renewed.
	CredentialsValidReason = "Valid"

	// RenewalFailedReason (False): the hub's last renewal of the credential failed; the message
	// says why and when the credential expires. The hub retries with back-off; if it keeps
	// failing, register the member again (`hub register`), which also restores the rights the
	// renewal needs.
	RenewalFailedReason = "RenewalFailed"

	// ExpiresSoonReason (False): the credential expires within the warning window; the message
	// says when. Register the member again (`hub register`) to rotate it.
	ExpiresSoonReason = "ExpiresSoon"

	// ExpiredReason (False): the credential has expired.
	ExpiredReason = "Expired"

	// ExpiryUnknownReason (Unknown): the credential does not say when it expires (a token that
	// is not a JWT, for example) or the member is not connected yet. Not a failure: its Event is
	// Normal.
	ExpiryUnknownReason = "ExpiryUnknown"
)

// The Events recorded on a MemberCluster: one each time its Ready or CredentialsValid condition
// changes status or reason, with the condition's reason as the Event's reason. Normal when the
// condition became True or its reason is a routine step (RoutineReasons), Warning otherwise (a
// real failure: Unreachable, Forbidden, InvalidKubeconfig, CRDMissing, DuplicateCluster,
// Expired, ExpiresSoon, ...).

// The Events the hub records on a MemberCluster about the member's ConfigBundle CRD, which the hub
// keeps as it applies it (with --install-crds): it watches the CRD in every member it is
// connected to.
const (
	// CRDRestoredEvent (Normal): the member's ConfigBundle CRD differed from the hub's (its
	// schema stripped or changed, its names, scope or versions) and the hub applied its own
	// again (server-side apply, forced); the note says what differed.
	CRDRestoredEvent = "CRDRestored"

	// CRDDeletedEvent (Warning): the member's ConfigBundle CRD, which the hub had seen, is being
	// deleted or is gone, and with it every ConfigBundle of the member (and, by garbage
	// collection, their ConfigMaps). The member is not Ready (CRDMissing) until the CRD is back.
	CRDDeletedEvent = "CRDDeleted"
)

// The revision of a member's ConfigBundle CRD, by which a hub never replaces the CRD a newer hub
// applied with its own older one: during a rolling upgrade, replicas of both run.
const (
	// CRDRevisionAnnotation on a member's ConfigBundle CRD holds, as a decimal integer, the
	// revision of the CRD the hub applied (the MemberCRDRevision of its build). A hub upgrades a
	// CRD whose revision is lower than its own, or missing (CRDs applied before revisions
	// existed, or by someone else), and leaves alone one whose revision is higher
	// (CRDNewerReason). Every apply carries the resourceVersion it judged, so that a concurrent
	// change by another hub fails it with a conflict rather than being overwritten.
	CRDRevisionAnnotation = "hub.configbundle.dev/crd-revision"

	// MemberCRDRevision is the revision of the ConfigBundle CRD this build embeds
	// (config/crd/bases/configbundle.dev_configbundles.yaml), which the hub stamps on the CRD it
	// applies to a member (CRDRevisionAnnotation). Bump it with every change of that CRD:
	// TestMemberCRDRevision fails until it is.
	MemberCRDRevision = 3
)

// PausedCondition is the condition type that says whether a member is paused (spec.paused). It
// is separate from Ready: a member in maintenance is not a failure and pages nobody.
const PausedCondition = "Paused"

// Reasons of a MemberCluster's Paused condition, and the Events recorded when it changes.
const (
	// PausedReason (True): spec.paused is set; placement writes nothing to the member. Also the
	// reason of the Normal Event recorded when the member is paused.
	PausedReason = "Paused"

	// NotPausedReason (False): spec.paused is not set; placement proceeds in the member.
	NotPausedReason = "NotPaused"

	// ResumedReason is the reason of the Normal Event recorded when a paused member is resumed.
	ResumedReason = "Resumed"
)

// SyncedCondition is the condition type that says whether the hub has finished its first full
// reconcile of the member since the member connected (joined, came back with new credentials,
// or connected to a hub that just started): every ConfigBundle the member held then reconciled
// once, its outcome recorded in its status. Until then a change made to a bundle or its
// ConfigMap before the hub connected may not be healed yet, and the counts of status.bundles may
// be those of an earlier hub. Changes made after the member connected are handled first, ahead
// of that backlog. The Fleet is not Ready (MembersSyncingReason) while a member is Syncing.
const SyncedCondition = "Synced"

// Reasons of a MemberCluster's Synced condition.
const (
	// SyncingReason (False): the hub has not yet reconciled once every ConfigBundle the member
	// held when it connected; the message says how many are left, as "12000 of 20012
	// ConfigBundles left to reconcile since the member connected". Also while the member is not
	// connected yet.
	SyncingReason = "Syncing"

	// AllReconciledReason (True): every ConfigBundle the member held when it connected has been
	// reconciled once since. It stays True while the member is connected, even when it stops
	// answering for a while; a new connection starts over (Syncing).
	AllReconciledReason = "AllReconciled"
)

// RoutineReasons are the reasons of a MemberCluster condition that is not True that are steps of
// a normal join, not failures: a member connecting for the first time, and a credential that does
// not say when it expires (or not yet). Their Events are Normal.
var RoutineReasons = []string{ConnectingReason, ExpiryUnknownReason}

// MaxFailedBundles is the most failing bundles a MemberCluster lists in status.failedBundles;
// status.bundles.failed counts them all.
const MaxFailedBundles = 10

// FailedBundle names a ConfigBundle whose Ready condition is False, and why.
type FailedBundle struct {
	// namespace of the ConfigBundle in the member.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// name of the ConfigBundle.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// reason of the bundle's Ready condition, such as ConfigMapConflict or CreateFailed.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason"`

	// message of the bundle's Ready condition, shortened to 1024 bytes.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// SecretReference names a Secret.
type SecretReference struct {
	// namespace of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// MemberClusterSpec says where a member comes from, and whether it is paused.
type MemberClusterSpec struct {
	// secretRef is the kubeconfig Secret the member was discovered from.
	// +required
	SecretRef SecretReference `json:"secretRef"`

	// paused freezes the member at what it holds, for maintenance: placement writes nothing to it
	// (no new FleetBundle, no new revision, no removal, no cleanup) while the bundles it holds are
	// still enforced and healed, and its connection, probes and reports go on. Set with `hub
	// pause NAME`, cleared with `hub resume NAME`; the Paused condition says so.
	// +optional
	// +kubebuilder:default=false
	Paused bool `json:"paused,omitempty"`
}

// MemberClusterStatus is the member's health as the hub sees it.
type MemberClusterStatus struct {
	// conditions hold Ready: whether the hub is connected and reconciling the member, and if
	// not, why; CredentialsValid: whether the credential of the member's kubeconfig is valid for
	// long enough; Paused: whether spec.paused holds placement back; Synced: whether the hub has
	// reconciled once every ConfigBundle the member held when it connected; and Guarded: whether
	// the hub's admission policies are in place in the member (see the *Reason constants of this
	// package).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// kubernetesVersion is the member API server's version (gitVersion).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`

	// clusterID is the uid of the member's kube-system namespace, which identifies a cluster
	// whatever address or credential reaches it.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ClusterID string `json:"clusterID,omitempty"`

	// bundles counts the member's ConfigBundles, from the hub's cache of the member. While the
	// member is not Ready they are the counts last observed, at lastSeenTime.
	// +optional
	Bundles BundleCounts `json:"bundles"`

	// failedBundles lists the member's failing ConfigBundles (Ready False), sorted by namespace
	// and name: at most MaxFailedBundles (10) of them; bundles.failed counts them all.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	FailedBundles []FailedBundle `json:"failedBundles,omitempty"`

	// credentialsExpiry is when the credential of the member's kubeconfig expires: the exp
	// claim of a ServiceAccount token, or the notAfter of a client certificate. Absent when the
	// credential does not say.
	// +optional
	CredentialsExpiry *metav1.Time `json:"credentialsExpiry,omitempty"`

	// heals is the sum of the member's ConfigBundles' status.heals.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Heals int64 `json:"heals"`

	// lastSeenTime is when the member last answered the hub, as of the last change of this
	// status: it is written with other changes, never alone, so that a steady fleet costs no
	// writes. While the member is Ready, the Fleet's status.heartbeatTime says the hub still
	// watches it; once it is not, lastSeenTime is when it last answered, frozen.
	// +optional
	LastSeenTime *metav1.Time `json:"lastSeenTime,omitempty"`

	// replica is the --replica-id of the hub replica managing the member now: the one that
	// connects to it, reconciles its ConfigBundles and writes this status. With sharded replicas
	// (--sharded) it shows how the members are spread; it changes when a replica joins or leaves
	// and the member is handed over.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Replica string `json:"replica,omitempty"`
}

// MemberCluster is one member of the fleet, as discovered from a labelled kubeconfig Secret in
// the hub's namespace and named after it. The hub creates, updates and deletes it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=mc,categories=configbundle
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.conditions[?(@.type=="Synced")].status`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.kubernetesVersion`
// +kubebuilder:printcolumn:name="Bundles",type=integer,JSONPath=`.status.bundles.total`
// +kubebuilder:printcolumn:name="Bundles-Ready",type=integer,JSONPath=`.status.bundles.ready`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.bundles.failed`
// +kubebuilder:printcolumn:name="Drifted",type=integer,JSONPath=`.status.bundles.drifted`,priority=1
// +kubebuilder:printcolumn:name="Heals",type=integer,JSONPath=`.status.heals`
// +kubebuilder:printcolumn:name="Paused",type=boolean,JSONPath=`.spec.paused`
// +kubebuilder:printcolumn:name="Placed",type=integer,JSONPath=`.status.bundles.placed`,priority=1
// +kubebuilder:printcolumn:name="Last-Seen",type=date,JSONPath=`.status.lastSeenTime`,priority=1
// +kubebuilder:printcolumn:name="Credentials",type=string,JSONPath=`.status.conditions[?(@.type=="CredentialsValid")].reason`,priority=1
// +kubebuilder:printcolumn:name="Credentials-Expiry",type=string,JSONPath=`.status.credentialsExpiry`,priority=1
// +kubebuilder:printcolumn:name="Replica",type=string,JSONPath=`.status.replica`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MemberCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says where the member comes from.
	// +required
	Spec MemberClusterSpec `json:"spec"`

	// status is the member's health as the hub sees it.
	// +optional
	Status MemberClusterStatus `json:"status,omitempty"`
}

// MemberClusterList is a list of MemberClusters.
//
// +kubebuilder:object:root=true
type MemberClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemberCluster `json:"items"`
}

func init() {
	register(&MemberCluster{}, &MemberClusterList{})
}
