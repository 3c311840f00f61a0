#!/usr/bin/env bash
# down.sh deletes the kind clusters of up.sh: the hub and every member (`make kind-down`). The
# members need no unregistering first: their clusters go away whole. Clusters that do not exist
# are skipped. Then, with the offline node image (the default as root on Linux), once no kind
# cluster is left, it undoes what up.sh started on this machine: the cgroup mounts it made and the
# Docker daemon of its own (common.sh's machine_down). Settings (HUB, MEMBERS): see common.sh.
set -euo pipefail

# shellcheck source=hack/kind/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

use_own_docker
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

if [ -z "$(kind get clusters 2>/dev/null)" ]; then
  machine_down
else
  echo "other kind clusters remain ($(kind get clusters 2>/dev/null | tr '\n' ' ')): leaving Docker and the cgroup mounts as they are"
fi
