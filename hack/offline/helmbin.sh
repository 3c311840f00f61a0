#!/usr/bin/env bash
# helmbin.sh builds the helm binary the chart tests run (helm lint, helm template) from the Go
# module proxy, once, into a cache outside the checkout, and prints its path.
#
# helm is deliberately not a dependency of the hub's go.mod: it would drag a few hundred modules
# into the hub's build graph for a test tool. Instead it is built, like the control-plane binaries
# of testbin.sh, from a throwaway module that requires helm.sh/helm/v3 at the pinned version (Go's
# minimal version selection resolves the rest). A cold build takes about two minutes on two cores
# (see the report printed on stderr); afterwards the script returns at once.
#
# Environment:
#   HELM_VERSION       helm.sh/helm/v3 version (default v3.22.0)
#   HELMBIN_DIR        where the binary goes
#                      (default ${XDG_CACHE_HOME:-$HOME/.cache}/configbundle-hub/helm/$HELM_VERSION)
#   TESTBIN_QUIET=1    no progress lines on stderr
set -euo pipefail

HELM_VERSION=${HELM_VERSION:-v3.22.0}
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/configbundle-hub
HELMBIN_DIR=${HELMBIN_DIR:-$cache_root/helm/$HELM_VERSION}

say() { [ "${TESTBIN_QUIET:-}" = 1 ] || printf '%s\n' "$*" >&2; }

mkdir -p "$HELMBIN_DIR"
exec 9>"$HELMBIN_DIR.lock" # one build at a time: a second caller waits for the first
flock 9
if [ ! -x "$HELMBIN_DIR/helm" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (
    cd "$work"
    go mod init configbundle.dev/helmbin >/dev/null 2>&1
    go mod edit -require="helm.sh/helm/v3@$HELM_VERSION"
    say "building helm $HELM_VERSION from the Go module proxy (about two minutes the first time)"
    start=$SECONDS
    # Stamp the version as helm's own release build does, so that `helm version` tells the truth.
    ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
    CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags="$ldflags" -o "$HELMBIN_DIR/helm.tmp" helm.sh/helm/v3/cmd/helm
    mv "$HELMBIN_DIR/helm.tmp" "$HELMBIN_DIR/helm"
    say "built helm $HELM_VERSION in $((SECONDS - start)) s"
  )
fi
echo "$HELMBIN_DIR/helm"
