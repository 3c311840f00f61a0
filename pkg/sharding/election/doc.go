// Package election holds the hub's leader-election Lease (--leader-elect) in a way that
// survives an outage of the hub cluster. Lock is client-go's Lease lock, which
// controller-runtime's leader election drives, with every request bounded (a request that
// times out closes the hub's connections, so that a dead one is replaced at once) and a fence
// judged on the local monotonic clock: Valid says whether this process still certainly holds
// the Lease (the start of its last successful renewal plus the lease duration, less a margin),
// and fences the leader's writes to the members (sharding.Replica.FencedBy). Timings derives
// the election's timings from its lease duration. Sharded replicas elect the one that does the
// hub-wide work with the sharded coordinator's election fence instead (coordinator.WithElection).
package election
