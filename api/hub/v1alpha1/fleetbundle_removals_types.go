package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A removal is the most destructive change a fleet tool makes: a member that holds a
// FleetBundle's bundle and is no longer selected loses it. With spec.rollout, removals are staged
// (stage by stage, each soaking as for a new revision) and bounded (spec.rollout.maxRemovals);
// spec.deletionPolicy Orphan leaves the ConfigMap in the member.

// DeletionPolicy says what becomes of a member's ConfigMap when its placed bundle is removed.
// +kubebuilder:validation:Enum=Delete;Orphan
type DeletionPolicy string

const (
	// DeletionPolicyDelete (the default) deletes the placed ConfigBundle, and the ConfigMap with
	// it.
	DeletionPolicyDelete DeletionPolicy = "Delete"

	// DeletionPolicyOrphan deletes the placed ConfigBundle with the Orphan propagation policy
	// and leaves the ConfigMap in the member with its content, without the hub's labels and
	// annotations (those of the prefix HubPrefix, and GuardLabel) and without the
	// ownerReference to the bundle.
	DeletionPolicyOrphan DeletionPolicy = "Orphan"
)

// DeletionPolicyAnnotation, on a placed ConfigBundle, holds its FleetBundle's deletionPolicy when
// it is Orphan: the policy still applies once the FleetBundle is gone (a member that was away
// when it was deleted).
const DeletionPolicyAnnotation = "hub.configbundle.dev/deletion-policy"

// HubPrefix is the prefix of the labels and annotations the hub sets on placed objects.
const HubPrefix = "hub.configbundle.dev/"

// Events of removals, on the FleetBundle.
const (
	// OrphanedEvent (Normal): a placed ConfigBundle was deleted with deletionPolicy Orphan; its
	// ConfigMap stays in the member. The note names the member.
	OrphanedEvent = "Orphaned"

	// RemovalHeldEvent (Warning): a change would remove the bundle from more members than
	// spec.rollout.maxRemovals; nothing is removed. The note names how many members and why.
	RemovalHeldEvent = "RemovalHeld"
)

// RemovalHeldReason (Ready=False; also the phase RemovalHeld of status.rollout): a change would
// remove the bundle from more members than spec.rollout.maxRemovals allows, so the hub removes
// it from none. The message names how many members and why. Reverting the change clears it;
// `hub rollout approve NAME --removals` lets the removals proceed.
const RemovalHeldReason = "RemovalHeld"

// RolloutRemovalHeld: removals are held (status.rollout.removals.held).
const RolloutRemovalHeld RolloutPhase = "RemovalHeld"

// MaxRemovalMembers is the most names status.rollout.removals.members holds: removals beyond
// them wait until earlier ones are done.
const MaxRemovalMembers = 1000

// MaxRemovalApprovals is the most entries of spec.rollout.removalApprovals.
const MaxRemovalApprovals = 16

// RemovalApproval approves one set of held removals.
type RemovalApproval struct {
	// removalSet is the status.rollout.removals.removalSet of the hold it approves: a hash of the
	// names of the members that would lose the bundle.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	RemovalSet string `json:"removalSet"`

	// approvedBy is the username of who approved.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ApprovedBy string `json:"approvedBy"`
}

// RemovalStatus is where the removal of a FleetBundle's bundle from members that hold it and are
// no longer selected stands.
type RemovalStatus struct {
	// pending is how many members hold the bundle and are no longer selected.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Pending int32 `json:"pending"`

	// held is true while the removals are held: they would remove the bundle from more
	// members than maxRemovals allows, and nobody approved them.
	// +optional
	Held bool `json:"held,omitempty"`

	// removalSet is a hash of the names of the members that would lose the bundle: an entry of
	// spec.rollout.removalApprovals naming it approves them.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	RemovalSet string `json:"removalSet,omitempty"`

	// members names the members admitted to lose the bundle, sorted: each loses it once its
	// stage's turn comes. Empty while held. At most MaxRemovalMembers (1000).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=253
	Members []string `json:"members,omitempty"`

	// stage is the stage whose members lose the bundle now; the members of earlier stages lost
	// it already.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Stage string `json:"stage,omitempty"`

	// soakStartTime is when the hub first saw that the last of the stage's members lost the
	// bundle (to the microsecond, so that a soak lasts its whole soakTime): the next stage's
	// members lose it once the stage's soakTime passed.
	// +optional
	SoakStartTime *metav1.MicroTime `json:"soakStartTime,omitempty"`

	// message says what the removals wait for or why they are held.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}
