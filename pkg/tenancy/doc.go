// Package tenancy is the hub's tenancy model: which members a FleetBundle may place into. A
// FleetBundle selects only among the members of the ClusterSets bound to its namespace by a
// ClusterSetBinding, narrowed by its spec.clusterSets: its Boundary (boundary.go), read from the
// hub with ReadBoundary and asked with Boundary.Selects by every decision of which members a
// FleetBundle selects; FleetBundlesIn and FleetBundlesOfSet say which FleetBundles a change of a
// binding or a set may move. Two controllers keep the status of the model's objects
// (clusterset_controller.go): how many members each ClusterSet selects, and whether the set each
// ClusterSetBinding binds exists, computed from the facts of the moment and written only if it
// changed.
package tenancy
