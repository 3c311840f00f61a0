#!/usr/bin/env bash
# up.sh brings up ConfigBundle Hub on kind: a hub cluster running the hub image built from this
# checkout (config/default), and member clusters registered with it and holding config/samples.
# `make kind-up` runs it; docs/how-to/kind.md describes what it does. Running it again reuses the
# clusters, rebuilds and reloads the image, restarts the hub and registers the members again
# (which rotates their tokens).
#
# Needs: Docker, go, make; kind and kubectl are built when missing. With the offline node image
# (KIND_NODE_IMAGE=offline, the default as root on Linux) it also starts what this machine needs
# (a Docker daemon that runs privileged containers, the cgroup v1 mounts: common.sh's machine_up)
# and builds the node image (hack/offline/nodeimage.sh). Settings (HUB, MEMBERS, IMG,
# KIND_NODE_IMAGE, WAIT_TIMEOUT): see common.sh.
set -euo pipefail

# shellcheck source=hack/kind/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

need go "Install Go (the version of go.mod's go line)."
need make "Install GNU make."
check_settings
machine_up
need_docker
need_kind
need_kubectl
kind_config=()
if [ "$KIND_NODE_IMAGE" = offline ]; then
  log "The kind node image (built offline, or reused)"
  KIND_NODE_IMAGE=$(bash "$REPO_ROOT/hack/offline/nodeimage.sh")
  kind_config=(--config "$REPO_ROOT/hack/kind/cluster.yaml")
elif [ "$KIND_NODE_IMAGE" = kind ]; then
  KIND_NODE_IMAGE=
fi
[[ $IMG != *@* ]] || die "IMG=$IMG: give a name:tag, not a digest (the image is built and loaded, never pulled)."

# The image's name and tag, as kustomize's images: wants them; a port in the registry is no tag.
if [[ ${IMG##*/} == *:* ]]; then
  img_name=${IMG%:*} img_tag=${IMG##*:}
else
  img_name=$IMG img_tag=latest
fi

# Kubeconfigs with credentials and the overlay go to a private directory, removed on exit.
work=$(mktemp -d "${TMPDIR:-/tmp}/configbundle-kind.XXXXXX")
work=$(cd "$work" && pwd -P)
trap 'rm -rf "$work"' EXIT
hub_ctx=$(context "$HUB")

log "Clusters: hub $HUB, members ${MEMBER_LIST[*]}"
for name in "$HUB" "${MEMBER_LIST[@]}"; do
  if cluster_exists "$name"; then
    echo "kind cluster $name exists: reusing it"
    kind export kubeconfig --name "$name" # restores the context kind-$name if it was removed
  else
    args=(create cluster --name "$name" --wait "$WAIT_TIMEOUT" "${kind_config[@]}")
    if [ -n "$KIND_NODE_IMAGE" ]; then
      args+=(--image "$KIND_NODE_IMAGE")
    fi
    kind "${args[@]}"
  fi
done

log "Building $IMG"
# Without Docker, as `make image` does (hack/image, docs/how-to/build-the-image.md): no base image to pull.
(cd "$REPO_ROOT" && go run ./hack/image --image "$IMG" --output "$work/hub-image.tar")

log "Loading $IMG into $HUB"
kind load image-archive "$work/hub-image.tar" --name "$HUB"

log "Deploying config/default to $HUB with image $IMG"
# A temporary overlay: config/default with the image replaced and never pulled (the kubelet
# would try to pull a :latest tag). kustomize takes no absolute path to a base, so the base is
# named relative to the overlay: up to / and down again.
overlay=$work/overlay
mkdir "$overlay"
slashes=${overlay//[^\/]/}
up=
for ((i = 0; i < ${#slashes}; i++)); do up+=../; done
cat >"$overlay/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- '${up}${REPO_ROOT#/}/config/default'
images:
- name: $BASE_IMAGE
  newName: '$img_name'
  newTag: '$img_tag'
patches:
- target: {group: apps, kind: Deployment, name: $HUB_DEPLOYMENT}
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/imagePullPolicy
      value: IfNotPresent
EOF
existed=false
if kubectl --context "$hub_ctx" -n "$HUB_NAMESPACE" get deployment "$HUB_DEPLOYMENT" >/dev/null 2>&1; then
  existed=true
fi
kubectl --context "$hub_ctx" apply --server-side --field-manager=configbundle-kind -k "$overlay"
if $existed; then
  # The same tag may now name a new image: start pods from it.
  kubectl --context "$hub_ctx" -n "$HUB_NAMESPACE" rollout restart deployment "$HUB_DEPLOYMENT"
fi
if ! kubectl --context "$hub_ctx" -n "$HUB_NAMESPACE" rollout status deployment "$HUB_DEPLOYMENT" --timeout "$WAIT_TIMEOUT"; then
  kubectl --context "$hub_ctx" -n "$HUB_NAMESPACE" get pods -o wide >&2 || true
  kubectl --context "$hub_ctx" -n "$HUB_NAMESPACE" logs "deployment/$HUB_DEPLOYMENT" --tail 50 >&2 || true
  die "the hub Deployment did not roll out within $WAIT_TIMEOUT (pods and logs above)."
fi

log "Registering the members with the hub"
(cd "$REPO_ROOT" && go build -o "$work/hub" ./hub)
kind get kubeconfig --name "$HUB" >"$work/hub.kubeconfig"
for m in "${MEMBER_LIST[@]}"; do
  kind get kubeconfig --name "$m" >"$work/$m.kubeconfig"
  # The hub's pods reach the member on the kind Docker network, by its node container's name.
  kind get kubeconfig --internal --name "$m" >"$work/$m.internal.kubeconfig"
  server=$(kubectl config view --kubeconfig "$work/$m.internal.kubeconfig" -o jsonpath='{.clusters[0].cluster.server}')
  [ -n "$server" ] || die "found no server in the internal kubeconfig of $m."
  "$work/hub" register "$m" \
    --member-kubeconfig "$work/$m.kubeconfig" \
    --hub-kubeconfig "$work/hub.kubeconfig" \
    --server "$server"
done
for m in "${MEMBER_LIST[@]}"; do
  wait_for_object "$hub_ctx" "membercluster/$m"
  if ! kubectl --context "$hub_ctx" wait --for=condition=Ready "membercluster/$m" --timeout "$WAIT_TIMEOUT"; then
    kubectl --context "$hub_ctx" get memberclusters >&2 || true
    die "member $m did not become Ready within $WAIT_TIMEOUT: its REASON above says why (docs/how-to/troubleshooting.md lists the reasons)."
  fi
done

log "Applying config/samples to every member"
for m in "${MEMBER_LIST[@]}"; do
  # The hub installs the ConfigBundle CRD in a member when it connects.
  wait_for_object "$(context "$m")" "crd/$BUNDLE_CRD"
  kubectl --context "$(context "$m")" wait --for=condition=Established "crd/$BUNDLE_CRD" --timeout "$WAIT_TIMEOUT"
  kubectl --context "$(context "$m")" apply -k "$REPO_ROOT/config/samples"
done

log "Waiting for the hub to count every bundle Ready"
# The Fleet's Ready condition says that no bundle failed, not that all are reconciled yet: wait
# for the counts too.
total=0
for m in "${MEMBER_LIST[@]}"; do
  n=$(kubectl --context "$(context "$m")" get configbundles --all-namespaces --no-headers | wc -l)
  n=$((n + 0))
  total=$((total + n))
  if ! kubectl --context "$hub_ctx" wait --for=jsonpath='{.status.bundles.ready}'="$n" "membercluster/$m" --timeout "$WAIT_TIMEOUT"; then
    kubectl --context "$(context "$m")" get configbundles --all-namespaces >&2 || true
    die "the hub did not report the $n bundles of $m Ready within $WAIT_TIMEOUT (their READY and REASON above)."
  fi
done
wait_for_object "$hub_ctx" fleet/default
if ! kubectl --context "$hub_ctx" wait --for=jsonpath='{.status.bundles.ready}'="$total" fleet/default --timeout "$WAIT_TIMEOUT" ||
  ! kubectl --context "$hub_ctx" wait --for=condition=Ready fleet/default --timeout "$WAIT_TIMEOUT"; then
  kubectl --context "$hub_ctx" get memberclusters,fleet >&2 || true
  die "the Fleet did not become Ready with $total bundles within $WAIT_TIMEOUT."
fi
kubectl config use-context "$hub_ctx" >/dev/null

log "kubectl get memberclusters"
kubectl --context "$hub_ctx" get memberclusters
log "kubectl get fleet"
kubectl --context "$hub_ctx" get fleet

first=${MEMBER_LIST[0]}
cat <<EOF

ConfigBundle Hub runs in kind cluster $HUB (kubectl context $hub_ctx, now the current one);
the members are ${MEMBER_LIST[*]} (contexts kind-<name>). Try a heal:

  kubectl --context kind-$first patch configmap greeting --type merge -p '{"data":{"message":"tampered"}}'
  kubectl --context kind-$first get configmap greeting -o jsonpath='{.data.message}{"\n"}'
  kubectl get memberclusters        # HEALS counts it

Hub logs: kubectl -n $HUB_NAMESPACE logs deployment/$HUB_DEPLOYMENT
Tear down: make kind-down
EOF
if [ "${DOCKER_HOST:-}" = unix:///run/configbundle-kind-docker/docker.sock ]; then
  cat <<EOF

The clusters run on a Docker daemon that hack/offline/docker.sh started; for docker and kind commands:

  export DOCKER_HOST=$DOCKER_HOST
EOF
fi
