#!/usr/bin/env bash
# Builds the rlgpt images with docker (when its daemon answers) or podman, from deploy/docker/Dockerfile.
#
#   deploy/scripts/images.sh                  # the CPU images: env-server learner planner critic llm
#   deploy/scripts/images.sh --cuda           # + rlgpt/learner-cuda (CUDA torch; needs a registry and GBs)
#   deploy/scripts/images.sh --minedojo       # + rlgpt/env-server-minedojo (Java 8, Minecraft built in; ~30 min)
#   deploy/scripts/images.sh --vllm           # + rlgpt/llm-vllm (vLLM on CPU with Gemma 3 270M; several GB)
#   deploy/scripts/images.sh --only planner,critic
#
# Environment:
#   BASE_IMAGE          base of the CPU images (default python:3.11-slim-bookworm; images-local.sh passes a
#                       debootstrap Debian without Python, the Dockerfile installs python3 then)
#   CUDA=1, MINEDOJO=1, VLLM=1   the same as --cuda, --minedojo, --vllm (vLLM on a GPU: the official
#                       vllm/vllm-openai image, see the llm-vllm stage of the Dockerfile)
#   CUDA_BASE_IMAGE     default nvidia/cuda:12.4.1-runtime-ubuntu22.04 (with CUDA_PYTHON=python3.11 from apt);
#                       python:3.11-slim-bookworm works too: torch's Linux wheels carry the CUDA runtime
#   CUDA_TORCH_SPEC / CUDA_TORCH_INDEX_URL   default torch==2.13.0 from PyPI (its Linux wheel is the CUDA build)
#   TORCH_INDEX_URL     extra index for the CPU torch (default the PyTorch CPU index; "" = PyPI + find-links only)
#   CONTAINER_ENGINE    docker or podman; IMAGE_PREFIX (rlgpt), IMAGE_TAG (dev)
#   EXTRA_BUILD_ARGS    more flags for every build
# With podman, the host's CA bundle and the wheel directories that exist (/opt/wheels, deploy/.build/wheels) are
# mounted into the build (never copied into an image) and passed to pip as PIP_CERT_FILE / FIND_LINKS.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CUDA=${CUDA:-}
MINEDOJO=${MINEDOJO:-}
VLLM=${VLLM:-}
only=""
while (($#)); do
  case $1 in
    --cuda) CUDA=1 ;;
    --minedojo) MINEDOJO=1 ;;
    --vllm) VLLM=1 ;;
    --only) only=$2; shift ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
  shift
done

ENGINE=$(container_engine)
BASE_IMAGE=${BASE_IMAGE:-python:3.11-slim-bookworm}
CUDA_BASE_IMAGE=${CUDA_BASE_IMAGE:-nvidia/cuda:12.4.1-runtime-ubuntu22.04}
CUDA_PYTHON=${CUDA_PYTHON:-python3.11}
CUDA_TORCH_SPEC=${CUDA_TORCH_SPEC:-torch==2.13.0}
CUDA_TORCH_INDEX_URL=${CUDA_TORCH_INDEX_URL:-https://pypi.org/simple}
LOG_DIR=$BUILD_DIR/logs
mkdir -p "$LOG_DIR"

common=(--build-arg "BASE_IMAGE=$BASE_IMAGE")
[[ -n ${TORCH_INDEX_URL+x} ]] && common+=(--build-arg "TORCH_INDEX_URL=$TORCH_INDEX_URL")
if [[ $ENGINE == podman ]]; then
  podman_host_args
  # docker format: OCI images drop HEALTHCHECK.
  common+=(--format docker "${PODMAN_ARGS[@]}")
  ca=$(host_ca_bundle)
  [[ -n $ca ]] && common+=(-v "$ca:/etc/host-ca.crt:ro" --build-arg PIP_CERT_FILE=/etc/host-ca.crt)
  links=()
  [[ -d /opt/wheels ]] && { common+=(-v /opt/wheels:/wheels/host:ro); links+=(/wheels/host); }
  [[ -d $BUILD_DIR/wheels ]] && { common+=(-v "$BUILD_DIR/wheels:/wheels/local:ro"); links+=(/wheels/local); }
  ((${#links[@]})) && common+=(--build-arg "FIND_LINKS=${links[*]}")
else
  export DOCKER_BUILDKIT=1
fi
# shellcheck disable=SC2206  # the user's extra flags are split on purpose
[[ -n ${EXTRA_BUILD_ARGS:-} ]] && common+=($EXTRA_BUILD_ARGS)

# image name | Dockerfile target | file and build args (split on spaces)
plan=()
for name in "${CPU_IMAGES[@]}"; do plan+=("$name|$name|-f $DOCKERFILE"); done
[[ -n $CUDA ]] && plan+=("learner-cuda|learner|-f $DOCKERFILE --build-arg BASE_IMAGE=$CUDA_BASE_IMAGE --build-arg PYTHON=$CUDA_PYTHON \
--build-arg TORCH_SPEC=$CUDA_TORCH_SPEC --build-arg TORCH_INDEX_URL=$CUDA_TORCH_INDEX_URL --build-arg LEARNER_DEVICE=cuda")
[[ -n $VLLM ]] && plan+=("llm-vllm|llm-vllm|-f $DOCKERFILE")
[[ -n $MINEDOJO ]] && plan+=("env-server-minedojo|env-server-minedojo|-f $DOCKERFILE.minedojo")

results=()
total=$(now)
log "engine $ENGINE, base $BASE_IMAGE, logs in $LOG_DIR"
for entry in "${plan[@]}"; do
  IFS='|' read -r name target extra <<<"$entry"
  if [[ -n $only && ,$only, != *,$name,* ]]; then continue; fi
  ref=$(image_ref "$name")
  # shellcheck disable=SC2206
  extra_args=($extra)
  start=$(now)
  log "building $ref (target $target)"
  if ! "$ENGINE" build "${common[@]}" "${extra_args[@]}" --target "$target" -t "$ref" "$RLGPT_ROOT" \
    >"$LOG_DIR/$name.log" 2>&1; then
    tail -40 "$LOG_DIR/$name.log" >&2
    die "building $ref failed (log: $LOG_DIR/$name.log)"
  fi
  took=$(since "$start")
  size=$(image_size "$ref")
  log "built $ref in $took, $size"
  results+=("$(printf '%-34s %10s %10s' "$ref" "$took" "$size")")
done
printf '\n%-34s %10s %10s\n' image build size
printf '%s\n' "${results[@]}"
printf 'all builds: %s\n' "$(since "$total")"
