// Package statusbudget spaces out the status writes of objects whose counts change often (a
// MemberCluster's bundle counts, a FleetBundle's per-member counts), so that a burst of changes
// costs a few writes rather than one per change, while a transition is never held back; and
// caps the back-off of a failed status write (RateLimiter), so that every status is written
// again within seconds of the hub cluster answering after an outage.
package statusbudget
