// Package e2e runs the hub binary, as a user would, against real control planes: one hub and
// several members, each a kube-apiserver started by package controlplane. The tests register
// members, break them in every way the hub must survive, and read the results the way an
// operator does: MemberCluster and Fleet objects and their printer columns.
package e2e
