// Package election holds the hub's leader-election Lease in a way that survives an outage of
// the hub cluster. Lock is client-go's Lease lock with every request bounded (a request that
// times out closes the hub's connections, so that a dead one is replaced at once) and a fence
// judged on the local monotonic clock: Valid says whether this process still certainly holds
// the Lease (the start of its last successful renewal plus the lease duration, less a margin).
// With --leader-elect it fences the leader's writes to the members; with --sharded, Elector
// runs the election of the replica that does the hub-wide work (the Fleet roll-up, the totals
// of FleetBundles) as a runnable of its own that campaigns again whenever it loses, so that
// losing it never stops the process nor the replica's members.
package election
