#!/usr/bin/env bash
# testbin.sh builds the control-plane binaries the tests and the demo run (etcd,
# kube-apiserver, kube-controller-manager, and kwok, which simulates nodes and their Pods) from
# the Go module proxy, once, into a
# cache outside the checkout, and prints the directory that holds them. `testbin.sh node`
# also builds what the kind node image of nodeimage.sh needs (kube-scheduler, kubelet,
# kube-proxy, kubectl).
#
# Nothing is downloaded but Go modules: each binary is built from a throwaway module
# that requires the upstream module at the pinned version. A cold build takes about
# ten minutes on two cores; afterwards the script returns at once.
#
# Environment:
#   TESTBIN_DIR          where the binaries go
#                        (default ${XDG_CACHE_HOME:-$HOME/.cache}/configbundle-hub/testbin/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION)
#   KUBE_VERSION         k8s.io/kubernetes version (default: hack/offline/versions.sh)
#   ETCD_VERSION         go.etcd.io/etcd/server/v3 version (default: hack/offline/versions.sh)
#   KWOK_VERSION         sigs.k8s.io/kwok version (default: hack/offline/versions.sh)
#   TESTBIN_QUIET=1      no progress lines on stderr
set -euo pipefail

# shellcheck source=hack/offline/versions.sh
. "$(dirname "$0")/versions.sh"
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/configbundle-hub
TESTBIN_DIR=${TESTBIN_DIR:-$cache_root/testbin/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION}

say() { [ "${TESTBIN_QUIET:-}" = 1 ] || printf '%s\n' "$*" >&2; }

# elapsed runs a command and prints a progress line every 20 s, so a person
# watching a cold build knows it is alive and roughly how far it has to go.
elapsed() {
  local what=$1 estimate=$2; shift 2
  local start=$SECONDS
  "$@" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && say "  ... still building $what ($((SECONDS - start)) s so far, about $estimate the first time)"
  done
  wait "$pid"
}

mkdir -p "$TESTBIN_DIR"
# One build at a time: a second caller (.ci/run builds ahead in the background) waits for the
# first and then finds the binaries built.
exec 9>"$TESTBIN_DIR.lock"
flock 9
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

kube_binaries=(kube-apiserver kube-controller-manager)
case "${1:-}" in
  "") ;;
  node) kube_binaries+=(kube-scheduler kubelet kube-proxy kubectl) ;;
  *) echo "usage: $0 [node]" >&2; exit 2 ;;
esac

build_kube() {
  local bins=()
  for b in "${kube_binaries[@]}"; do
    [ -x "$TESTBIN_DIR/$b" ] && continue
    # A binary of this Kubernetes version that a directory of another etcd version holds.
    local built
    built=$(find "$cache_root/testbin" -mindepth 2 -maxdepth 2 -path "*/k8s-$KUBE_VERSION-etcd-*/$b" -perm -u+x 2>/dev/null | head -n 1)
    if [ -n "$built" ]; then
      cp "$built" "$TESTBIN_DIR/$b.tmp" && mv "$TESTBIN_DIR/$b.tmp" "$TESTBIN_DIR/$b"
    else
      bins+=("$b")
    fi
  done
  [ ${#bins[@]} -eq 0 ] && return 0
  local mod="$work/kube"
  mkdir -p "$mod"
  (
    cd "$mod"
    go mod init configbundle.dev/testbin-kube >/dev/null 2>&1
    go mod edit -require="k8s.io/kubernetes@$KUBE_VERSION"
    # k8s.io/kubernetes replaces every staging module with a local path; point
    # each at the published module of the same release instead.
    local staging_version="v0${KUBE_VERSION#v1}"
    local gomod
    gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    grep -E '=> \./staging/' "$gomod" | awk '{print $1}' | while read -r m; do
      go mod edit -replace="$m=$m@$staging_version"
    done
    say "resolving kubernetes $KUBE_VERSION modules"

    # Stamp the version as the Kubernetes release build does, so that /version tells the truth.
    local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
    local ldflags="-s"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
    done
    for b in "${bins[@]}"; do
      say "building $b $KUBE_VERSION (about 6 minutes the first time)"
      elapsed "$b" "6 minutes" env CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags="$ldflags" -o "$TESTBIN_DIR/$b.tmp" "k8s.io/kubernetes/cmd/$b"
      mv "$TESTBIN_DIR/$b.tmp" "$TESTBIN_DIR/$b"
    done
  )
}

build_etcd() {
  [ -x "$TESTBIN_DIR/etcd" ] && return 0
  local mod="$work/etcd"
  mkdir -p "$mod"
  (
    cd "$mod"
    go mod init configbundle.dev/testbin-etcd >/dev/null 2>&1
    go mod edit -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION"
    say "resolving etcd $ETCD_VERSION modules"

    say "building etcd $ETCD_VERSION (about 2 minutes the first time)"
    elapsed etcd "2 minutes" env CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags=-s -o "$TESTBIN_DIR/etcd.tmp" go.etcd.io/etcd/server/v3
    mv "$TESTBIN_DIR/etcd.tmp" "$TESTBIN_DIR/etcd"
  )
}

# kwok simulates kubelets: the package tests that need Pods run it against a member.
build_kwok() {
  [ -x "$TESTBIN_DIR/kwok" ] && return 0
  local mod="$work/kwok"
  mkdir -p "$mod"
  (
    cd "$mod"
    go mod init configbundle.dev/testbin-kwok >/dev/null 2>&1
    go mod edit -require="sigs.k8s.io/kwok@$KWOK_VERSION"
    say "building kwok $KWOK_VERSION (about 3 minutes the first time)"
    elapsed kwok "3 minutes" env CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags=-s -o "$TESTBIN_DIR/kwok.tmp" sigs.k8s.io/kwok/cmd/kwok
    mv "$TESTBIN_DIR/kwok.tmp" "$TESTBIN_DIR/kwok"
  )
}

build_etcd
build_kube
build_kwok
echo "$TESTBIN_DIR"
