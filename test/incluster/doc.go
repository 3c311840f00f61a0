// Package incluster deploys the hub as platform teams do, and checks it works there: the image
// built without Docker (hack/image), imported into a real single-node cluster
// (internal/testing/cluster: a kubelet on containerd), config/default applied as it is with
// only the image overridden by a kustomize overlay, members registered with `hub register`.
// The hub then runs as a Deployment under its own ServiceAccount with the shipped RBAC and
// in-cluster config, with leader election, probes and the metrics Service.
//
// The tests need root, containerd and the node's binaries: run them with `make test-cluster`
// (build tag cluster).
package incluster
