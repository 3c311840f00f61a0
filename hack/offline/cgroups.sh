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

# mounted NAME: some cgroup v1 mount has the controller NAME.
mounted() {
  awk -v c="$1" '$3 == "cgroup" { n = split($4, o, ","); for (i = 1; i <= n; i++) if (o[i] == c) found = 1 } END { exit !found }' /proc/mounts
}

up() {
  v1 || return 0
  local name enabled
  # Enabled controllers that no mount has. (Once mounted and unmounted again, a controller's
  # hierarchy lingers while it has child cgroups: /proc/cgroups then gives it a hierarchy id,
  # mounted or not, so that column says nothing.)
  while read -r name _ _ enabled; do
    case "$name" in \#*|misc) continue ;; esac
    [ "$enabled" = 1 ] || continue
    mounted "$name" && continue
    say "mounting the cgroup v1 controller $name at /sys/fs/cgroup/$name"
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
    # The cgroups the kind nodes made there, empty once their containers are gone: removed, so
    # that the hierarchy goes away with the mount (rmdir removes only empty cgroups).
    find "/sys/fs/cgroup/$name" -mindepth 1 -depth -type d -exec rmdir {} \; 2>/dev/null || true
    if umount "/sys/fs/cgroup/$name"; then rmdir "/sys/fs/cgroup/$name" 2>/dev/null || true; fi
  done <"$record"
  rm -f "$record"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
