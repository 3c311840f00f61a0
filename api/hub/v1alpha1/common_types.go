package v1alpha1

// ReadyCondition is the condition type of MemberCluster and Fleet.
const ReadyCondition = "Ready"

// BundleCounts counts ConfigBundles by their Ready condition.
type BundleCounts struct {
	// total is the number of ConfigBundles.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Total int64 `json:"total"`

	// ready is the number of ConfigBundles whose Ready condition is True.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Ready int64 `json:"ready"`

	// failed is the number of ConfigBundles whose Ready condition is False. Bundles not yet
	// reconciled are neither ready nor failed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Failed int64 `json:"failed"`

	// placed is the number of the ConfigBundles that the hub placed from a FleetBundle (those
	// with the label hub.configbundle.dev/fleet-bundle), whatever their Ready condition.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Placed int64 `json:"placed"`

	// drifted is the number of the failed ConfigBundles whose Ready reason is Drifted: with
	// driftPolicy Report, their ConfigMap differs from them and the hub leaves it so.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Drifted int64 `json:"drifted"`
}
