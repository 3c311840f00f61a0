package v1alpha1

// SourceLabel, with the value "true", marks a hub ConfigMap or Secret that FleetBundles of its
// namespace may read through spec.dataFrom. The hub caches and reads no other ConfigMap, and no
// other Secret but the members' kubeconfig Secrets and its own snapshots (SourceSnapshotValue).
const SourceLabel = "hub.configbundle.dev/source"

// SourceSnapshotValue is the value of SourceLabel on the hub's snapshot Secrets: the immutable
// Secret "<fleetbundle>-<revision>-sources" (SnapshotName) that keeps what a revision's secretRef
// sources held, owned by that revision's ControllerRevision and pruned with it. It is not "true":
// no FleetBundle reads a snapshot as a source.
const SourceSnapshotValue = "snapshot"

// MaxDataFromSources is the most entries of a FleetBundle's spec.dataFrom.
const MaxDataFromSources = 16

// Reasons of a FleetBundle's Ready condition (False) about its spec.dataFrom sources. Nothing is
// placed, removed or changed in any member until it is fixed, and one Warning Event of the same
// reason is recorded on the FleetBundle when it starts.
const (
	// SourceNotFoundReason: a source does not exist in the FleetBundle's namespace, or is not
	// labelled SourceLabel ("hub.configbundle.dev/source": "true"), so the hub cannot read it
	// (the two look the same to the hub). The message names the source and the label.
	SourceNotFoundReason = "SourceNotFound"

	// SourceInvalidReason: a source cannot be placed as it is: a key listed in keys is missing
	// from it (or is binaryData), a key with its prefix is not a valid ConfigMap key, or its data
	// with the template's are more than a bundle holds. The message names the source and why.
	SourceInvalidReason = "SourceInvalid"
)

// Warning Events recorded on a FleetBundle when its Ready condition becomes SourceNotFound or
// SourceInvalid; the note is the condition's message.
const (
	SourceNotFoundEvent = SourceNotFoundReason
	SourceInvalidEvent  = SourceInvalidReason
)

// DataFromSource is one hub object whose data a FleetBundle places: exactly one of configMapRef
// and secretRef.
// +kubebuilder:validation:XValidation:rule="has(self.configMapRef) != has(self.secretRef)",message="dataFrom: each entry sets exactly one of configMapRef and secretRef",reason=FieldValueInvalid
type DataFromSource struct {
	// configMapRef names a ConfigMap of the FleetBundle's namespace, labelled SourceLabel.
	// +optional
	ConfigMapRef *SourceReference `json:"configMapRef,omitempty"`

	// secretRef names a Secret of the FleetBundle's namespace, labelled SourceLabel, of type
	// Opaque. A Secret's data never lands in a ConfigMap: it is allowed only in a FleetBundle
	// whose template has target Secret, which takes its data only from secretRef sources. Its
	// values are never copied into a ConfigBundle or a ControllerRevision: each revision keeps
	// them in an immutable hub Secret "<fleetbundle>-<revision>-sources" (SourceSnapshotValue).
	// +optional
	SecretRef *SourceReference `json:"secretRef,omitempty"`

	// keys, if set, are the only keys taken from the source; each must exist in it
	// (SourceInvalid otherwise). Absent: every key of the source's data.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=48
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[-._a-zA-Z0-9]+$`
	Keys []string `json:"keys,omitempty"`

	// prefix is prepended to every key taken from the source. An entry with a prefix may
	// define a key an earlier entry defines: its value wins.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('..')",message="dataFrom: prefix must not start with '..': no ConfigMap key does"
	Prefix string `json:"prefix,omitempty"`
}

// SourceReference names an object of the FleetBundle's namespace: there is no reference to
// another namespace.
type SourceReference struct {
	// name is the object's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// DataFromRevision pins a FleetBundle's sources to the copy a revision keeps of them.
type DataFromRevision struct {
	// revision is the revision whose copy of the sources is placed.
	// +required
	// +kubebuilder:validation:Minimum=1
	Revision int64 `json:"revision"`

	// sourcesHash is the hash of what the sources resolved to when the pin was set: the pin
	// applies while they still do.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	SourcesHash string `json:"sourcesHash"`
}
