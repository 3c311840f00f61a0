// Package v1alpha1 holds the ConfigBundle API (group configbundle.dev, version v1alpha1).
//
// A ConfigBundle lives in a member cluster and owns exactly one ConfigMap of the same name and
// namespace there. The reconciler in package configbundle keeps that ConfigMap equal to the
// bundle's spec and metadata, heals drift and reports the outcome in the bundle's status. The
// condition types and reasons a user or script can rely on are the constants in this package.
//
// +kubebuilder:object:generate=true
// +groupName=configbundle.dev
package v1alpha1
