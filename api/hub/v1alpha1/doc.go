// Package v1alpha1 holds the hub's health API (group hub.configbundle.dev, version v1alpha1):
// MemberCluster, one per member registered through a kubeconfig Secret, and Fleet, the summary
// of all of them. The hub writes both; users and scripts read them with kubectl. Condition types
// and reasons are the constants in this package.
//
// +kubebuilder:object:generate=true
// +groupName=hub.configbundle.dev
package v1alpha1
