#!/usr/bin/env bash
# cluster-prereqs.sh installs what the single-node test cluster of `make test-cluster`
# (internal/testing/cluster) needs from Debian's packages, when it is missing: containerd and
# runc (the node's container runtime), the CNI plugins (bridge, host-local, loopback, portmap),
# iptables and conntrack (kube-proxy), iproute2 (the bridge), gcc and the static C library (the
# pause image is compiled from Kubernetes' pause.c). It needs root and starts nothing: the test
# runs its own containerd under its own directory.
set -euo pipefail

declare -A needs=(
  [containerd]=containerd [runc]=runc [iptables]=iptables [conntrack]=conntrack [ip]=iproute2 [gcc]=gcc
)
missing=()
for cmd in "${!needs[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${needs[$cmd]}")
done
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || [ -f /usr/lib/aarch64-linux-gnu/libc.a ] || missing+=(libc6-dev)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "cluster-prereqs: missing packages ${missing[*]}, and installing them needs root" >&2
  exit 1
fi
echo "cluster-prereqs: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Debian's containerd package may try to start its service; the test does not use it.
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
