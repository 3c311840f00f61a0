// Package fleet publishes the fleet's health on the hub: a MemberCluster per member, from what
// the provider knows of it and from the member's cached ConfigBundles (and whether it is paused),
// and the Fleet "default" summing them up. Both are level-based: every reconcile computes the
// status from the facts of the moment and writes it only if it changed, at most once per second
// per member. The status of ClusterSets and ClusterSetBindings is package tenancy's.
package fleet
