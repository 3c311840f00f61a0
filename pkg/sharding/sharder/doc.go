// Package sharder decides which peer should run a cluster: HRW is weighted rendezvous hashing,
// whose scores (FNV-1a mixed by MurmurHash3's finalizer, -w/ln(u)) spread the clusters evenly
// even between peers whose ids differ only in their last characters, and move only the
// clusters a joining peer wins. It began as multicluster-runtime v0.24.1's
// pkg/manager/coordinator/sharded/sharder.
package sharder
