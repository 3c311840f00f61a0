// Package sharding shares the members between the hub replicas run with --sharded, with
// multicluster-runtime's sharded coordinator: each replica announces itself with a peer Lease;
// rendezvous hashing over the live replicas names the one that should run each member; that
// replica takes the member's Lease before it runs it, renews it while it does, and releases it
// when it should not run it any more. A Replica is this replica as the hub's packages see it:
// its identity, which members it owns (the provider connects only to those) and the fence of
// its writes (a write to a member leaves the process only while this replica holds the
// member's Lease). The zero Replica, or one with only an ID, is not sharded: it owns every
// member, and the hub elects a leader instead, whose Lease fences its writes (FencedBy).
package sharding
