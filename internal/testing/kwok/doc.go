// Package kwok runs kwok (sigs.k8s.io/kwok, which simulates kubelets) against a test control
// plane, so that its Deployments get Pods that start and become ready, or not, without a node:
// one simulated Node, and an application whose Pods resolve the ConfigMap value they read when
// they start and are ready unless that value is "bad".
package kwok
