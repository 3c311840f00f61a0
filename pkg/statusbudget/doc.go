// Package statusbudget spaces out the status writes of objects whose counts change often (a
// MemberCluster's bundle counts, a FleetBundle's per-member counts), so that a burst of changes
// costs a few writes rather than one per change, while a transition is never held back.
package statusbudget
