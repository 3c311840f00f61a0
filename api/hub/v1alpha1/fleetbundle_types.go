package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

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

	// InvalidTemplateReason (False): with templateEngine GoTemplate, a templated field of
	// spec.template or spec.overrides does not parse, or uses an action a template may not use
	// (range, define, template, block); or an override's clusterSelector is invalid. The message
	// names the field and the error. Nothing is placed, removed or changed in any member until it
	// is fixed.
	InvalidTemplateReason = "InvalidTemplate"

	// NoClusterSetBindingReason (False): no ClusterSet is bound to the FleetBundle's namespace
	// (ClusterSetBinding), or none of those spec.clusterSets names is: the FleetBundle selects
	// no member and places nothing. Bind a set into the namespace (`kubectl apply` a
	// ClusterSetBinding, which needs create on clustersets/bind).
	NoClusterSetBindingReason = "NoClusterSetBinding"

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
	// name and spec.createNamespace is false; the hub places the bundle once one exists.
	NamespaceMissingReason = "NamespaceMissing"

	// NotJoinedReason: a MemberCluster is selected, but its member is not connected yet.
	NotJoinedReason = "NotJoined"

	// PlacementFailedReason: writing the placed ConfigBundle failed; the message says why.
	PlacementFailedReason = "PlacementFailed"

	// RenderFailedReason: the FleetBundle's bundle could not be rendered for this member (a
	// label its template reads is missing, a rendered label value is invalid, the output is too
	// large); the message names the field and the error. Nothing is written to the member, which
	// keeps what it holds; every other member proceeds. A change of the member's labels or of the
	// FleetBundle that fixes it places the bundle.
	RenderFailedReason = "RenderFailed"

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

	// FleetBundleRevisionAnnotation holds the number of the FleetBundle's revision a placed
	// ConfigBundle was written from ("1", "2", ...): the ControllerRevision
	// "<fleetbundle>-<revision>" in the FleetBundle's namespace holds its template.
	FleetBundleRevisionAnnotation = "hub.configbundle.dev/fleet-bundle-revision"

	// FleetBundleRenderHashAnnotation holds a hash of what a placed ConfigBundle was rendered to
	// for its member, when the FleetBundle renders per member (templateEngine GoTemplate, or
	// overrides). A placed bundle that differs from its rendering although it carries the hash
	// of its current rendering was changed by someone else: restoring it is a heal. One that
	// carries another hash is following a change of its member's labels: not a heal.
	FleetBundleRenderHashAnnotation = "hub.configbundle.dev/fleet-bundle-render-hash"

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

	// NamespaceCreatedEvent: with spec.createNamespace, the hub created the namespace of the
	// placed bundle in a member that lacked it; the message names the member and the namespace.
	NamespaceCreatedEvent = "NamespaceCreated"

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

// Condition types of a FleetBundle besides ReadyCondition, for kstatus (Flux health checks, kpt,
// cli-utils) and `kubectl wait`.
const (
	// ProgressingCondition is True while a rollout moves members to status.updateRevision
	// (reasons RollingOutReason, SoakingReason), False once it stopped (RolloutCompleteReason,
	// RolloutPausedReason, RolloutHaltedReason, RolledBackReason).
	ProgressingCondition = "Progressing"

	// StalledCondition is True while a rollout cannot proceed without someone acting (reasons
	// RolloutHaltedReason, RolledBackReason): kstatus reads the FleetBundle as Failed. It is
	// False (reason NotStalledReason) otherwise.
	StalledCondition = "Stalled"
)

// Reasons of the Progressing, Stalled and Ready conditions of a FleetBundle with a rollout.
const (
	// RollingOutReason (Progressing=True): members of the current stage are being updated.
	RollingOutReason = "RollingOut"

	// SoakingReason (Progressing=True): every Ready member of the current stage holds
	// updateRevision and its bundle is Ready; the stage soaks for its soakTime.
	SoakingReason = "Soaking"

	// RolloutCompleteReason (Progressing=False): the rollout of updateRevision completed:
	// currentRevision equals updateRevision.
	RolloutCompleteReason = "RolloutComplete"

	// RolloutPausedReason (Progressing=False): spec.rollout.paused is true: no member gets a new
	// revision.
	RolloutPausedReason = "RolloutPaused"

	// RolloutHaltedReason (Progressing=False, Stalled=True, Ready=False): more members failed
	// than spec.rollout.maxFailures tolerates, and onFailure is Halt (or there is no revision to
	// roll back to): no further member is updated. It is computed from facts: once the failures
	// clear, the rollout goes on by itself.
	RolloutHaltedReason = "RolloutHalted"

	// RolledBackReason (Progressing=False, Stalled=True, Ready=False): more members failed than
	// spec.rollout.maxFailures tolerates and onFailure is Rollback: every member got
	// currentRevision back, and status.rollout.failedRevision records the revision that failed;
	// no member gets it again until the template changes.
	RolledBackReason = "RolledBack"

	// NotStalledReason (Stalled=False): the rollout needs nobody to act.
	NotStalledReason = "NotStalled"

	// ProgressDeadlineExceededReason (a failedClusters entry): the member got updateRevision but
	// its bundle was not Ready within spec.rollout.progressDeadline.
	ProgressDeadlineExceededReason = "ProgressDeadlineExceeded"
)

// Events of a FleetBundle's rollout, each naming the revision and, where it applies, the members.
const (
	// StageStartedEvent: a stage of the rollout started.
	StageStartedEvent = "StageStarted"
	// StageCompletedEvent: every Ready member of a stage holds updateRevision, Ready, for the
	// stage's soakTime.
	StageCompletedEvent = "StageCompleted"
	// RolloutHaltedEvent (Warning): the rollout halted; the note names the failed members.
	RolloutHaltedEvent = "RolloutHalted"
	// RolledBackEvent (Warning): the rollout was rolled back; the note names the failed members.
	RolledBackEvent = "RolledBack"
	// RolloutCompleteEvent: currentRevision became updateRevision.
	RolloutCompleteEvent = "RolloutComplete"
)

// RolloutPhase says where a rollout stands.
// +kubebuilder:validation:Enum=Progressing;Soaking;Paused;Halted;RolledBack;Complete;AwaitingApproval;RemovalHeld
type RolloutPhase string

// Phases of a rollout.
const (
	// RolloutProgressing: members of the current stage are being updated.
	RolloutProgressing RolloutPhase = "Progressing"
	// RolloutSoaking: the current stage is done and soaks for its soakTime.
	RolloutSoaking RolloutPhase = "Soaking"
	// RolloutPaused: spec.rollout.paused is true.
	RolloutPaused RolloutPhase = "Paused"
	// RolloutHalted: too many members failed; no further member is updated.
	RolloutHalted RolloutPhase = "Halted"
	// RolloutRolledBack: too many members failed; every member got currentRevision back.
	RolloutRolledBack RolloutPhase = "RolledBack"
	// RolloutComplete: every stage is done; currentRevision equals updateRevision.
	RolloutComplete RolloutPhase = "Complete"
)

// Approvals of a rollout: a stage with requireApproval admits no member of a revision until
// spec.rollout.approvals holds an approval of that revision for that stage.
const (
	// RolloutAwaitingApproval: the current stage requires approval and updateRevision is not
	// approved for it; no member of the stage gets it.
	RolloutAwaitingApproval RolloutPhase = "AwaitingApproval"

	// AwaitingApprovalReason (Progressing=True, Ready=False): the rollout waits for an approval
	// of updateRevision for the current stage (`hub rollout approve NAME --stage STAGE`).
	// kstatus reads the FleetBundle as in progress, not failed.
	AwaitingApprovalReason = "AwaitingApproval"

	// AwaitingApprovalEvent (Normal): the rollout of a revision started waiting for an approval
	// for a stage; one per revision and stage.
	AwaitingApprovalEvent = "AwaitingApproval"

	// RolloutApprovedEvent (Normal): a revision passed the approval gate of a stage; the note
	// names the stage and who approved it.
	RolloutApprovedEvent = "RolloutApproved"

	// MaxApprovals is the most entries of spec.rollout.approvals.
	MaxApprovals = 64

	// ApprovalPolicyName names the ValidatingAdmissionPolicy (and its binding) that makes
	// approvals unforgeable (config/default, the Helm chart): an added approval's approvedBy must
	// be the username of who adds it, who needs ApproveVerb on fleetbundles; an approval cannot
	// be changed, nor removed while it is of status.updateRevision and names a stage of
	// spec.rollout.stages.
	ApprovalPolicyName = HubName + "-approval"

	// ApproveVerb is the verb on fleetbundles that adding an approval needs, checked by the
	// authorizer in ApprovalPolicyName; RolloutApproverRole grants it, FleetBundleEditorRole does
	// not.
	ApproveVerb = "approve"

	// RolloutApproverRole is the ClusterRole that may approve the rollouts of the FleetBundles
	// in the namespace of a RoleBinding to it (`hub rollout approve`).
	RolloutApproverRole = HubName + "-rollout-approver"
)

// OnFailure is what a rollout does when more members failed than maxFailures tolerates.
// +kubebuilder:validation:Enum=Halt;Rollback
type OnFailure string

const (
	// OnFailureHalt updates no further member; the updated ones keep updateRevision.
	OnFailureHalt OnFailure = "Halt"
	// OnFailureRollback gives every member holding updateRevision currentRevision back.
	OnFailureRollback OnFailure = "Rollback"
)

// DefaultStageName names the implicit last stage: the selected members that no stage selects.
const DefaultStageName = "default"

// Defaults of a FleetBundle's rollout fields, applied by the hub where a field is absent.
const (
	// DefaultRevisionHistoryLimit is the default of spec.revisionHistoryLimit.
	DefaultRevisionHistoryLimit = 10
	// DefaultMaxConcurrency is the default of a stage's maxConcurrency: every member of the
	// stage at once.
	DefaultMaxConcurrency = "100%"
	// DefaultProgressDeadline is the default of spec.rollout.progressDeadline.
	DefaultProgressDeadline = 5 * time.Minute
)

// Bounds of a FleetBundle's revisions: what its history may cost the hub, whoever writes it.
const (
	// MaxRevisionHistoryLimit is the most spec.revisionHistoryLimit admits.
	MaxRevisionHistoryLimit = 20

	// MaxRevisionHistoryBytes bounds the stored definitions (the .data of its ControllerRevisions)
	// of one FleetBundle's revisions: beyond it, revisions not in use are pruned, the oldest
	// first, even within revisionHistoryLimit. Revisions in use (currentRevision,
	// updateRevision, failedRevision and status.heldRevisions) are never pruned.
	MaxRevisionHistoryBytes = 8 << 20

	// MaxHeldRevisions is the most entries of a FleetBundle's status.heldRevisions.
	MaxHeldRevisions = 32

	// RevisionMissingReason (a failedClusters entry): the member holds a revision of the
	// FleetBundle whose ControllerRevision is gone (deleted by hand), so nothing says what it
	// should hold: it is not healed, and counted failed until it gets another revision (a resume,
	// a rollout, or a change of the template).
	RevisionMissingReason = "RevisionMissing"
)

// MaxFailedClusters is the most entries of a FleetBundle's status.failedClusters; the total is
// status.clusters.failed.
const MaxFailedClusters = 10

// TemplateEngine says how a FleetBundle's template is rendered for each member.
// +kubebuilder:validation:Enum=None;GoTemplate
type TemplateEngine string

const (
	// TemplateEngineNone: the template is used as written; "{{" is placed literally.
	TemplateEngineNone TemplateEngine = "None"

	// TemplateEngineGoTemplate: the message, every data value and every label and annotation
	// value of the template (after overrides) is a Go text/template rendered for each member with
	// .Cluster.Name (its MemberCluster's name) and .Cluster.Labels (its MemberCluster's labels),
	// with missingkey=error. range, define, template and block are refused, only text/template's
	// built-in functions exist, and the output of each value is bounded.
	TemplateEngineGoTemplate TemplateEngine = "GoTemplate"
)

// MaxOverrides is the most entries of a FleetBundle's spec.overrides.
const MaxOverrides = 20

// TemplateOverride changes the template for the members its selector selects.
type TemplateOverride struct {
	// name identifies the override: a DNS label (at most 63 lowercase letters, digits and '-'),
	// unique among the FleetBundle's overrides.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// clusterSelector selects, by their labels, the MemberClusters the override applies to: an
	// empty selector ({}) selects every member.
	// +required
	ClusterSelector metav1.LabelSelector `json:"clusterSelector"`

	// message replaces spec.template.spec.message in the members selected.
	// +optional
	// +kubebuilder:validation:MaxLength=1048576
	Message *string `json:"message,omitempty"`

	// data is merged over spec.template.spec.data: its keys are set, the others kept.
	// +optional
	// +kubebuilder:validation:MaxProperties=48
	// +kubebuilder:validation:XValidation:rule="!('message' in self)",message="data must not have the key message: spec.message is published as data.message",reason=FieldValueInvalid
	// +kubebuilder:validation:XValidation:rule=`self.all(k, size(k) <= 253 && k.matches('^[-._a-zA-Z0-9]+$') && k != '.' && !k.startsWith('..'))`,message="every data key must be a valid ConfigMap key: at most 253 characters of letters, digits, '-', '_' and '.', and neither '.' nor starting with '..'",reason=FieldValueInvalid
	Data map[string]configbundlev1alpha1.DataValue `json:"data,omitempty"`

	// labels are merged over spec.template.metadata.labels.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are merged over spec.template.metadata.annotations.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Annotations map[string]string `json:"annotations,omitempty"`
}

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

// FleetBundleSpec says what to place and where. A template with target Secret takes its data
// only from secretRef sources, and one with target ConfigMap never from a secretRef.
// +kubebuilder:validation:XValidation:rule="!has(self.dataFrom) || has(self.template.spec.target) && self.template.spec.target == 'Secret' || self.dataFrom.all(s, !has(s.secretRef))",message="dataFrom: secretRef is not allowed in a FleetBundle that places a ConfigMap: a Secret's data never lands in a ConfigMap; set spec.template.spec.target: Secret to place a Secret",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.dataFrom) || !has(self.template.spec.target) || self.template.spec.target != 'Secret' || self.dataFrom.all(s, has(s.secretRef))",message="dataFrom: a FleetBundle that places a Secret (spec.template.spec.target: Secret) takes its data only from secretRef sources: configMapRef is not allowed",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.target) || self.template.spec.target != 'Secret' || has(self.dataFrom)",message="dataFrom is required in a FleetBundle that places a Secret (spec.template.spec.target: Secret): the Secret's data comes only from secretRef sources",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.overrides) || !has(self.template.spec.target) || self.template.spec.target != 'Secret' || self.overrides.all(o, !has(o.message) && !has(o.data))",message="overrides: a FleetBundle that places a Secret (spec.template.spec.target: Secret) holds no values: its overrides set no message or data; the Secret's data comes only from secretRef sources",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.template.spec.immutable) || !oldSelf.template.spec.immutable || (has(self.overrides) == has(oldSelf.overrides) && (!has(self.overrides) || (self.overrides == oldSelf.overrides && self.overrides.map(o, o.name) == oldSelf.overrides.map(o, o.name))) && has(self.templateEngine) == has(oldSelf.templateEngine) && (!has(self.templateEngine) || self.templateEngine == oldSelf.templateEngine))",message="overrides and templateEngine are immutable: the template was made immutable (spec.template.spec.immutable: true), which freezes what members get; delete and recreate the FleetBundle to change them",reason=FieldValueForbidden
type FleetBundleSpec struct {
	// clusterSelector selects MemberClusters by their labels, with Kubernetes semantics: an
	// empty selector ({}) selects every member, an absent one selects none. It selects only
	// among the members of the ClusterSets bound to the FleetBundle's namespace
	// (ClusterSetBinding).
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`

	// clusterSets narrows the members the FleetBundle selects among to those of the named
	// ClusterSets, of the sets bound to its namespace; a named set that is not bound adds no
	// member. Absent: every set bound to the namespace.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	ClusterSets []string `json:"clusterSets,omitempty"`

	// template is the ConfigBundle each selected member gets, named like the FleetBundle, in
	// the namespace of the same name as the FleetBundle's. Every distinct definition (template,
	// templateEngine and overrides) is a revision, kept as a ControllerRevision
	// "<fleetbundle>-<revision>".
	// +required
	Template ConfigBundleTemplate `json:"template"`

	// templateEngine says how the template is rendered for each member: None (the default) uses
	// it as written; GoTemplate renders the message, every data value and every label and
	// annotation value (after overrides) as a Go text/template with .Cluster.Name and
	// .Cluster.Labels of the member's MemberCluster. Keys are never templated.
	// +optional
	// +kubebuilder:default=None
	TemplateEngine TemplateEngine `json:"templateEngine,omitempty"`

	// overrides change the template for the members they select, in order: each override whose
	// clusterSelector selects a member's MemberCluster replaces the message and merges its data,
	// labels and annotations over the template's, a later override winning over an earlier one.
	// At most 20.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=20
	Overrides []TemplateOverride `json:"overrides,omitempty"`

	// revisionHistoryLimit is how many revisions are kept besides those in use (currentRevision,
	// updateRevision, failedRevision and status.heldRevisions); the oldest go first. At most 20
	// (MaxRevisionHistoryLimit); whatever the limit, revisions not in use are pruned beyond 8 MiB
	// of stored definitions (MaxRevisionHistoryBytes). Defaults to 10.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// rollout stages a change of the template: stage by stage, each soaking before the next,
	// halting or rolling back when too many members fail. Without it a change goes to every
	// selected member at once.
	// +optional
	Rollout *RolloutStrategy `json:"rollout,omitempty"`

	// dataFrom lists hub objects of the FleetBundle's own namespace whose data the placed
	// bundles carry: merged in order, then spec.template.spec.data on top. Only objects
	// labelled SourceLabel ("hub.configbundle.dev/source": "true") are read. A key that two
	// entries (or an entry and the template) both define is an error (InvalidTemplate) unless
	// the later entry sets prefix. A change of what the sources resolve to is a new revision,
	// rolled out by spec.rollout; the revision keeps a copy of it. At most 16
	// (MaxDataFromSources).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	DataFrom []DataFromSource `json:"dataFrom,omitempty"`

	// dataFromRevision is set by `hub rollout undo`: while the sources resolve to what they held
	// when it was set (sourcesHash), or cannot be read, the placed bundles carry the copy of the
	// sources that revision keeps, not the sources themselves. Once a source changes, it no
	// longer applies. Remove it to follow the sources again at once.
	// +optional
	DataFromRevision *DataFromRevision `json:"dataFromRevision,omitempty"`

	// createNamespace makes the hub create the namespace of the placed bundle (the
	// FleetBundle's namespace's name) in a selected member that lacks it, labelled
	// app.kubernetes.io/managed-by: configbundle-hub (ManagedByLabel, FieldOwner). The hub never
	// deletes a namespace, not one it created either: it stays when the bundle is removed.
	// Creating one needs create on namespaces in the member, which `hub register` grants; a
	// member that refuses it is reported (PlacementFailed) and registering it again restores
	// the right. Defaults to false: a member without the namespace is reported
	// (NamespaceMissing) until someone creates it.
	// +optional
	CreateNamespace bool `json:"createNamespace,omitempty"`

	// Removals.

	// deletionPolicy says what becomes of a member's ConfigMap when the FleetBundle is deleted or
	// stops selecting the member: Delete (the default) deletes the placed ConfigBundle and its
	// ConfigMap with it; Orphan deletes the placed ConfigBundle with the Orphan propagation
	// policy and leaves the ConfigMap in the member with its content, without the hub's labels,
	// annotations and ownerReference (Event Orphaned).
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// RolloutStrategy says how a new revision reaches the selected members.
// +kubebuilder:validation:XValidation:rule="!has(self.stages) || self.stages.all(s, self.stages.exists_one(t, t.name == s.name))",message="stage names must be unique"
// +kubebuilder:validation:XValidation:rule="!has(self.approvals) || self.approvals.all(a, self.stages.exists(s, s.name == a.stage))",message="every approval's stage must be one of spec.rollout.stages",reason=FieldValueInvalid
type RolloutStrategy struct {
	// stages are rolled out in order. A member belongs to the first stage whose selector selects
	// its MemberCluster; the selected members no stage selects form a last, implicit stage named
	// "default".
	// A rollout without stages has only the implicit one: a new revision goes to every selected
	// member at once, and maxRemovals still applies.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	Stages []RolloutStage `json:"stages,omitempty"`

	// maxFailures is how many failed members are tolerated, as a number or as "N%" of the
	// selected members (rounded down). A failed member holds updateRevision and its bundle is
	// Ready=False, or was not Ready progressDeadline after it was updated. Defaults to 0.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="maxFailures must be an integer >= 0 or a percentage from 0% to 100%"
	MaxFailures *intstr.IntOrString `json:"maxFailures,omitempty"`

	// progressDeadline is how long an updated member may take to be Ready before it counts as
	// failed. Defaults to 5m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="progressDeadline must be between 1s and 24h"
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`

	// onFailure is what happens when more members failed than maxFailures tolerates: Halt (no
	// further member is updated) or Rollback (every member holding updateRevision gets
	// currentRevision back). Defaults to Halt.
	// +optional
	OnFailure OnFailure `json:"onFailure,omitempty"`

	// paused, when true, gives no member a new revision; members keep what they hold, enforced
	// and healed as before.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// approvals record who approved which revision for which stage with requireApproval: added
	// by `hub rollout approve`, each with the username of who added it. An approval is for one
	// revision: a new template or source starts unapproved. The ValidatingAdmissionPolicy
	// configbundle-hub-approval refuses an approval whose approvedBy is not its author's
	// username, or whose author may not approve (the verb approve on fleetbundles), and any
	// change of an approval; one may be removed once its revision is no longer updateRevision, or
	// together with its stage. At most 64 (MaxApprovals): `hub rollout approve` drops those of
	// the oldest revisions to make room.
	// +optional
	// +listType=map
	// +listMapKey=revision
	// +listMapKey=stage
	// +kubebuilder:validation:MaxItems=64
	Approvals []RolloutApproval `json:"approvals,omitempty"`

	// skipPausedStages, when true, lets the rollout pass a stage whose members are all paused
	// (MemberCluster spec.paused); they get the revision at once when they are resumed, if the
	// rollout has not been rolled back. By default such a stage holds the rollout, Progressing,
	// until one of its members is resumed: a stage is passed only by members that took the
	// revision. A stage with members that are not paused never waits for its paused ones.
	// +optional
	SkipPausedStages bool `json:"skipPausedStages,omitempty"`

	// Removals.

	// maxRemovals is the most members one change may remove the bundle from, as a number or as
	// "N%" of the members that hold it (rounded down): a change of the FleetBundle's spec, of
	// member labels, of a ClusterSet or of a ClusterSetBinding that would remove it from more
	// members removes it from none (phase RemovalHeld, Ready=False reason RemovalHeld) until the
	// change is reverted or the held removals are approved (removalApprovals, `hub rollout
	// approve NAME --removals`). Absent: no limit. It applies with or without stages.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="maxRemovals must be an integer >= 0 or a percentage from 0% to 100%"
	MaxRemovals *intstr.IntOrString `json:"maxRemovals,omitempty"`

	// removalApprovals approve held removals: an entry whose removalSet is the
	// status.rollout.removals.removalSet of a hold lets those removals proceed. `hub rollout
	// approve NAME --removals` adds one with the caller's username. At most 16
	// (MaxRemovalApprovals); older entries may be dropped.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	RemovalApprovals []RemovalApproval `json:"removalApprovals,omitempty"`

	// workloads says whether the rollout judges a member by the workloads that read its bundle
	// (its consumers: the Deployments, StatefulSets and DaemonSets of the bundle's namespace
	// whose pod template reads its ConfigMap): Ignore (the bundle being Ready is enough),
	// Observe (every consumer must also be available, and stay so through the stage's soak) or
	// Restart (as Observe, once the hub restarted every consumer for the revision the member
	// holds). Defaults to Ignore.
	// +optional
	Workloads WorkloadPolicy `json:"workloads,omitempty"`

	// workloadTimeout is how long the consumers of a member may take to be available after the
	// member got a revision before the member fails it (reason WorkloadUnhealthy). Defaults to
	// 5m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('24h')",message="workloadTimeout must be greater than 0s and at most 24h"
	WorkloadTimeout *metav1.Duration `json:"workloadTimeout,omitempty"`
}

// RolloutStage is one stage of a rollout.
type RolloutStage struct {
	// name names the stage in status and Events: a DNS label, not "default" (the implicit last
	// stage).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self != 'default'",message="the stage name default is reserved for the implicit last stage"
	Name string `json:"name"`

	// clusterSelector selects the stage's members among the FleetBundle's selected members, by
	// their MemberCluster's labels: {} selects every one left, an absent selector none.
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`

	// maxConcurrency is how many of the stage's members may be updated and not yet Ready at
	// once: a number, or "N%" of the stage's members (rounded down, at least 1). Defaults to
	// "100%".
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^(100|[1-9][0-9]?)%$')",message="maxConcurrency must be an integer >= 1 or a percentage from 1% to 100%"
	MaxConcurrency *intstr.IntOrString `json:"maxConcurrency,omitempty"`

	// soakTime is how long every Ready member of the stage must hold updateRevision, Ready,
	// before the next stage starts. Defaults to 0s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="soakTime must be between 0s and 24h"
	SoakTime *metav1.Duration `json:"soakTime,omitempty"`

	// requireApproval, when true, holds each revision at the start of the stage until
	// spec.rollout.approvals approves it for the stage (`hub rollout approve NAME --stage
	// STAGE`): meanwhile no member of the stage gets it, and the rollout is AwaitingApproval.
	// A stage without members is passed unapproved.
	// +optional
	RequireApproval bool `json:"requireApproval,omitempty"`
}

// RolloutApproval approves one revision for one stage of a rollout.
type RolloutApproval struct {
	// revision is the number of the revision approved (status.updateRevision when it was
	// approved).
	// +required
	// +kubebuilder:validation:Minimum=1
	Revision int64 `json:"revision"`

	// stage is the name of the stage, one of spec.rollout.stages, the revision is approved for.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Stage string `json:"stage"`

	// approvedBy is the username of who approved it, as the API server authenticated them.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ApprovedBy string `json:"approvedBy"`
}

// PlacementCounts counts the members a FleetBundle selects, by how far its bundle got there.
type PlacementCounts struct {
	// selected is the number of MemberClusters the selector selects, among the members of the
	// ClusterSets bound to the FleetBundle's namespace; paused members included.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Selected int32 `json:"selected"`

	// paused is the number of selected members paused for maintenance (MemberCluster
	// spec.paused): they keep what they hold, are counted apart, never as failed, ready, applied
	// or updated, and a staged rollout does not wait for them.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Paused int32 `json:"paused"`

	// applied is the number of selected members that hold the bundle as the template says.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Applied int32 `json:"applied"`

	// ready is the number of selected members where the bundle is Ready, as the rollout wants it
	// there.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Ready int32 `json:"ready"`

	// updated is the number of selected members that hold status.updateRevision.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Updated int32 `json:"updated"`

	// failed is the number of selected members where placement or the bundle failed, or that
	// are not Ready; the first MaxFailedClusters are in status.failedClusters.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Failed int32 `json:"failed"`

	// drifted is the number of the failed members where the bundle is Ready=False with reason
	// Drifted (driftPolicy Report: its ConfigMap differs, and the hub leaves it so); the first
	// MaxFailedClusters are in status.driftedClusters.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Drifted int32 `json:"drifted"`
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

	// driftedClusters are the first MaxFailedClusters (10) of them whose bundle drifted, sorted.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=253
	DriftedClusters []string `json:"driftedClusters,omitempty"`

	// heals is how many times this replica restored a placed ConfigBundle.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Heals int64 `json:"heals"`

	// heldRevisions are the revisions the replica's members hold, as heldRevisions of the
	// FleetBundle's status: the elected replica records them all there.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Minimum=1
	HeldRevisions []int64 `json:"heldRevisions,omitempty"`

	// holding is the number of the replica's connected members that hold the bundle: a
	// FleetBundle being deleted keeps its finalizer until every live replica reports 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Holding int32 `json:"holding"`

	// rollout counts the replica's members for the rollout of updateRevision, with
	// spec.rollout: the elected replica decides where the rollout stands from the sum of the
	// live replicas' counts.
	// +optional
	Rollout *ReplicaRolloutStatus `json:"rollout,omitempty"`
}

// ReplicaRolloutStatus counts one replica's members for the rollout of one revision, from the
// stage and admittedThrough the FleetBundle's status.rollout said when it counted.
type ReplicaRolloutStatus struct {
	// updateRevision is the revision counted.
	// +required
	// +kubebuilder:validation:Minimum=0
	UpdateRevision int64 `json:"updateRevision"`

	// stage is the stage status.rollout named.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Stage string `json:"stage,omitempty"`

	// admittedThrough is the admittedThrough status.rollout named.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	AdmittedThrough string `json:"admittedThrough,omitempty"`

	// stages count the replica's Ready members of each stage, in the order of the stages (the
	// implicit last stage last).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=11
	Stages []StageTally `json:"stages,omitempty"`

	// failed counts the replica's members that failed updateRevision.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Failed int32 `json:"failed"`

	// failedClusters are the first MaxFailedClusters (10) of them, sorted by name.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=10
	FailedClusters []ClusterFailure `json:"failedClusters,omitempty"`
}

// StageTally counts the Ready members of one stage for the rollout of a revision.
type StageTally struct {
	// done counts those that hold the revision, Ready, or failed it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Done int32 `json:"done"`

	// inFlight counts those updated, or admitted to be, and not yet Ready.
	// +optional
	// +kubebuilder:validation:Minimum=0
	InFlight int32 `json:"inFlight"`
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

	// driftedClusters names the first MaxFailedClusters (10) members where the bundle drifted
	// (Ready=False reason Drifted, driftPolicy Report), sorted; clusters.drifted counts them all.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=253
	DriftedClusters []string `json:"driftedClusters,omitempty"`

	// heals is how many times the hub restored a placed ConfigBundle that someone edited or
	// deleted in a member.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Heals int64 `json:"heals"`

	// currentRevision is the last revision whose rollout completed: what members not yet
	// updated keep, enforced and healed as before. 0 before the first completes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	CurrentRevision int64 `json:"currentRevision,omitempty"`

	// updateRevision is the revision of spec.template. It equals currentRevision once its
	// rollout completed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	UpdateRevision int64 `json:"updateRevision,omitempty"`

	// rollout is where the rollout of updateRevision stands, with spec.rollout.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`

	// observedRevision is the highest revision number the hub issued for the FleetBundle. A new
	// definition gets the next number, so no number is used twice in the FleetBundle's lifetime,
	// even once the revision it named was pruned. 0 before the first revision.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedRevision int64 `json:"observedRevision,omitempty"`

	// heldRevisions are the revisions the members hold, sorted: none of them is pruned. A member
	// that cannot be seen (unreachable, or paused and not connected) counts with the revision it
	// was last seen holding until it is seen again, or leaves the selection without being paused;
	// one not seen since the hub started (or since its replica took it over) counts with every
	// revision recorded here then. At most 32 (MaxHeldRevisions), the highest.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Minimum=1
	HeldRevisions []int64 `json:"heldRevisions,omitempty"`

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
	// there (AllReady), or when none is selected (NoClustersSelected); with spec.rollout,
	// Progressing and Stalled too.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MaxPassedWhilePaused is the most names status.rollout.passedWhilePaused holds.
const MaxPassedWhilePaused = 100

// RolloutStatus is where the rollout of a FleetBundle's updateRevision stands.
type RolloutStatus struct {
	// stage is the current stage's name ("default" for the implicit last stage). Once the
	// rollout is Complete, the last stage: "default" if it has members, else the last one named.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Stage string `json:"stage,omitempty"`

	// phase is Progressing, Soaking, Paused, Halted, RolledBack, Complete, AwaitingApproval while
	// a stage waits for an approval, or RemovalHeld while removals are held
	// (status.rollout.removals).
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`

	// failedRevision is the last revision rolled back (onFailure: Rollback): no member gets it
	// again until the template changes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	FailedRevision int64 `json:"failedRevision,omitempty"`

	// stageStartTime is when the current stage started.
	// +optional
	StageStartTime *metav1.Time `json:"stageStartTime,omitempty"`

	// soakStartTime is when every Ready member of the current stage was first seen holding
	// updateRevision, Ready, since when it stayed so: the stage's soak started then (to the
	// microsecond, so that a soak lasts its whole soakTime).
	// +optional
	SoakStartTime *metav1.MicroTime `json:"soakStartTime,omitempty"`

	// admittedThrough is the name of the last member of the current stage, in name order, that
	// may get updateRevision: the hub moves it on as updated members become Ready, keeping at
	// most the stage's maxConcurrency updated and not yet Ready.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	AdmittedThrough string `json:"admittedThrough,omitempty"`

	// passedWhilePaused names the members of the current stage that admittedThrough passed while
	// they were paused: resumed, each gets updateRevision only once the hub admits it again,
	// within maxConcurrency. When it holds MaxPassedWhilePaused names, admittedThrough stops at
	// the next paused member until one is resumed.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=253
	PassedWhilePaused []string `json:"passedWhilePaused,omitempty"`

	// workloads are, for the first MaxWorkloadMembers members of the current stage (sorted by
	// name) that hold updateRevision, the consumers of their bundle and where each stands; only
	// with spec.rollout.workloads Observe or Restart.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=10
	Workloads []MemberWorkloads `json:"workloads,omitempty"`

	// message says what the rollout waits for or why it stopped, naming members.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// removals is where the removal of the bundle from members that hold it and are no longer
	// selected stands; absent when there is none.
	// +optional
	Removals *RemovalStatus `json:"removals,omitempty"`
}

// FleetBundle defines a ConfigBundle once, on the hub, and places it in every member cluster its
// selector selects: each gets a ConfigBundle named like the FleetBundle in the namespace of the
// same name, which the member's reconciler then enforces.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fb,categories=configbundle
// +kubebuilder:printcolumn:name="Selected",type=integer,JSONPath=`.status.clusters.selected`
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.clusters.updated`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.clusters.ready`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.clusters.failed`
// +kubebuilder:printcolumn:name="Drifted",type=integer,JSONPath=`.status.clusters.drifted`,priority=1
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.updateRevision`
// +kubebuilder:printcolumn:name="Stage",type=string,JSONPath=`.status.rollout.stage`
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
