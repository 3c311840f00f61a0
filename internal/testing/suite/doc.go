// Package suite is the set-up shared by the in-process test suites: the TestMains that run a
// package's controllers against real control planes started in the test process
// (pkg/configbundle, pkg/placement, pkg/fleet, pkg/tenancy, pkg/registration, spoke-provider).
// Run refuses to start without KUBEBUILDER_ASSETS, installs the suites' logger (errors only,
// everything with TEST_VERBOSE_LOGS set), starts the named control planes together, hands them to the
// suite's own set-up, runs the tests and stops the planes. Hub is the hub side such a set-up
// builds: a multicluster manager over multicluster-runtime's clusters provider, the other
// planes its members, with an uncached client of each. Members plays the spoke provider for
// the controllers that need one (placement.Members, fleet.Members) over that provider: a test
// sets each member's State. The binary harnesses (test/e2e, test/sharded, test/monitoring,
// hack/bench, internal/demo) run the hub binary on internal/testing/fleet.
package suite
