# shellcheck shell=bash
# shellcheck disable=SC2034 # read by the scripts that source this file
# versions.sh pins, in one place, the versions of what hack/offline builds from the Go module
# proxy for Kubernetes: testbin.sh (the control planes of the tests), nodebin.sh and nodeimage.sh
# (the kind node image) source it. Each may be overridden from the environment.

# k8s.io/kubernetes: kube-apiserver and kube-controller-manager of the tests; kubelet, kubeadm
# and the control plane of the kind node.
KUBE_VERSION=${KUBE_VERSION:-v1.36.3}
# go.etcd.io/etcd/server/v3: one binary, run by the tests' control planes and, tagged as kubeadm
# expects, by the kind node. It is the version kubeadm $KUBE_VERSION names in `kubeadm config
# images list`: change the two together.
ETCD_VERSION=${ETCD_VERSION:-v3.6.8}
# CoreDNS and pause, the other images kubeadm $KUBE_VERSION names (kind node only).
COREDNS_VERSION=${COREDNS_VERSION:-v1.14.2}
PAUSE_TAG=${PAUSE_TAG:-3.10.2}
# sigs.k8s.io/kwok: the kwok binary the package tests run to simulate nodes and their Pods.
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
