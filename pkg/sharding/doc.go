// Package sharding shares the members between the hub replicas run with --sharded and fences
// every write to a member, the hub's most safety-critical code: two writers must never touch one
// member. Each replica announces itself with a peer Lease (package peers); rendezvous hashing
// over the live replicas names the one that should run each member (package sharder); the
// sharded coordinator (package coordinator), plugged into the multicluster manager with
// mcmanager.WithCoordinator, runs a member only while its replica holds the member's Lease,
// written when the member changes hands and valid while the holder's peer Lease is, and hands
// it over only once the writes in flight have ended. A Replica is this replica as the hub's
// packages see it: its identity, which members it owns (the provider connects only to those)
// and the fence of its writes (a write to a member leaves the process only while this replica
// may write to it). The zero Replica, or one with only an ID, is not sharded: it owns every
// member, and the hub elects a leader instead (--leader-elect), whose Lease (package election)
// fences its writes (FencedBy).
package sharding
