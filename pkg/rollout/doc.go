// Package rollout decides staged rollouts of FleetBundles and keeps their revisions. Every
// distinct definition of a FleetBundle is a Revision, kept as a ControllerRevision it owns
// (revisions.go). The planner is a set of pure functions of facts: Decide says where the
// rollout of a revision stands (its stage, how far into the stage members are admitted, soak,
// halt, rollback, pause) from the status last written and where each member stands (Member),
// counting members with TallyMembers; TargetRevision says which revision one member gets from
// that status. DecideRemovals and RemovalAdmitted do the same for removals: the members that
// hold the bundle and are no longer selected lose it in stage order, and a change that would
// remove it from more members than maxRemovals is held until it is approved or reverted.
// Package placement reads the facts, writes the decisions and applies them; this
// package reads no cluster but for the ControllerRevisions and, in ResolveDefinition, the
// FleetBundles' labelled source ConfigMaps (sources.go).
package rollout
