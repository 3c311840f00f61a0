#!/usr/bin/env bash
# nodebin.sh builds, once, the binaries of the kind node image that hack/offline/testbin.sh does
# not: kubeadm (KUBE_VERSION) and CoreDNS (COREDNS_VERSION, the version kubeadm's image list
# names), from the Go module proxy, into a cache outside the checkout, and prints that directory.
# Versions: hack/offline/versions.sh. Afterwards it returns at once.
set -euo pipefail

# shellcheck source=hack/offline/versions.sh
. "$(dirname "$0")/versions.sh"
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/configbundle-hub
dir=${KIND_NODEBIN_DIR:-$cache_root/kind/bin/k8s-$KUBE_VERSION-coredns-$COREDNS_VERSION}
say() { printf '%s\n' "$*" >&2; }

mkdir -p "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0

if [ ! -x "$dir/kubeadm" ]; then
  mkdir -p "$work/kube" && cd "$work/kube"
  go mod init configbundle.dev/nodebin-kube >/dev/null 2>&1
  go mod edit -require="k8s.io/kubernetes@$KUBE_VERSION"
  # k8s.io/kubernetes replaces its staging modules with local paths: use the published ones.
  gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  grep -E '=> \./staging/' "$gomod" | awk '{print $1}' | while read -r m; do
    go mod edit -replace="$m=$m@v0${KUBE_VERSION#v1}"
  done
  minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  say "building kubeadm $KUBE_VERSION (about 4 minutes the first time)"
  go build -mod=mod -trimpath -ldflags="$ldflags" -o "$dir/kubeadm.tmp" k8s.io/kubernetes/cmd/kubeadm
  mv "$dir/kubeadm.tmp" "$dir/kubeadm"
fi

if [ ! -x "$dir/coredns" ]; then
  say "building coredns $COREDNS_VERSION (about 3 minutes the first time)"
  GOBIN="$work/gobin" go install -trimpath -ldflags="-s -w" "github.com/coredns/coredns@$COREDNS_VERSION"
  mv "$work/gobin/coredns" "$dir/coredns"
fi

echo "$dir"
