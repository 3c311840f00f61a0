#!/usr/bin/env bash
# test.sh: `make test-kind`. Runs the kind end-to-end test (test/kind, build tag kind) on this
# machine, starting what it needs and leaving nothing of it behind:
#   1. a Docker daemon that runs privileged containers (hack/offline/docker.sh up: the one `docker`
#      reaches when it can, else one of our own, after installing docker.io if need be);
#   2. on a cgroup v1 host, the controllers the host left unmounted (hack/offline/cgroups.sh up);
#   3. the kind node image, built offline and cached, or reused (hack/offline/nodeimage.sh);
#   4. go test -tags kind ./test/kind/ with that image and hack/kind/cluster.yaml: three kind
#      clusters, deleted by the test whatever its outcome;
#   5. then, whatever happened: leftover clusters of the test deleted, the cgroup mounts it made
#      undone, the Docker daemon it started stopped (docker.sh down).
# Prints its time. Run as root.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
start=$SECONDS
say() { printf 'test-kind: %s\n' "$*" >&2; }

[ "$(id -u)" = 0 ] || { echo "make test-kind: run as root (Docker, cgroup mounts, the node image)" >&2; exit 1; }

cleanup() {
  local rc=$?
  set +e
  if docker info >/dev/null 2>&1; then
    # The test deletes its clusters; an interrupted one may leave them.
    local leftovers
    leftovers=$(docker ps -aq --filter label=io.x-k8s.kind.cluster=configbundle-e2e-hub \
      --filter label=io.x-k8s.kind.cluster=configbundle-e2e-m1 --filter label=io.x-k8s.kind.cluster=configbundle-e2e-m2)
    # shellcheck disable=SC2086
    [ -z "$leftovers" ] || { say "removing leftover kind nodes"; docker rm -f -v $leftovers >/dev/null; }
    # The kind network, when no container of another cluster uses it.
    if [ -n "${OWN_DOCKER:-}" ] || [ -z "$(docker ps -aq --filter network=kind)" ]; then
      docker network rm kind >/dev/null 2>&1
    fi
  fi
  bash hack/offline/cgroups.sh down
  bash hack/offline/docker.sh down
  say "$((SECONDS - start)) s (exit $rc)"
  echo "make test-kind: $((SECONDS - start)) s (exit $rc)"
  exit "$rc"
}
trap cleanup EXIT

env=$(bash hack/offline/docker.sh up)
eval "$env"
[ -n "$env" ] && OWN_DOCKER=1
bash hack/offline/cgroups.sh up
step=$SECONDS
node_image=$(bash hack/offline/nodeimage.sh)
say "node image $node_image ready in $((SECONDS - step)) s"

# TESTFLAGS: extra go test flags, split at spaces (as the Makefile's test target takes them).
# shellcheck disable=SC2086
KIND_E2E_REQUIRE=1 KIND_E2E_NODE_IMAGE=$node_image KIND_E2E_CONFIG=$root/hack/kind/cluster.yaml \
  go test -tags kind ./test/kind/ -count=1 -v -timeout 30m ${TESTFLAGS:-}
