# Shared helpers of the image scripts (sourced, not run): paths, the container engine, host packages, timings.
# shellcheck shell=bash

RLGPT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$RLGPT_ROOT/deploy/.build}
DOCKERFILE=$RLGPT_ROOT/deploy/docker/Dockerfile
IMAGE_PREFIX=${IMAGE_PREFIX:-rlgpt}
IMAGE_TAG=${IMAGE_TAG:-dev}
# The CPU services and the LLM server: image name -> Dockerfile target.
CPU_IMAGES=(env-server learner planner critic llm)

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Seconds since the epoch with decimals, and "12.3 s" since a start taken with it.
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

# docker when its daemon answers, else podman (a docker CLI without a daemon, as on this machine, is skipped).
# CONTAINER_ENGINE=docker|podman forces one.
container_engine() {
  if [[ -n ${CONTAINER_ENGINE:-} ]]; then echo "$CONTAINER_ENGINE"; return; fi
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then echo docker; return; fi
  if command -v podman >/dev/null 2>&1; then echo podman; return; fi
  die "neither a running docker nor podman was found (make images-local installs podman on Debian)"
}

# What podman needs on this kind of host: runc (crun fails on hybrid cgroups) and explicit ulimits (podman's
# default ulimits exceed what root may set here; passing one --ulimit drops the defaults, so both are passed).
# PODMAN_ARGS gets the flags for `podman run` and `podman build`; containers that take no such flags (a pod's
# infra container, `podman play kube`) get the same settings from a containers.conf exported as CONTAINERS_CONF
# (unless one is set already). RLGPT_PODMAN_ARGS="" (or other flags) turns both off for hosts that need none.
podman_host_args() {
  if [[ -n ${RLGPT_PODMAN_ARGS+x} ]]; then
    # shellcheck disable=SC2206  # word splitting of the user's flags is intended
    PODMAN_ARGS=($RLGPT_PODMAN_ARGS)
    return
  fi
  PODMAN_ARGS=(--ulimit nofile=20000:20000 --ulimit nproc=32768:32768)
  local runtime=""
  if command -v runc >/dev/null 2>&1; then
    PODMAN_ARGS=(--runtime runc "${PODMAN_ARGS[@]}")
    runtime='runtime = "runc"'
  fi
  if [[ -z ${CONTAINERS_CONF:-} ]]; then
    mkdir -p "$BUILD_DIR"
    printf '[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n\n[engine]\n%s\n' \
      "$runtime" >"$BUILD_DIR/containers.conf"
    export CONTAINERS_CONF=$BUILD_DIR/containers.conf
  fi
}

_sudo() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

# Installs the Debian packages that are missing (podman and friends, debootstrap); needs root or sudo.
ensure_host_packages() {
  local pkg missing=()
  for pkg in podman buildah runc uidmap slirp4netns fuse-overlayfs catatonit debootstrap; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them"
  log "installing Debian packages: ${missing[*]}"
  _sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive _sudo apt-get install -y -qq -o DPkg::Lock::Timeout=600 \
    --no-install-recommends "${missing[@]}"
}

# The Debian mirror this machine's apt already uses (deb822 .sources or one-line .list), for debootstrap.
apt_mirror() {
  local files=() f uri
  [[ -f /etc/apt/sources.list ]] && files+=(/etc/apt/sources.list)
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do [[ -f $f ]] && files+=("$f"); done
  ((${#files[@]})) || { echo "http://deb.debian.org/debian"; return; }
  uri=$(awk '
    /^[[:space:]]*#/ { next }
    /^deb[[:space:]]/ { for (i = 2; i <= NF; i++) if ($i ~ /^(https?|file):/) { u = $i; break }
                        if (u !~ /security/ && $0 ~ /[[:space:]]bookworm[[:space:]]/) { print u; exit } u = ""; next }
    /^URIs:/ { u = $2 }
    /^Suites:/ { if (u != "" && u !~ /security/ && $0 ~ /[[:space:]]bookworm([[:space:]]|$)/) { print u; exit } }
    /^[[:space:]]*$/ { u = "" }
  ' "${files[@]}")
  echo "${uri:-http://deb.debian.org/debian}"
}

# A CA bundle for pip inside `podman build`, mounted at build time only (never copied into an image).
host_ca_bundle() {
  local f
  for f in "${PIP_CERT:-}" /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt; do
    [[ -n $f && -f $f ]] && { echo "$f"; return; }
  done
}

image_ref() { echo "$IMAGE_PREFIX/$1:$IMAGE_TAG"; }

# "123 MB" for an image, as the engine reports it.
image_size() {
  "$ENGINE" image inspect --format '{{.Size}}' "$1" 2>/dev/null | awk '{ printf "%.0f MB", $1 / 1000000 }'
}
