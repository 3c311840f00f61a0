// Package placement places FleetBundles: it turns one FleetBundle on the hub into a ConfigBundle
// in every member cluster whose MemberCluster its selector selects among the members of the
// ClusterSets bound to its namespace (package tenancy), keeps those ConfigBundles as the
// template says (rendered by package template; restoring them when someone edits or deletes
// them, never touching a ConfigBundle the hub did not place), removes them from members that
// stop matching and when the FleetBundle is deleted, and reports where the bundle stands in each
// member on the FleetBundle's status. Two controllers do it: "placement", one request per
// (member, FleetBundle) pair, so that a slow or unreachable member delays no other; and
// "fleetbundle-status", one request per FleetBundle on the hub, which writes the status and owns
// the finalizer. The per-member reconciler (package configbundle) then enforces each placed
// ConfigBundle as it does a local one.
//
// Every distinct template, with what its dataFrom sources hold (labelled hub ConfigMaps, read
// from the hub's cache: sources.go), is a revision, kept as a ControllerRevision (package
// rollout). With spec.rollout a new revision is staged: fleetbundle-status decides where the
// rollout stands (rollout.Decide, in rollout_status.go) and writes it to the status, and
// placement gives each member the revision that status says it gets (rollout.TargetRevision).
//
// A paused member (MemberCluster spec.paused) is frozen at what it holds: placement writes
// nothing to it but the heal of the bundle it holds, at the revision it holds (healHeld); the
// status counts it apart (status.clusters.paused) and a staged rollout skips it.
package placement
