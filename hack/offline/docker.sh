#!/usr/bin/env bash
# docker.sh up|down: the Docker daemon of hack/kind (make kind-up, make test-kind).
#
# up prints the environment (`export DOCKER_HOST=...` or nothing) under which `docker` reaches a
# daemon that can run a privileged container, which is what a kind node is:
#   - installs Debian's docker.io when dockerd is missing (as root);
#   - uses the daemon `docker` reaches as it is (DOCKER_HOST, or /var/run/docker.sock) when it
#     answers and runs a privileged container;
#   - otherwise starts one of its own (a second `up` finds it running): dockerd from Debian with
#     its own socket, exec root and pidfile under /run/configbundle-kind-docker, its data root
#     under ${XDG_CACHE_HOME:-~/.cache}/configbundle-hub/kind/docker (kept: it holds the imported
#     node image, which makes the next run warm), no docker0 bridge, no change to ip_forward, and
#     hack/offline/runc-nosysresource as its default runtime: this machine lacks CAP_SYS_RESOURCE,
#     which Docker 20.10 gives every privileged container.
# down stops the daemon that up started, if any, and removes what it left: its iptables chains,
# its state under /run. A daemon it did not start is left alone.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
state=/run/configbundle-kind-docker
sock=unix://$state/docker.sock
data=${XDG_CACHE_HOME:-$HOME/.cache}/configbundle-hub/kind/docker
say() { printf 'docker.sh: %s\n' "$*" >&2; }

# privileged_ok: the daemon of the current environment runs a privileged container (a tiny
# static program imported as an image, removed again).
privileged_ok() {
  docker info >/dev/null 2>&1 || return 1
  local probe=configbundle.dev/kind-probe:1 d
  if ! docker image inspect "$probe" >/dev/null 2>&1; then
    d=$(mktemp -d)
    printf 'int main(void){return 0;}\n' >"$d/true.c"
    gcc -static -Os -o "$d/true" "$d/true.c" || { rm -rf "$d"; return 1; }
    tar -C "$d" -cf "$d/probe.tar" true
    docker import --change 'ENTRYPOINT ["/true"]' "$d/probe.tar" "$probe" >/dev/null 2>&1 || { rm -rf "$d"; return 1; }
    rm -rf "$d"
  fi
  local out rc=0
  out=$(docker run --rm --privileged "$probe" 2>&1) || rc=$?
  docker rmi "$probe" >/dev/null 2>&1 || true
  [ "$rc" = 0 ] || say "a privileged container fails on $(docker context inspect --format '{{.Endpoints.docker.Host}}' 2>/dev/null || echo "${DOCKER_HOST:-the default daemon}"): $out"
  return "$rc"
}

ours_running() {
  [ -f "$state/dockerd.pid" ] && kill -0 "$(cat "$state/dockerd.pid")" 2>/dev/null
}

up() {
  if ! command -v dockerd >/dev/null || ! command -v docker >/dev/null; then
    [ "$(id -u)" = 0 ] || { say "dockerd is missing: install Docker (Debian: apt-get install docker.io)"; exit 1; }
    say "installing Debian's docker.io"
    apt-get update -qq >&2 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io >&2
  fi
  if ours_running; then
    echo "export DOCKER_HOST=$sock"
    return
  fi
  if privileged_ok; then
    say "using the running Docker daemon"
    return
  fi
  [ "$(id -u)" = 0 ] || { say "no usable Docker daemon, and starting one needs root"; exit 1; }
  say "starting a Docker daemon of our own ($sock, data root $data)"
  mkdir -p "$state" "$data"
  # Debian's dockerd starts its own containerd, under the exec root.
  setsid dockerd --host "$sock" --data-root "$data" --exec-root "$state/exec" --pidfile "$state/dockerd.pid" \
    --add-runtime "kind-runc=$root/hack/offline/runc-nosysresource" --default-runtime kind-runc \
    --bridge none --ip-forward=false --storage-driver overlay2 >"$state/dockerd.log" 2>&1 </dev/null &
  for _ in $(seq 60); do
    DOCKER_HOST=$sock docker info >/dev/null 2>&1 && break
    sleep 1
  done
  if ! DOCKER_HOST=$sock privileged_ok; then
    say "the Docker daemon of our own cannot run a privileged container either; its log:"
    tail -20 "$state/dockerd.log" >&2
    down
    exit 1
  fi
  echo "export DOCKER_HOST=$sock"
}

down() {
  [ -d "$state" ] || return 0
  local pid table chains chain
  pid=$(cat "$state/dockerd.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    # Its networks (kind's) first: dockerd leaves their bridges and iptables rules behind.
    DOCKER_HOST=$sock docker network prune -f >/dev/null 2>&1 || true
    say "stopping the Docker daemon of our own (pid $pid)"
    kill -TERM "$pid"
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && { say "dockerd $pid did not stop in 60 s: killing it"; kill -KILL "$pid"; sleep 1; }
  fi
  # Docker leaves its chains behind when it stops: remove them (and the rules that jump to them).
  for table in filter nat; do
    { iptables -t "$table" -S 2>/dev/null || true; } | { grep -E '^-A .*-j DOCKER' || true; } | sed 's/^-A/-D/' | while read -r rule; do
      # shellcheck disable=SC2086
      iptables -t "$table" $rule 2>/dev/null || true
    done
    chains=$({ iptables -t "$table" -S 2>/dev/null || true; } | awk '$1 == "-N" && $2 ~ /^DOCKER/ {print $2}')
    for chain in $chains; do iptables -t "$table" -F "$chain" 2>/dev/null || true; done
    for chain in $chains; do iptables -t "$table" -X "$chain" 2>/dev/null || true; done
  done
  # Whatever dockerd left mounted under its exec root (nothing, normally).
  { grep -o " ${state}[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  rm -rf "$state"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
