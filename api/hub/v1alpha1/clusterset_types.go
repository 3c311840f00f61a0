package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The tenancy model of placement, as Open Cluster Management draws it: a ClusterSet names a
// group of members by their labels; a ClusterSetBinding in a namespace lets the FleetBundles of
// that namespace place into the members of that set. Binding a set needs the permission `create`
// on the subresource clustersets/bind of that set (ClusterSetBindPermission), which the
// ValidatingAdmissionPolicy ClusterSetBindPolicyName enforces: a tenant who may create
// FleetBundles and ClusterSetBindings in its namespace reaches only the sets an administrator let
// it bind.

// ClusterSetBindPolicyName names the ValidatingAdmissionPolicy (and its binding) that refuses a
// ClusterSetBinding whose author may not bind its set (config/default, the Helm chart).
const ClusterSetBindPolicyName = HubName + "-clusterset-bind"

// ClusterSetBindPermission is the permission binding a ClusterSet into a namespace needs: the
// verb create on the subresource bind of clustersets, for that set's name.
const ClusterSetBindPermission = "clustersets/bind"

// ClusterSetBindSubresource is the subresource of clustersets that ClusterSetBindPermission
// names; ClusterSetBindVerb its verb.
const (
	ClusterSetBindSubresource = "bind"
	ClusterSetBindVerb        = "create"
)

// Roles shipped with the hub (config/rbac/hub, the Helm chart) for the tenancy model.
const (
	// FleetBundleEditorRole is the ClusterRole that lets its subjects manage FleetBundles and
	// ClusterSetBindings in the namespace of a RoleBinding to it; it is aggregated to the
	// ClusterRoles edit and admin. A binding still needs ClusterSetBindPermission.
	FleetBundleEditorRole = HubName + "-fleetbundle-editor"

	// ClusterSetAdminRole is the ClusterRole of a fleet administrator: ClusterSets,
	// ClusterSetBindings, MemberCluster labels (and spec.paused), and ClusterSetBindPermission
	// for every set.
	ClusterSetAdminRole = HubName + "-clusterset-admin"

	// FleetReaderRole is the ClusterRole that may get the Fleet "default" (its heartbeat, which
	// hub status checks), bound by a ClusterRoleBinding of the same name to every authenticated
	// user: a tenant gates on its FleetBundles with it.
	FleetReaderRole = HubName + "-fleet-reader"
)

// Reasons of a ClusterSet's Ready condition.
const (
	// ClusterSetSelectingReason (True): the set's clusterSelector is valid; status.clusters says
	// how many members it selects (0 is no error: members may join later).
	ClusterSetSelectingReason = "Selecting"

	// InvalidSelectorReason (False), shared with the FleetBundle: the set's clusterSelector is
	// not a valid label selector; the set selects no member until it is fixed.
)

// Reasons of a ClusterSetBinding's Ready condition.
const (
	// ClusterSetBoundReason (True): the set exists; the FleetBundles of the binding's namespace
	// may place into its members.
	ClusterSetBoundReason = "Bound"

	// ClusterSetNotFoundReason (False): no ClusterSet of the binding's name exists; the binding
	// adds no member until one is created.
	ClusterSetNotFoundReason = "ClusterSetNotFound"
)

// ClusterSetSpec selects the members of a set.
type ClusterSetSpec struct {
	// clusterSelector selects MemberClusters by their labels, with Kubernetes semantics: an empty
	// selector ({}) selects every member.
	// +required
	ClusterSelector metav1.LabelSelector `json:"clusterSelector"`
}

// ClusterSetStatus says what a ClusterSet selects.
type ClusterSetStatus struct {
	// conditions hold Ready: whether the set's selector is valid (reasons Selecting,
	// InvalidSelector).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// clusters is how many MemberClusters the set selects.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Clusters int32 `json:"clusters"`

	// observedGeneration is the generation of the set this status was computed for.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// inUse names the FleetBundles ("namespace/name", sorted) that place through the set: those
	// of the namespaces that bind it, whose spec.clusterSets is absent or names it. Deleting the
	// set or its bindings removes their bundles from its members. The first MaxInUse.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=317
	InUse []string `json:"inUse,omitempty"`
}

// ClusterSet is a group of members, selected by their MemberCluster labels, that FleetBundles of
// the namespaces it is bound to (ClusterSetBinding) may place into. A set is bound into a
// namespace only by whoever may create clustersets/bind of it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=clset,categories=configbundle
// +kubebuilder:printcolumn:name="Clusters",type=integer,JSONPath=`.status.clusters`
// +kubebuilder:printcolumn:name="InUse",type=string,JSONPath=`.status.inUse`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec selects the set's members.
	// +required
	Spec ClusterSetSpec `json:"spec"`

	// status says what the set selects.
	// +optional
	Status ClusterSetStatus `json:"status,omitempty"`
}

// ClusterSetList is a list of ClusterSets.
//
// +kubebuilder:object:root=true
type ClusterSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterSet `json:"items"`
}

// ClusterSetBindingSpec names the set a binding binds.
type ClusterSetBindingSpec struct {
	// clusterSet is the name of the ClusterSet bound into the binding's namespace; it must equal
	// the binding's name, so that a namespace binds a set once.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ClusterSet string `json:"clusterSet"`
}

// ClusterSetBindingStatus says whether the bound set exists, and which members it selects.
type ClusterSetBindingStatus struct {
	// conditions hold Ready: whether the bound ClusterSet exists (reasons Bound,
	// ClusterSetNotFound).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation of the binding this status was computed for.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// The members of the bound set, for the namespace's tenants.

	// clusters are the MemberClusters the bound set selects, sorted by name: their names and
	// labels, which the namespace's tenants may read here (with the FleetBundle editor role) to
	// know what their FleetBundles may select, without reading MemberClusters themselves. Nothing
	// else of a member is copied: no credentials, no address. The first MaxBoundClusters; empty
	// while the set does not exist or its selector is invalid.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1000
	Clusters []BoundCluster `json:"clusters,omitempty"`

	// clusterCount is how many MemberClusters the bound set selects, listed in clusters or not.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ClusterCount int32 `json:"clusterCount,omitempty"`

	// inUse names the FleetBundles of the binding's namespace (sorted) that place through it:
	// those whose spec.clusterSets is absent or names the set. Deleting the binding removes their
	// bundles from the set's members (unless another bound set selects them). The first
	// MaxInUse.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=253
	InUse []string `json:"inUse,omitempty"`
}

// MaxInUse is the most FleetBundles the status.inUse of a ClusterSet or ClusterSetBinding names.
const MaxInUse = 100

// MaxBoundClusters is the most members a ClusterSetBinding's status.clusters lists.
const MaxBoundClusters = 1000

// BoundCluster is a member of a bound set, as its tenants see it: a name and labels.
type BoundCluster struct {
	// name is the MemberCluster's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// labels are the MemberCluster's labels, which FleetBundle selectors and templates read.
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	Labels map[string]string `json:"labels,omitempty"`
}

// ClusterSetBinding lets the FleetBundles of its namespace place into the members of one
// ClusterSet, the one it is named after. Creating one needs `create` on clustersets/bind of that
// set (the ValidatingAdmissionPolicy configbundle-hub-clusterset-bind).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=clsb,categories=configbundle
// +kubebuilder:validation:XValidation:rule="self.metadata.name == self.spec.clusterSet",message="a ClusterSetBinding is named after the set it binds: metadata.name must equal spec.clusterSet",reason=FieldValueInvalid
// +kubebuilder:printcolumn:name="ClusterSet",type=string,JSONPath=`.spec.clusterSet`
// +kubebuilder:printcolumn:name="Clusters",type=integer,JSONPath=`.status.clusterCount`
// +kubebuilder:printcolumn:name="InUse",type=string,JSONPath=`.status.inUse`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterSetBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the bound set.
	// +required
	Spec ClusterSetBindingSpec `json:"spec"`

	// status says whether the bound set exists.
	// +optional
	Status ClusterSetBindingStatus `json:"status,omitempty"`
}

// ClusterSetBindingList is a list of ClusterSetBindings.
//
// +kubebuilder:object:root=true
type ClusterSetBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterSetBinding `json:"items"`
}

func init() {
	register(&ClusterSet{}, &ClusterSetList{}, &ClusterSetBinding{}, &ClusterSetBindingList{})
}
