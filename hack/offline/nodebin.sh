#!/usr/bin/env bash
# nodebin.sh builds, once, the binaries of the kind node image that hack/offline/testbin.sh does not:
# kubeadm (KUBE_VERSION), etcd (ETCD_VERSION, the version kubeadm's image list names) and CoreDNS
# (COREDNS_VERSION, likewise), from the Go module proxy, into a cache outside the checkout, and
# prints that directory. Afterwards it returns at once.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.8}
COREDNS_VERSION=${COREDNS_VERSION:-v1.14.2}
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/configbundle-hub
dir=${KIND_NODEBIN_DIR:-$cache_root/kind/bin/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION-coredns-$COREDNS_VERSION}
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

if [ ! -x "$dir/etcd" ]; then
  mkdir -p "$work/etcd" && cd "$work/etcd"
  go mod init configbundle.dev/nodebin-etcd >/dev/null 2>&1
  go mod edit -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  say "building etcd $ETCD_VERSION (about 2 minutes the first time)"
  go build -mod=mod -trimpath -ldflags="-s -w" -o "$dir/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "$dir/etcd.tmp" "$dir/etcd"
fi

if [ ! -x "$dir/coredns" ]; then
  say "building coredns $COREDNS_VERSION (about 3 minutes the first time)"
  GOBIN="$work/gobin" go install -trimpath -ldflags="-s -w" "github.com/coredns/coredns@$COREDNS_VERSION"
  mv "$work/gobin/coredns" "$dir/coredns"
fi

echo "$dir"
