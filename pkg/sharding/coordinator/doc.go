// Package coordinator is the sharded coordinator that the hub plugs into multicluster-runtime's
// manager (mcmanager.WithCoordinator) with --sharded: it decides, by rendezvous hashing over the
// live peers (package peers, package sharder), which clusters this peer runs, and runs one only
// while it holds the cluster's fence, a Lease written only when the cluster changes hands and
// valid while its holder's own peer Lease is. BeginWrite lets a write to a cluster leave only
// under a valid fence, and a cluster is handed over only once its writes in flight have ended,
// so that two peers never write to one cluster at once; WithElection elects one peer for the
// work only one may do, with the same kind of fence. It began as multicluster-runtime v0.24.1's
// pkg/manager/coordinator/sharded, made safe to run replicas on (third_party's PATCHES.md says
// how and why), and keeps its Apache 2.0 notices.
package coordinator
