// Package sharded runs several hub binaries with --sharded against one hub control plane and
// twelve member control planes, and proves what sharding promises: every member is managed by
// exactly one live replica (from the Leases and MemberCluster status.replica), a replica killed
// with SIGKILL has its members taken over within the lease duration and one probe interval, a
// replica added takes its share without a moment in which two replicas write to one member,
// and a paused replica whose Leases lapsed writes nothing to the members it lost when it wakes.
package sharded
