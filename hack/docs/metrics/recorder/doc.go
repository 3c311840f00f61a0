// Package recorder keeps every collector registered with controller-runtime's metrics registry
// after it is initialised, so that hack/docs/metrics can describe metric vectors that have no
// children yet (a registry's Gather would leave them out). It imports nothing of the hub: since
// Go 1.21 packages are initialised in import-path order once their imports are, so this package
// (configbundle.dev/hub/hack/...) is initialised before any package under configbundle.dev/hub/pkg,
// configbundle.dev/hub/internal or configbundle.dev/hub/spoke-provider registers its metrics.
package recorder
