// Package fleet publishes the fleet's health on the hub: a MemberCluster per member, from what
// the provider knows of it and from the member's cached ConfigBundles (and whether it is paused),
// and the Fleet "default" summing them up; and the status of the tenancy model's ClusterSets (how
// many members each selects) and ClusterSetBindings (whether the set each binds exists). All are
// level-based: every reconcile computes the status from the facts of the moment and writes it
// only if it changed, at most once per second per member.
package fleet
