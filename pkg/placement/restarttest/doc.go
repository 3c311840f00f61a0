// Package restarttest proves, on real control planes whose Pods kwok simulates, that a staged
// rollout with spec.rollout.workloads Restart restarts the Deployments that read a bundle, judges
// each member by them, and halts and rolls back when they break.
package restarttest
