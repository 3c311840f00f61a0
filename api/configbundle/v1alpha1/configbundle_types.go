package v1alpha1

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// MessageKey is the key of the managed ConfigMap's data that holds spec.message.
const MessageKey = "message"

// MaxMessageBytes is the largest spec.message, in bytes of UTF-8, that fits in a ConfigMap: the
// values of a ConfigMap's data hold at most 1 MiB together.
const MaxMessageBytes = 1024 * 1024

// MaxEscapedMessageBytes is the largest spec.message once JSON-escaped, the form in which the API
// server stores a ConfigBundle in etcd: <, > and &, U+2028, U+2029 and the control characters
// other than tab, newline and carriage return take 6 bytes each (\u003c), ", \, tab, newline
// and carriage return 2 (\n), every other character its bytes of UTF-8. etcd refuses a write of
// more than StorageLimitBytes; the rest, StorageLimitBytes-MaxEscapedMessageBytes (256 KiB), is
// the margin left for the rest of the object: its metadata (managedFields included) and status.
// A message of MaxMessageBytes of plain text is 1 MiB escaped, well within the bound; a message
// of MaxMessageBytes/4 (262,144) characters of < is 1.5 MiB escaped, beyond it.
const MaxEscapedMessageBytes = StorageLimitBytes - 256*1024

// StorageLimitBytes is the largest write etcd accepts by default (its --max-request-bytes,
// 1.5 MiB): a ConfigBundle larger than that, as JSON, is refused with "etcdserver: request is
// too large".
const StorageLimitBytes = 1536 * 1024

// MaxDataKeys is the most keys of a ConfigBundle's spec.data.
const MaxDataKeys = 48

// MaxDataValueBytes is the longest value of a ConfigBundle's spec.data, in bytes of UTF-8. Message
// and data share the ConfigMap's MaxMessageBytes.
const MaxDataValueBytes = 32 * 1024

// DataValue is a value of a ConfigBundle's spec.data: at most MaxDataValueBytes bytes of UTF-8.
// +kubebuilder:validation:MaxLength=32768
type DataValue string

// Condition types of a ConfigBundle.
const (
	// ReadyCondition is True when the managed ConfigMap exists, is owned by the bundle and equals
	// the state the bundle asks for. When it is False, its reason says why.
	ReadyCondition = "Ready"
)

// Reasons of the Ready condition.
const (
	// SyncedReason (Ready=True): the managed ConfigMap matches the bundle.
	SyncedReason = "Synced"

	// CreateFailedReason (Ready=False): the API server refused to create the ConfigMap for a
	// reason that may pass (quota, timeout, unavailability, a conflict). Retried with back-off.
	CreateFailedReason = "CreateFailed"

	// UpdateFailedReason (Ready=False): the API server refused to update, replace or delete the
	// ConfigMap, or to restore the bundle's spec, for a reason that may pass. Retried with
	// back-off.
	UpdateFailedReason = "UpdateFailed"

	// ConfigMapConflictReason (Ready=False): a ConfigMap of the bundle's name exists that this
	// bundle does not own and may not take over (spec.takeOver; never one another object
	// controls). It is left untouched; the bundle proceeds once that ConfigMap is gone, or may
	// be taken over.
	ConfigMapConflictReason = "ConfigMapConflict"

	// InvalidConfigMapReason (Ready=False): the API server rejected the ConfigMap as invalid.
	// Retrying cannot help: nothing is retried until the bundle changes.
	InvalidConfigMapReason = "InvalidConfigMap"
)

// Reasons the reconciler reports on the hub only (a MemberCluster's status.failedBundles and the
// reason label of configbundle_reconcile_errors_total), never in a bundle's own status.
const (
	// StatusWriteFailedReason (Ready=False): the bundle's ConfigMap is as the bundle asks, but the
	// status that would say so could not be written.
	StatusWriteFailedReason = "StatusWriteFailed"

	// ForbiddenReason (Ready=False): the member forbade the hub's credential to write the
	// bundle's status (HTTP 403), whatever else the reconcile met (its message says): the hub
	// lost a right there, and its MemberCluster is Forbidden too, naming the rights refused;
	// `hub register` again restores them. (A ConfigMap write the member forbids keeps the reason
	// of that write, CreateFailed or UpdateFailed, in the bundle's status: a 403 there may also be
	// a quota or an admission policy.)
	ForbiddenReason = "Forbidden"

	// ReadFailedReason: the bundle or its ConfigMap could not be read.
	ReadFailedReason = "ReadFailed"
)

// Reasons of the Events recorded on a ConfigBundle.
const (
	// DriftHealedEvent: the managed ConfigMap had drifted (or had been deleted) and was healed.
	DriftHealedEvent = "DriftHealed"

	// SpecRestoredEvent: the spec of an immutable bundle had changed; it was restored from its
	// immutable ConfigMap.
	SpecRestoredEvent = "SpecRestored"

	// FightingWriterEvent (Warning): another writer keeps changing the managed ConfigMap: the
	// bundle was healed configbundle.FightHeals (10) times within configbundle.FightWindow (1
	// minute). Recorded once per fight, naming what keeps changing; healing continues.
	FightingWriterEvent = "FightingWriter"
)

// DriftPolicy says what the reconciler does when the managed ConfigMap drifts: when someone
// other than the hub changes or deletes it.
// +kubebuilder:validation:Enum=Heal;Report;Guard
type DriftPolicy string

const (
	// DriftPolicyHeal: drift is healed at once, counted in status.heals and recorded as a
	// DriftHealed Event. The default.
	DriftPolicyHeal DriftPolicy = "Heal"

	// DriftPolicyReport: drift is reported, never healed: the hub does not write a ConfigMap that
	// drifted (nor recreate a deleted one). The bundle is Ready=False, reason Drifted, with
	// status.drift, and a DriftDetected Event is recorded when the ConfigMap starts to differ.
	// A change of the bundle's spec is still published.
	DriftPolicyReport DriftPolicy = "Report"

	// DriftPolicyGuard: as Heal, and the managed ConfigMap carries GuardLabel, so that the
	// member's admission policy refuses changes to it that do not come from the hub.
	DriftPolicyGuard DriftPolicy = "Guard"
)

// MaxDriftFields is the most entries of status.drift.fields; a longer list ends with an entry
// saying how many more differ.
const MaxDriftFields = 32

// DriftedReason (Ready=False): with driftPolicy Report, the managed ConfigMap differs from the
// bundle (or was deleted) since someone else changed it; the message and status.drift say what
// differs and who changed it. It clears by itself when the ConfigMap matches again.
const DriftedReason = "Drifted"

// DriftDetectedEvent (Warning): with driftPolicy Report, the managed ConfigMap started to differ
// from the bundle. Recorded once per drift: not again while the ConfigMap still differs, and
// again only after it matched once more.
const DriftDetectedEvent = "DriftDetected"

// ChangedByDeleted is status.drift.changedBy, and the "changed by" of a DriftHealed Event, when
// the ConfigMap was deleted: the member's API does not say who deleted it.
const ChangedByDeleted = "deleted"

// Policy is the spec's driftPolicy, Heal when it is not set.
func (s ConfigBundleSpec) Policy() DriftPolicy {
	if s.DriftPolicy == "" {
		return DriftPolicyHeal
	}
	return s.DriftPolicy
}

// DriftStatus is how the managed ConfigMap differs from the bundle, with driftPolicy Report.
type DriftStatus struct {
	// detectedTime is when the hub first saw the ConfigMap differ, since it last matched.
	// +required
	DetectedTime metav1.Time `json:"detectedTime"`

	// fields name what differs: "data.KEY added", "data.KEY removed" or "data.KEY changed" for
	// each data key, and "labels", "annotations", "ownerReferences", "binaryData", "immutable";
	// "deleted" when the ConfigMap was deleted. At most MaxDriftFields (32) entries.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=300
	Fields []string `json:"fields"`

	// changedBy names who made the change: the field manager, operation and time of each
	// managedFields entry of the ConfigMap that owns a drifted field and is not the hub's (for
	// example "kubectl-edit Update 2026-12-06T21:40:03Z"), separated by ", "; when no entry owns
	// one (a removal), the entries written after the hub's last write. "deleted" when the
	// ConfigMap was deleted: the member's API does not say by whom. "unknown" when nothing tells.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	ChangedBy string `json:"changedBy"`
}

// TakeOver says whether a ConfigBundle takes over a ConfigMap of its name that it does not own
// (spec.takeOver).
// +kubebuilder:validation:Enum=Never;IfNoDiff;Always
type TakeOver string

// Values of spec.takeOver.
const (
	// TakeOverNever (the default): a ConfigMap of the bundle's name that the bundle does not own
	// is left untouched, and the bundle is Ready=False, ConfigMapConflict, until it is gone.
	TakeOverNever TakeOver = "Never"

	// TakeOverIfNoDiff: such a ConfigMap is taken over (the bundle's ownerReference added, its
	// labels and annotations made the bundle's) only if its data already equals the bundle's;
	// otherwise the bundle is ConfigMapConflict, its message naming the keys that differ.
	TakeOverIfNoDiff TakeOver = "IfNoDiff"

	// TakeOverAlways: such a ConfigMap is taken over and the bundle's content written to it.
	TakeOverAlways TakeOver = "Always"
)

// TakenOverEvent (Normal) is recorded on a ConfigBundle that took over an existing ConfigMap
// (spec.takeOver); its note names the field managers that had written the ConfigMap. A takeover
// is not a heal: status.heals does not count it.
const TakenOverEvent = "TakenOver"

// ConfigBundleSpec is the configuration a ConfigBundle publishes as a ConfigMap.
//
// The rule that bounds the message's JSON-escaped size is the spec's, not the message's, so that
// its error names spec.message without quoting it: a rule of the message would echo the whole
// refused message, up to 1.5 MiB, in the error.
//
// +kubebuilder:validation:XValidation:rule=`!has(self.message) || size(bytes(self.message)) + 5 * size(self.message.findAll('[<>&\x00-\x08\x0b\x0c\x0e-\x1f]')) + 3 * size(self.message.findAll('[\u2028\u2029]')) + size(self.message.findAll('[\t\n\r"\\\\]')) <= 1310720`,fieldPath=".message",message=`message is too large to store: at most 1310720 bytes once JSON-escaped, as etcd stores it (<, >, &, U+2028, U+2029 and control characters other than tab, newline and carriage return take 6 bytes each; ", \, tab, newline and carriage return 2)`,reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="has(self.target) && self.target == 'Secret' || has(self.message)",message="message is required: a bundle with target ConfigMap publishes it as data.message",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.target) || self.target != 'Secret' || ((!has(self.message) || size(self.message) == 0) && (!has(self.data) || size(self.data) == 0))",message="a bundle with target Secret holds no values: message and data must be empty (a Secret's values come only from a FleetBundle's secretRef sources, through spec.hubSource)",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.hubSource) || has(self.target) && self.target == 'Secret'",message="hubSource is set only with target Secret",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.secretType) || has(self.target) && self.target == 'Secret'",message="secretType is set only with target Secret: a ConfigMap has no type",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.immutable) || !oldSelf.immutable || self == oldSelf",message="spec is immutable: this ConfigBundle was made immutable (spec.immutable: true), so its message, data and immutable fields can no longer change; delete and recreate it to publish different content",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule=`!has(self.data) || size(bytes(self.message)) + self.data.map(k, size(bytes(self.data[k]))).sum() <= 1048576`,fieldPath=".data",message="message and data together must fit in a ConfigMap: at most 1048576 bytes of UTF-8 in all their values (a ConfigMap holds at most 1 MiB of data)",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule=`!has(self.data) || size(bytes(self.message)) + 5 * size(self.message.findAll('[<>&\x00-\x08\x0b\x0c\x0e-\x1f]')) + 3 * size(self.message.findAll('[\u2028\u2029]')) + size(self.message.findAll('[\t\n\r"\\\\]')) + self.data.map(k, size(bytes(self.data[k])) + 5 * size(self.data[k].findAll('[<>&\x00-\x08\x0b\x0c\x0e-\x1f]')) + 3 * size(self.data[k].findAll('[\u2028\u2029]')) + size(self.data[k].findAll('[\t\n\r"\\\\]'))).sum() <= 1310720`,fieldPath=".data",message="message and data together are too large to store: at most 1310720 bytes once JSON-escaped, as etcd stores them (<, >, &, U+2028, U+2029 and control characters other than tab, newline and carriage return take 6 bytes each; \", \\, tab, newline and carriage return 2)",reason=FieldValueInvalid
type ConfigBundleSpec struct {
	// message is published as data.message of the managed ConfigMap. It must fit in a
	// ConfigMap: at most 1,048,576 bytes of UTF-8. It must also fit in etcd, where the bundle is
	// stored as JSON: at most 1,310,720 bytes once JSON-escaped, where <, >, &, U+2028, U+2029
	// and control characters other than tab, newline and carriage return take 6 bytes each, ",
	// \, tab, newline and carriage return 2. Required with target ConfigMap; empty with target
	// Secret.
	// +optional
	// +kubebuilder:validation:MaxLength=1048576
	// +kubebuilder:validation:XValidation:rule="size(bytes(self)) <= 1048576",message="message must fit in a ConfigMap: at most 1048576 bytes of UTF-8 (a ConfigMap holds at most 1 MiB of data)",reason=FieldValueInvalid
	Message string `json:"message"`

	// data holds more keys of the managed ConfigMap, published beside data.message. A key is a
	// valid ConfigMap key (at most 253 characters of letters, digits, '-', '_' and '.', not '.'
	// or '..' nor starting with '..') and is never "message"; at most 48 keys, each value at
	// most 32,768 bytes, and message and data together at most 1,048,576 bytes.
	// +optional
	// +kubebuilder:validation:MaxProperties=48
	// +kubebuilder:validation:XValidation:rule="!('message' in self)",message="data must not have the key message: spec.message is published as data.message",reason=FieldValueInvalid
	// +kubebuilder:validation:XValidation:rule=`self.all(k, size(k) <= 253 && k.matches('^[-._a-zA-Z0-9]+$') && k != '.' && !k.startsWith('..'))`,message="every data key must be a valid ConfigMap key: at most 253 characters of letters, digits, '-', '_' and '.', and neither '.' nor starting with '..'",reason=FieldValueInvalid
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(bytes(self[k])) <= 32768)",message="every data value must be at most 32768 bytes of UTF-8",reason=FieldValueInvalid
	Data map[string]DataValue `json:"data,omitempty"`

	// immutable makes the managed ConfigMap immutable and freezes this spec: once it is true,
	// no field of it can change. Defaults to false.
	// +optional
	// +kubebuilder:default=false
	Immutable bool `json:"immutable"`

	// driftPolicy says what the hub does when someone else changes or deletes the managed
	// ConfigMap: Heal (the default) heals it at once; Report never writes a ConfigMap that
	// drifted, nor recreates a deleted one, and reports the drift instead (Ready=False reason
	// Drifted, status.drift, a DriftDetected Event), while a change of this spec is still
	// published; Guard heals as Heal does and labels the ConfigMap configbundle.dev/guard, so
	// that the member refuses changes to it that do not come from the hub.
	// +optional
	// +kubebuilder:default=Heal
	DriftPolicy DriftPolicy `json:"driftPolicy,omitempty"`

	// takeOver says what the bundle does with a ConfigMap of its name that exists and that it
	// does not own: Never (the default) leaves it untouched (ConfigMapConflict); IfNoDiff takes
	// it over only if its data already equals the bundle's; Always takes it over and writes the
	// bundle's content. A ConfigMap that another object controls (its controller
	// ownerReference) is never taken over. A ConfigBundle whose takeOver is not Never is
	// admitted in a member only from a user who may update that ConfigMap (the member's
	// ValidatingAdmissionPolicy configbundle-hub-takeover, which the hub keeps).
	// +optional
	// +kubebuilder:default=Never
	TakeOver TakeOver `json:"takeOver,omitempty"`

	// target is what the bundle publishes: ConfigMap (the default, when absent), from its
	// message and data; or Secret, a Secret of the bundle's name (of type secretType, Opaque by
	// default), with the same create, update, heal, immutability, driftPolicy, takeOver and
	// deletion semantics. A bundle with target Secret holds no values (message and data are empty): its data is the hub snapshot
	// spec.hubSource names, which only the hub's placement of a FleetBundle sets.
	// +optional
	Target Target `json:"target,omitempty"`

	// hubSource, with target Secret, names the hub snapshot of a FleetBundle's secretRef
	// sources whose data the Secret holds. Set by the hub's placement, never by hand: the hub
	// checks it against the FleetBundle before it writes anything.
	// +optional
	HubSource *HubSource `json:"hubSource,omitempty"`

	// secretType, with target Secret, is the type of the Secret: Opaque (the default, when
	// empty), kubernetes.io/dockerconfigjson (a registry pull Secret: kubelet uses only this type
	// for imagePullSecrets), kubernetes.io/tls, kubernetes.io/basic-auth or
	// kubernetes.io/ssh-auth. The member's API server refuses a Secret without the keys its type
	// requires (.dockerconfigjson; tls.crt and tls.key; username or password; ssh-privatekey):
	// the bundle is then Ready=False, reason InvalidSecret, until its spec changes. A Secret's
	// type cannot change: a new type replaces the Secret.
	// +optional
	SecretType SecretType `json:"secretType,omitempty"`
}

// SecretType is the type of the Secret a ConfigBundle with target Secret publishes
// (spec.secretType).
// +kubebuilder:validation:Enum=Opaque;kubernetes.io/dockerconfigjson;kubernetes.io/tls;kubernetes.io/basic-auth;kubernetes.io/ssh-auth
type SecretType string

// Values of spec.secretType: the Secret types of the same names.
const (
	// SecretTypeOpaque (the default): arbitrary keys.
	SecretTypeOpaque SecretType = "Opaque"

	// SecretTypeDockerConfigJSON: a registry pull Secret, with the key .dockerconfigjson.
	SecretTypeDockerConfigJSON SecretType = "kubernetes.io/dockerconfigjson"

	// SecretTypeTLS: a TLS certificate and key, with the keys tls.crt and tls.key.
	SecretTypeTLS SecretType = "kubernetes.io/tls"

	// SecretTypeBasicAuth: credentials for basic authentication, with the key username or
	// password.
	SecretTypeBasicAuth SecretType = "kubernetes.io/basic-auth"

	// SecretTypeSSHAuth: credentials for SSH authentication, with the key ssh-privatekey.
	SecretTypeSSHAuth SecretType = "kubernetes.io/ssh-auth"
)

// InvalidSecretReason (Ready=False): as InvalidConfigMapReason, for the Secret of a bundle with
// target Secret: the member's API server rejected it as invalid, most often because its data
// lacks a key its spec.secretType requires. Nothing is retried until the bundle changes.
const InvalidSecretReason = "InvalidSecret"

// Target is what a ConfigBundle publishes in its member (spec.target).
// +kubebuilder:validation:Enum=ConfigMap;Secret
type Target string

// Values of spec.target.
const (
	// TargetConfigMap (the default): the bundle publishes a ConfigMap of its name, from its
	// message and data.
	TargetConfigMap Target = "ConfigMap"

	// TargetSecret: the bundle publishes a Secret of its name, of type spec.secretType (Opaque by
	// default), with the data of the hub snapshot its spec.hubSource names. The bundle itself
	// holds no value.
	TargetSecret Target = "Secret"
)

// HubSource names the hub snapshot of a FleetBundle's Secret sources that a placed
// ConfigBundle with target Secret publishes: the hub Secret "<name>-<revision>-sources" in
// namespace. The hub writes the member's Secret only if the FleetBundle namespace/name places
// exactly this bundle in this member and the snapshot's content has this hash.
type HubSource struct {
	// namespace of the FleetBundle on the hub.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`

	// name of the FleetBundle.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// revision of the FleetBundle whose snapshot is published.
	// +required
	// +kubebuilder:validation:Minimum=1
	Revision int64 `json:"revision"`

	// hash is the SHA-256 of the snapshot's content, in lowercase hex.
	// +required
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	Hash string `json:"hash"`
}

// SecretLabel, with the value "true", is on every Secret a ConfigBundle with target Secret
// publishes: the hub's cache of a member holds only Secrets so labelled.
const SecretLabel = "configbundle.dev/bundle-secret"

// SourceNotFoundReason (Ready=False): a bundle with target Secret has no spec.hubSource, or the
// hub cannot match it to a FleetBundle that places exactly this bundle in this member, with a
// snapshot of that hash. The hub writes no Secret. A bundle written by hand in a member always
// has this reason: only the hub's placement can make the hub copy a hub Secret.
const SourceNotFoundReason = "SourceNotFound"

// SecretConflictReason (Ready=False): as ConfigMapConflictReason, for a Secret of the bundle's
// name with target Secret.
const SecretConflictReason = "SecretConflict"

// TargetKind is spec.target, TargetConfigMap where it is not set.
func (s ConfigBundleSpec) TargetKind() Target {
	if s.Target == "" {
		return TargetConfigMap
	}
	return s.Target
}

// TypeOfSecret is spec.secretType, SecretTypeOpaque where it is not set.
func (s ConfigBundleSpec) TypeOfSecret() SecretType {
	if s.SecretType == "" {
		return SecretTypeOpaque
	}
	return s.SecretType
}

// TakeOverPolicy is spec.takeOver, TakeOverNever where it is not set.
func (s ConfigBundleSpec) TakeOverPolicy() TakeOver {
	if s.TakeOver == "" {
		return TakeOverNever
	}
	return s.TakeOver
}

// Equal reports whether two specs ask for the same ConfigMap or Secret: an empty and a missing
// data are equal, as are an empty target and ConfigMap, and an empty secretType and Opaque.
func (s ConfigBundleSpec) Equal(o ConfigBundleSpec) bool {
	return s.Message == o.Message && s.Immutable == o.Immutable && maps.Equal(s.Data, o.Data) &&
		s.TargetKind() == o.TargetKind() && ptr.Equal(s.HubSource, o.HubSource) && s.TypeOfSecret() == o.TypeOfSecret()
}

// ConfigMapReference identifies the ConfigMap a ConfigBundle manages.
type ConfigMapReference struct {
	// name of the ConfigMap, in the bundle's namespace. It is the bundle's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// uid of the ConfigMap. It changes when the ConfigMap is recreated.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=36
	UID types.UID `json:"uid"`

	// resourceVersion of the ConfigMap when the reconciler last saw it match the bundle. A
	// ConfigMap with another resourceVersion has been changed by someone else since.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// ConfigBundleStatus is the observed state of a ConfigBundle.
type ConfigBundleStatus struct {
	// observedGeneration is the metadata.generation of the bundle that was last reconciled.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// configMapRef identifies the managed ConfigMap, once it exists.
	// +optional
	ConfigMapRef *ConfigMapReference `json:"configMapRef,omitempty"`

	// secretRef identifies the managed Secret of a bundle with target Secret, once it exists.
	// +optional
	SecretRef *ConfigMapReference `json:"secretRef,omitempty"`

	// heals counts the times drift of the managed ConfigMap was corrected, a recreation of a
	// deleted ConfigMap included.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Heals int64 `json:"heals"`

	// lastHealTime is when drift was last corrected.
	// +optional
	LastHealTime *metav1.Time `json:"lastHealTime,omitempty"`

	// drift is, with driftPolicy Report, how the managed ConfigMap differs from the bundle and
	// who changed it, while it differs; absent when it matches, and with Heal or Guard. A deleted
	// ConfigMap is drift too (fields and changedBy "deleted"): Report does not recreate it;
	// switching to Heal or Guard does, or a change of the spec.
	// +optional
	Drift *DriftStatus `json:"drift,omitempty"`

	// conditions hold the Ready condition: whether the managed ConfigMap matches the bundle, and
	// if not, why (see the *Reason constants of this package).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ConfigBundle publishes a message as a ConfigMap of the same name in its namespace, and keeps
// that ConfigMap equal to it: created, updated, healed when it drifts, recreated when it is
// deleted, and garbage-collected with the bundle.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cb,categories=configbundle
// +kubebuilder:printcolumn:name="Immutable",type=boolean,JSONPath=`.spec.immutable`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Heals",type=integer,JSONPath=`.status.heals`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ConfigBundle struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the message to publish and whether it is immutable.
	// +required
	Spec ConfigBundleSpec `json:"spec"`

	// status is what the reconciler observed and did.
	// +optional
	Status ConfigBundleStatus `json:"status,omitempty"`
}

// ConfigBundleList is a list of ConfigBundles.
//
// +kubebuilder:object:root=true
type ConfigBundleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ConfigBundle `json:"items"`
}

func init() {
	register(&ConfigBundle{}, &ConfigBundleList{})
}
