// Package tenancy is the hub's tenancy model: which members a FleetBundle may place into. A
// FleetBundle selects only among the members of the ClusterSets bound to its namespace by a
// ClusterSetBinding, narrowed by its spec.clusterSets: its Boundary (boundary.go), read from the
// hub with ReadBoundary and asked with Boundary.Selects by every decision of which members a
// FleetBundle selects. FleetBundlesIn and FleetBundlesOfSet say which FleetBundles a change of a
// binding or a set may move.
package tenancy
