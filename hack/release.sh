#!/usr/bin/env bash
# release.sh writes a release of ConfigBundle Hub into dist/ (make release VERSION=vX.Y.Z):
#
#   hub-<os>-<arch>          the hub binary (CLI and controller), static, for each of PLATFORMS
#   hub-image-<version>.tar  the image ghcr.io/configbundle/hub:<version> (linux/amd64), a
#                            docker-archive for docker/ctr/kind load (hack/image, no Docker needed)
#   configbundle-hub-<version without v>.tgz
#                            the Helm chart, its version and appVersion the release's
#   SHA256SUMS               the checksums of all of the above
#
# Each binary and the image say the version (hub version, the configbundle_build_info metric); the
# chart's appVersion is the image tag, so that the chart installs the image of its release.
#
# Environment:
#   VERSION    the release version, vMAJOR.MINOR.PATCH with an optional -prerelease (required)
#   PLATFORMS  os/arch pairs to build (default "linux/amd64 linux/arm64 darwin/amd64 darwin/arm64")
#   DIST       output directory (default dist), emptied first
#   IMG_REPO   image repository (default ghcr.io/configbundle/hub)
set -euo pipefail

VERSION=${VERSION:-}
PLATFORMS=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
DIST=${DIST:-dist}
IMG_REPO=${IMG_REPO:-ghcr.io/configbundle/hub}
GO=${GO:-go}

if ! [[ $VERSION =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "release: VERSION=\"$VERSION\" is not a release version: want vMAJOR.MINOR.PATCH, such as v0.9.0 (make release VERSION=v0.9.0)" >&2
  exit 2
fi
commit=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  commit="$commit-dirty"
  echo "release: the work tree has uncommitted changes; the artefacts say $commit" >&2
fi
ldflags="-s -w -X configbundle.dev/hub/pkg/version.Version=$VERSION -X configbundle.dev/hub/pkg/version.GitCommit=$commit"

rm -rf "$DIST"
mkdir -p "$DIST"
for platform in $PLATFORMS; do
  os=${platform%/*} arch=${platform#*/}
  echo "release: hub-$os-$arch" >&2
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build -trimpath -ldflags "$ldflags" -o "$DIST/hub-$os-$arch" ./hub
done

linux_amd64="$DIST/hub-linux-amd64"
if [ ! -x "$linux_amd64" ]; then # the image's binary, though PLATFORMS left it out
  linux_amd64=$(mktemp -d)/hub
  CGO_ENABLED=0 GOOS=linux GOARCH=amd64 "$GO" build -trimpath -ldflags "$ldflags" -o "$linux_amd64" ./hub
fi
echo "release: hub-image-$VERSION.tar ($IMG_REPO:$VERSION)" >&2
"$GO" run ./hack/image --image "$IMG_REPO:$VERSION" --binary "$linux_amd64" --arch amd64 \
  --version "$VERSION" --git-commit "$commit" --output "$DIST/hub-image-$VERSION.tar"

echo "release: configbundle-hub-${VERSION#v}.tgz" >&2
helm=$(TESTBIN_QUIET=1 bash hack/offline/helmbin.sh)
"$helm" package config/chart/configbundle-hub --version "${VERSION#v}" --app-version "$VERSION" --destination "$DIST" >/dev/null

(cd "$DIST" && sha256sum -- * >SHA256SUMS)
echo "release: $VERSION written to $DIST/:" >&2
ls -l "$DIST" >&2
