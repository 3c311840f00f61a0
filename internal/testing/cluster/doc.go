// Package cluster runs a real single-node Kubernetes cluster on this machine, for tests of what
// a platform team deploys: etcd, kube-apiserver, kube-controller-manager and kube-scheduler as
// processes, and a node made of a kubelet on containerd (Debian's containerd and runc), a
// bridge CNI (Debian's containernetworking-plugins) and kube-proxy in iptables mode, so that
// pods run as containers from images imported into containerd (nothing is pulled) and reach
// the API server through the kubernetes Service.
//
// Start needs root and the packages hack/cluster-prereqs.sh installs; the Kubernetes binaries
// are those `hack/testbin.sh node` builds. Everything runs under one temporary directory and is
// torn down by Stop: pods through the CRI (so that CNI releases their networks), processes by
// PID, containerd's shims, mounts, cgroups, the bridge and kube-proxy's iptables rules. One
// cluster runs on a machine at a time (it owns the bridge cbh0 and 10.244.0.0/24).
package cluster
