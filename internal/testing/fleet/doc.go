// Package fleet is the one fleet fixture of the binary harnesses (test/e2e, test/sharded,
// test/monitoring, internal/demo, hack/bench): a hub control plane and member
// control planes on loopback (package controlplane), regular or slim members on one shared
// etcd, typed and dynamic clients of each, the Secret namespace, and hub processes and sharded
// replicas run from the hub binary (package hubprocess), started, stopped and restarted by
// name. Beside them it has the steps those harnesses all take: register a member with `hub
// register`, put and delete a kubeconfig Secret, make a ConfigBundle and a FleetBundle, tamper
// with a managed ConfigMap, create and delete a backlog of thousands of bundles and measure heals
// meanwhile (backlog.go), label a member, read a MemberCluster and the Fleet and wait for a
// Ready reason, scrape a hub's metrics and read a sample.
//
// Programs (the demo, the benchmark) use the methods, which take a context and return
// errors. Tests use the same methods through Gomega, and the few helpers of testing.go that
// fail the test themselves: MustStart, MustRegister, MustPutSecret, MustDeleteSecret,
// MemberCluster, Fleet, Metrics and ReadyIs.
package fleet
