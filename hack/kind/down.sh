#!/usr/bin/env bash
# down.sh deletes the kind clusters of up.sh: the hub and every member (`make kind-down`). The
# members need no unregistering first: their clusters go away whole. Clusters that do not exist
# are skipped. Settings (HUB, MEMBERS): see common.sh.
set -euo pipefail

# shellcheck source=hack/kind/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

need_docker
need_kind
check_settings

for name in "${MEMBER_LIST[@]}" "$HUB"; do
  if cluster_exists "$name"; then
    log "Deleting kind cluster $name"
    kind delete cluster --name "$name"
  else
    echo "kind cluster $name does not exist: nothing to delete"
  fi
done
