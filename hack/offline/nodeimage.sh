#!/usr/bin/env bash
# nodeimage.sh makes sure the Docker daemon that `docker` reaches has the kind node image of
# hack/kind, and prints its name. No registry is needed: the image is assembled offline.
#
#   - a Debian rootfs from Debian's packages (debootstrap): systemd, Debian's containerd 1.6 and
#     runc, iptables, conntrack, iproute2, the CNI plugins, curl (as kind's base image has it), ...;
#   - kind's node files (entrypoint, kubelet units, ...) from the sigs.k8s.io/kind module, with
#     the files of hack/offline/node over them (containerd's config for Debian's paths, a bridge CNI,
#     the kubelet's flags for this cgroup v1 machine, the service that imports the images);
#   - kubelet, kubectl, kubeadm, and the images kubeadm runs (kube-apiserver,
#     kube-controller-manager, kube-scheduler, kube-proxy, etcd, CoreDNS, pause), built from the
#     Go module proxy (hack/offline/testbin.sh node, hack/offline/nodebin.sh) and pause.c, packed
#     by hack/offline/nodeimage into /kind/images/images.tar, which the node imports as it boots.
#     The versions are hack/offline/versions.sh's: etcd is the binary the tests run too.
#
# The image is cached as a tar outside the checkout, keyed by everything that goes into it
# (versions, package list, the files above and this script), as
# ${XDG_CACHE_HOME:-~/.cache}/configbundle-hub/kind/node-KEY.tar, and loaded with `docker load`
# under the name configbundle.dev/kind-node:KUBE_VERSION-KEY. A daemon that has
# the image already makes this return at once; a cold build takes about 10 minutes on two
# cores after `hack/offline/testbin.sh node` (most of it building kubeadm and CoreDNS). Run as root.
#
# `nodeimage.sh --tar` only builds the cached tar (no Docker needed) and prints its path: .ci/run
# builds it ahead, in the background. A second caller waits for a build under way.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

# shellcheck source=hack/offline/versions.sh
. hack/offline/versions.sh
# Exported: testbin.sh and nodebin.sh build these.
export KUBE_VERSION ETCD_VERSION COREDNS_VERSION
ETCD_TAG=${ETCD_VERSION#v}-0
KIND_VERSION=$(go list -m -f '{{.Version}}' sigs.k8s.io/kind)
SUITE=bookworm
MIRROR=${KIND_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PACKAGES=systemd,systemd-sysv,dbus,containerd,runc,iptables,nftables,conntrack,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,ca-certificates,procps,containernetworking-plugins,socat,curl

cache=${XDG_CACHE_HOME:-$HOME/.cache}/configbundle-hub/kind
say() { printf 'nodeimage: %s\n' "$*" >&2; }

# go_module_dir MODULE[@VERSION] prints the directory of a module (go.mod's version unless one is
# given) in the module cache, downloading it first: `go list -m -f '{{.Dir}}'` prints nothing for
# a module not downloaded yet, as on a fresh clone on a new machine.
go_module_dir() {
  local json dir
  json=$(go mod download -json "$1") || true
  dir=$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' <<<"$json")
  if [ -z "$dir" ] || [ ! -d "$dir" ]; then
    echo "nodeimage.sh: go mod download $1 gave no module directory: $(sed -n 's/.*"Error": "\(.*\)".*/\1/p' <<<"$json")" >&2
    return 1
  fi
  echo "$dir"
}

tar_only=false
case "${1:-}" in
  "") ;;
  --tar) tar_only=true ;;
  *) echo "usage: $0 [--tar]" >&2; exit 2 ;;
esac

[ "$(id -u)" = 0 ] || { echo "nodeimage.sh: run as root (debootstrap, chroot, image ownership)" >&2; exit 1; }

# The key: every input, by content.
inputs="kube=$KUBE_VERSION etcd=$ETCD_VERSION coredns=$COREDNS_VERSION pause=$PAUSE_TAG kind=$KIND_VERSION suite=$SUITE packages=$PACKAGES"
key=$( { echo "$inputs"; cat hack/offline/nodeimage.sh hack/offline/nodebin.sh hack/offline/nodeimage/*.go \
  hack/offline/ociimage/ociimage.go hack/offline/ociimage/layer.go hack/offline/ociimage/elf.go;
  find hack/offline/node -type f | LC_ALL=C sort | while read -r f; do echo "$f"; cat "$f"; done; } | sha256sum | cut -c1-12)
ref=configbundle.dev/kind-node:$KUBE_VERSION-$key
tarfile=$cache/node-$KUBE_VERSION-$key.tar

if ! $tar_only && docker image inspect "$ref" >/dev/null 2>&1; then
  echo "$ref"
  exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/node.lock" # one build at a time: a second caller waits for the first
flock 9
if [ ! -f "$tarfile" ]; then
  start=$SECONDS
  say "building the kind node image $ref ($inputs)"
  kube_dir=$(TESTBIN_QUIET=1 nice -n 19 bash hack/offline/testbin.sh node)
  nodebin=$(nice -n 19 bash hack/offline/nodebin.sh)
  work=$(mktemp -d "$cache/build.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  rootfs=$work/rootfs

  # The Debian rootfs, cached by suite and packages.
  base=$cache/rootfs-$SUITE-$(echo "$PACKAGES" | sha256sum | cut -c1-12).tar
  if [ ! -f "$base" ]; then
    if ! command -v debootstrap >/dev/null; then
      apt-get update -qq >&2 || true
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >&2
    fi
    say "debootstrap $SUITE (about 2 minutes)"
    nice -n 19 debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$work/base" "$MIRROR" >"$work/debootstrap.log" 2>&1 ||
      { tail -20 "$work/debootstrap.log" >&2; exit 1; }
    rm -rf "$work/base"/var/cache/apt/archives/*.deb "$work/base"/var/lib/apt/lists/* "$work/base"/usr/share/doc \
      "$work/base"/usr/share/man "$work/base"/usr/share/info "$work/base"/usr/share/locale
    tar -C "$work/base" --numeric-owner --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -cf "$base.tmp" .
    mv "$base.tmp" "$base"
    rm -rf "$work/base"
  fi
  mkdir -p "$rootfs"
  tar -C "$rootfs" --numeric-owner -xpf "$base"

  # kind's node files (as kind's images/base/Dockerfile copies them), then ours over them.
  kindfiles=$(go_module_dir sigs.k8s.io/kind)/images/base/files
  install -m 0755 "$kindfiles"/usr/local/bin/* "$rootfs/usr/local/bin/"
  mkdir -p "$rootfs/kind/bin" "$rootfs/etc/systemd/system/kubelet.service.d" "$rootfs/etc/sysctl.d"
  install -m 0644 "$kindfiles/kind/README.txt" "$rootfs/kind/"
  install -m 0755 "$kindfiles"/kind/bin/* "$rootfs/kind/bin/"
  install -m 0644 "$kindfiles/etc/crictl.yaml" "$rootfs/etc/"
  install -m 0644 "$kindfiles"/etc/sysctl.d/* "$rootfs/etc/sysctl.d/"
  for f in kubelet.service kubelet.slice undo-mount-hacks.service; do
    install -m 0644 "$kindfiles/etc/systemd/system/$f" "$rootfs/etc/systemd/system/"
  done
  install -m 0644 "$kindfiles"/etc/systemd/system/kubelet.service.d/* "$rootfs/etc/systemd/system/kubelet.service.d/"
  (cd hack/offline/node && find . -type f) | while read -r f; do
    install -D -m 0644 "hack/offline/node/$f" "$rootfs/$f"
  done
  chmod 0755 "$rootfs"/kind/bin/*
  # As kind's Dockerfile: only the units the node needs start.
  find "$rootfs/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
  rm -f "$rootfs"/lib/systemd/system/multi-user.target.wants/* "$rootfs"/etc/systemd/system/*.wants/* \
    "$rootfs"/lib/systemd/system/local-fs.target.wants/* "$rootfs"/lib/systemd/system/sockets.target.wants/*udev* \
    "$rootfs"/lib/systemd/system/sockets.target.wants/*initctl* "$rootfs"/lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >>"$rootfs/etc/systemd/journald.conf"
  ln -sf /usr/lib/systemd/systemd "$rootfs/sbin/init"
  chroot "$rootfs" systemctl enable kubelet.service containerd.service undo-mount-hacks.service kind-images.service >/dev/null 2>&1
  chroot "$rootfs" systemctl mask systemd-binfmt.service >/dev/null 2>&1
  mkdir -p "$rootfs/etc/kubernetes/manifests" "$rootfs/opt/cni" "$rootfs/kind/images"
  ln -sfn /usr/lib/cni "$rootfs/opt/cni/bin"
  echo "$KUBE_VERSION" >"$rootfs/kind/version"
  : >"$rootfs/etc/machine-id"
  install -m 0755 "$kube_dir/kubelet" "$kube_dir/kubectl" "$nodebin/kubeadm" "$rootfs/usr/bin/"

  # pause, from Kubernetes' pause.c.
  kmod=$(go_module_dir "k8s.io/kubernetes@$KUBE_VERSION")
  gcc -Os -static -DVERSION="$PAUSE_TAG-configbundle" -o "$work/pause" "$kmod/build/pause/linux/pause.c"

  # kube-proxy's iptables userland: iptables-nft from the rootfs, its libraries and extensions.
  extra=$work/kube-proxy-extra
  mkdir -p "$extra/usr/sbin" "$extra/usr/lib/x86_64-linux-gnu" "$extra/usr/lib64"
  ln -s usr/lib "$extra/lib"; ln -s usr/lib64 "$extra/lib64"; ln -s usr/sbin "$extra/sbin"
  cp "$rootfs/usr/sbin/xtables-nft-multi" "$extra/usr/sbin/"
  for n in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
    ln -s xtables-nft-multi "$extra/usr/sbin/$n"
  done
  cp -r "$rootfs/usr/lib/x86_64-linux-gnu/xtables" "$extra/usr/lib/x86_64-linux-gnu/"
  { chroot "$rootfs" ldd /usr/sbin/xtables-nft-multi
    for so in "$rootfs"/usr/lib/x86_64-linux-gnu/xtables/*.so; do chroot "$rootfs" ldd "${so#"$rootfs"}"; done
  } | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u | while read -r lib; do
    cp -L "$rootfs$lib" "$extra$lib"
  done

  say "packing the images kubeadm runs"
  nice -n 19 go run ./hack/offline/nodeimage --out "$rootfs/kind/images/images.tar" --kube-version "$KUBE_VERSION" \
    --kube-dir "$kube_dir" --etcd "$kube_dir/etcd" --etcd-tag "$ETCD_TAG" --coredns "$nodebin/coredns" \
    --coredns-tag "$COREDNS_VERSION" --pause "$work/pause" --pause-tag "$PAUSE_TAG" --kube-proxy-extra "$extra" >&2

  tar -C "$rootfs" --numeric-owner -cf "$tarfile.tmp" .
  mv "$tarfile.tmp" "$tarfile"
  rm -rf "$work"
  trap - EXIT
  # Older node tars of this cache are of other inputs: remove them.
  find "$cache" -maxdepth 1 -name 'node-*.tar' ! -name "$(basename "$tarfile")" -delete
  say "built $tarfile in $((SECONDS - start)) s"
fi
if $tar_only; then
  echo "$tarfile"
  exit 0
fi

# docker load of a docker-archive whose one layer is the rootfs tar (uncompressed): unlike
# `docker import`, it can set the stop signal systemd wants.
say "loading $tarfile into Docker as $ref"
load=$(mktemp -d "$cache/load.XXXXXX")
trap 'rm -rf "$load"' EXIT
ln "$tarfile" "$load/layer.tar" 2>/dev/null || ln -s "$tarfile" "$load/layer.tar"
diffid=sha256:$(sha256sum "$tarfile" | cut -d' ' -f1)
cat >"$load/config.json" <<JSON
{"architecture":"amd64","os":"linux","created":"1970-01-01T00:00:00Z",
 "config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","container=docker"],
  "Entrypoint":["/usr/local/bin/entrypoint","/sbin/init"],"StopSignal":"SIGRTMIN+3",
  "Labels":{"dev.configbundle.kind-node.inputs":"$inputs"}},
 "rootfs":{"type":"layers","diff_ids":["$diffid"]},"history":[{"created_by":"hack/offline/nodeimage.sh"}]}
JSON
printf '[{"Config":"config.json","RepoTags":["%s"],"Layers":["layer.tar"]}]\n' "$ref" >"$load/manifest.json"
tar -C "$load" --dereference -cf - manifest.json config.json layer.tar | docker load >/dev/null
rm -rf "$load"
trap - EXIT
# Node images of other inputs, which this script loaded before: removed from the daemon.
docker images configbundle.dev/kind-node --format '{{.Repository}}:{{.Tag}}' | { grep -vxF "$ref" || true; } |
  while read -r old; do docker rmi "$old" >/dev/null 2>&1 || true; done
echo "$ref"
