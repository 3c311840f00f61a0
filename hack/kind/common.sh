# shellcheck shell=bash
# shellcheck disable=SC2034 # the settings are used by the scripts that source this file
# common.sh holds the settings and helpers of hack/kind/up.sh and hack/kind/down.sh. It is
# sourced by them, not run.
#
# Settings, from the environment:
#   HUB               name of the hub kind cluster (default configbundle-hub)
#   MEMBERS           names of the member kind clusters, separated by spaces
#                     (default "member-1 member-2"); each is also the member's name on the hub
#   IMG               image to build and load into the hub (default ghcr.io/configbundle/hub:dev)
#   KIND_NODE_IMAGE   node image of new clusters: "offline" (the default as root on Linux) builds
#                     or reuses the node image of hack/offline/nodeimage.sh, which needs no registry,
#                     and creates the clusters with hack/kind/cluster.yaml; "kind" (the default
#                     otherwise) is the kind binary's default (kindest/node, pulled); any other
#                     value is an image to use as it is
#   WAIT_TIMEOUT      how long each wait may take: a number and s, m or h (default 5m)

HUB=${HUB:-configbundle-hub}
MEMBERS=${MEMBERS:-member-1 member-2}
IMG=${IMG:-ghcr.io/configbundle/hub:dev}
if [ -z "${KIND_NODE_IMAGE:-}" ]; then
  if [ "$(id -u)" = 0 ] && [ "$(uname -s)" = Linux ]; then KIND_NODE_IMAGE=offline; else KIND_NODE_IMAGE=kind; fi
fi
WAIT_TIMEOUT=${WAIT_TIMEOUT:-5m}

# What config/default deploys.
HUB_NAMESPACE=configbundle-system
HUB_DEPLOYMENT=configbundle-hub
BASE_IMAGE=ghcr.io/configbundle/hub
BUNDLE_CRD=configbundles.configbundle.dev

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
read -r -a MEMBER_LIST <<<"$MEMBERS"

log() { printf '\n==> %s\n' "$*" >&2; }
die() {
  printf 'error: %s\n' "$*" >&2
  exit 1
}

# context NAME prints the kubeconfig context kind creates for cluster NAME.
context() { printf 'kind-%s' "$1"; }

# need CMD HINT fails unless CMD is on the PATH.
need() {
  command -v "$1" >/dev/null 2>&1 || die "$1 is not installed or not on the PATH. $2"
}

need_docker() {
  need docker "Install Docker (Docker Engine or Docker Desktop); kind runs its clusters as Docker containers."
  local out
  if ! out=$(docker info 2>&1); then
    die "the Docker daemon is not reachable: \`docker info\` failed:
$(printf '%s\n' "$out" | tail -n 3)
Start Docker (and check that this user may use it), then run this again."
  fi
}

# machine_up: with the offline node image (as root), what this machine needs for kind: a Docker
# daemon that runs privileged containers (hack/offline/docker.sh up, which may start one of its own;
# its DOCKER_HOST is exported here) and the cgroup v1 controllers the host left unmounted
# (hack/offline/cgroups.sh up). machine_down undoes both (down.sh, once no kind cluster is left).
machine_up() {
  [ "$KIND_NODE_IMAGE" = offline ] || return 0
  local env
  env=$(bash "$REPO_ROOT/hack/offline/docker.sh" up) || die "no Docker daemon that runs privileged containers (above)."
  eval "$env"
  bash "$REPO_ROOT/hack/offline/cgroups.sh" up
}

machine_down() {
  [ "$KIND_NODE_IMAGE" = offline ] || return 0
  bash "$REPO_ROOT/hack/offline/cgroups.sh" down
  bash "$REPO_ROOT/hack/offline/docker.sh" down
}

# use_own_docker: when hack/offline/docker.sh runs a Docker daemon of its own, `docker` and kind
# talk to it.
use_own_docker() {
  if [ -S /run/configbundle-kind-docker/docker.sock ] && [ -z "${DOCKER_HOST:-}" ]; then
    export DOCKER_HOST=unix:///run/configbundle-kind-docker/docker.sock
  fi
}

# need_kind puts kind on the PATH: the one installed, else sigs.k8s.io/kind of go.mod built
# once into the cache.
need_kind() {
  command -v kind >/dev/null 2>&1 && return 0
  local version bin
  version=$(cd "$REPO_ROOT" && go list -m -f '{{.Version}}' sigs.k8s.io/kind) || die "kind is not installed, and go cannot name go.mod's version of it."
  bin=${XDG_CACHE_HOME:-$HOME/.cache}/configbundle-hub/kind/bin/kind-$version
  if [ ! -x "$bin/kind" ]; then
    echo "kind is not on the PATH: building sigs.k8s.io/kind $version into $bin" >&2
    mkdir -p "$bin"
    (cd "$REPO_ROOT" && go build -o "$bin/kind" sigs.k8s.io/kind) || die "building kind $version failed."
  fi
  export PATH="$bin:$PATH"
}

# need_kubectl puts kubectl on the PATH: the one installed, else the one hack/offline/testbin.sh node
# builds (cached; about 6 minutes the first time).
need_kubectl() {
  if ! command -v kubectl >/dev/null 2>&1; then
    local dir
    echo "kubectl is not on the PATH: using the one of hack/offline/testbin.sh node" >&2
    dir=$(TESTBIN_QUIET=1 bash "$REPO_ROOT/hack/offline/testbin.sh" node) || die "building kubectl failed."
    export PATH="$PATH:$dir"
  fi
  kubectl kustomize --help >/dev/null 2>&1 || die "this kubectl has no kustomize built in (kubectl kustomize); install a newer kubectl."
}

# check_settings fails on cluster names kind or the hub would refuse, on clashes, and on a
# WAIT_TIMEOUT it cannot read.
check_settings() {
  [[ $WAIT_TIMEOUT =~ ^[0-9]+[smh]$ ]] || die "WAIT_TIMEOUT=$WAIT_TIMEOUT: give a number with a unit, such as 90s, 5m or 1h."
  [ "${#MEMBER_LIST[@]}" -gt 0 ] || die "MEMBERS is empty: name at least one member cluster."
  local name seen=" "
  for name in "$HUB" "${MEMBER_LIST[@]}"; do
    [[ $name =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] ||
      die "invalid cluster name \"$name\": use lowercase letters, digits and '-' (a DNS-1123 label)."
    case $seen in
    *" $name "*) die "cluster name \"$name\" is given twice (HUB=$HUB, MEMBERS=$MEMBERS)." ;;
    esac
    seen+="$name "
  done
}

# cluster_exists NAME succeeds if kind knows a cluster NAME.
cluster_exists() {
  kind get clusters 2>/dev/null | grep -qxF -- "$1"
}

# wait_for_object CONTEXT OBJECT waits until `kubectl get OBJECT` (a cluster-scoped one) finds
# it: kubectl wait fails at once on an object that does not exist yet.
wait_for_object() {
  local ctx=$1 obj=$2 deadline
  deadline=$((SECONDS + $(seconds "$WAIT_TIMEOUT")))
  until kubectl --context "$ctx" get "$obj" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      printf 'error: %s did not appear in %s within %s\n' "$obj" "$ctx" "$WAIT_TIMEOUT" >&2
      return 1
    fi
    sleep 2
  done
}

# seconds DURATION converts 90s, 5m or 1h to seconds.
seconds() {
  case $1 in
  *h) echo $((${1%h} * 3600)) ;;
  *m) echo $((${1%m} * 60)) ;;
  *) echo "${1%s}" ;;
  esac
}
