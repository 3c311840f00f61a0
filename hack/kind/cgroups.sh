#!/usr/bin/env bash
# cgroups.sh up|down: on a cgroup v1 host, the controllers the kernel has enabled but the host
# left unmounted (here hugetlb, perf_event, net_cls, net_prio). systemd in a kind node mounts
# every controller the kernel has, and the kubelet then wants its cgroup in each: with one the
# host does not mount, the kubelet crash-loops ("cgroup [\"kubelet\"] has some missing paths:
# /sys/fs/cgroup/hugetlb/kubelet.slice"). up mounts them at /sys/fs/cgroup/NAME and records
# which; down unmounts those it mounted. Nothing happens on a cgroup v2 host. Run as root.
set -euo pipefail

record=/run/configbundle-kind-cgroups
say() { printf 'cgroups.sh: %s\n' "$*" >&2; }

v1() { [ ! -f /sys/fs/cgroup/cgroup.controllers ] && mountpoint -q /sys/fs/cgroup; }

up() {
  v1 || return 0
  local name hier enabled
  while read -r name hier _ enabled; do
    case "$name" in \#*|misc) continue ;; esac
    [ "$hier" = 0 ] && [ "$enabled" = 1 ] || continue
    [ -e "/sys/fs/cgroup/$name" ] && mountpoint -q "/sys/fs/cgroup/$name" && continue
    say "mounting the cgroup v1 controller $name at /sys/fs/cgroup/$name"
    mount -o remount,rw /sys/fs/cgroup 2>/dev/null || true
    mkdir -p "/sys/fs/cgroup/$name"
    mount -t cgroup -o "$name" cgroup "/sys/fs/cgroup/$name"
    echo "$name" >>"$record"
  done </proc/cgroups
}

down() {
  [ -f "$record" ] || return 0
  local name
  while read -r name; do
    say "unmounting /sys/fs/cgroup/$name"
    umount "/sys/fs/cgroup/$name" && rmdir "/sys/fs/cgroup/$name" 2>/dev/null || true
  done <"$record"
  rm -f "$record"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
