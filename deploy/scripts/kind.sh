#!/usr/bin/env bash
# A local Kubernetes cluster with kind for the rlgpt manifests (deploy/k8s/overlays/kind).
#   kind.sh up CLUSTER      create the cluster (deploy/kind/cluster.yaml) and load the rlgpt images
#   kind.sh deploy CLUSTER  apply the kind overlay and wait for every rollout
#   kind.sh down CLUSTER    delete the cluster
# Images come from `make images` (docker, or podman: then kind runs with KIND_EXPERIMENTAL_PROVIDER=podman).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
NAMESPACE=rlgpt
IMAGES=(rlgpt/env-server:dev rlgpt/planner:dev rlgpt/learner:dev rlgpt/critic:dev rlgpt/llm:dev)
ROLLOUT_TIMEOUT=${ROLLOUT_TIMEOUT:-900s}  # first start: model load in the LLM pod, imports everywhere

die() { echo "kind.sh: $*" >&2; exit 1; }

usage() { sed -n '2,6p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

need() {
  command -v "$1" >/dev/null 2>&1 || die "'$1' is not installed. $2"
}

# docker when its daemon answers, else podman (kind's experimental podman provider).
engine() {
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    echo docker
  elif command -v podman >/dev/null 2>&1; then
    echo podman
  else
    die "neither docker (with a running daemon) nor podman is available; kind runs its nodes as containers"
  fi
}

need_kind() {
  need kind "Install kind (https://kind.sigs.k8s.io/docs/user/quick-start/#installation), e.g. \
'go install sigs.k8s.io/kind@v0.24.0' or its release binary; its node image is pulled from a registry, \
so this machine needs network access."
  local engine
  engine=$(engine) || exit 1
  if [[ $engine == podman ]]; then export KIND_EXPERIMENTAL_PROVIDER=podman; fi
}

load_images() {
  local cluster=$1 engine image archive
  engine=$(engine) || exit 1
  for image in "${IMAGES[@]}"; do
    "$engine" image inspect "$image" >/dev/null 2>&1 || die "image $image is missing: run 'make images' first"
  done
  if [[ $engine == docker ]]; then
    kind load docker-image --name "$cluster" "${IMAGES[@]}"
    return
  fi
  # podman names local images localhost/<name>; save them as docker.io/<name>, the name the
  # manifests' "rlgpt/<name>" resolves to inside the nodes.
  archive=$(mktemp -d)
  trap "rm -rf '$archive'" EXIT
  for image in "${IMAGES[@]}"; do
    podman tag "$image" "docker.io/$image"
    podman save --format docker-archive -o "$archive/image.tar" "docker.io/$image"
    kind load image-archive --name "$cluster" "$archive/image.tar"
    rm -f "$archive/image.tar"
  done
}

up() {
  local cluster=$1
  need_kind
  if kind get clusters 2>/dev/null | grep -qx "$cluster"; then
    echo "kind cluster $cluster exists already; loading images again"
  else
    kind create cluster --name "$cluster" --config "$ROOT/deploy/kind/cluster.yaml" --wait 120s
  fi
  load_images "$cluster"
  echo "cluster $cluster is up; next: make deploy"
}

deploy() {
  local cluster=$1 context="kind-$1" deployment
  need kubectl "Run 'make setup' (it installs kubectl)."
  kubectl config get-contexts "$context" >/dev/null 2>&1 \
    || die "no kubectl context $context: create the cluster first (make kind-up)"
  kubectl --context "$context" apply -k "$ROOT/deploy/k8s/overlays/kind"
  for deployment in $(kubectl --context "$context" -n "$NAMESPACE" get deployments -o name); do
    kubectl --context "$context" -n "$NAMESPACE" rollout status "$deployment" --timeout "$ROLLOUT_TIMEOUT"
  done
  echo "deployed. Planner: rlgpt run --planner 127.0.0.1:50052   Grafana: http://127.0.0.1:3000"
}

down() {
  local cluster=$1
  need_kind
  kind delete cluster --name "$cluster"
}

(($# == 2)) || usage
case $1 in
  up) up "$2" ;;
  deploy) deploy "$2" ;;
  down) down "$2" ;;
  *) usage ;;
esac
