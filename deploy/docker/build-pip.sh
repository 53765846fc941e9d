#!/bin/sh
# pip for image builds (`build-pip install ...`, `build-pip wheel ...`): no cache, no prompts, plus what the
# build was given as build args:
#   PIP_CERT_FILE  a CA bundle mounted at build time only (podman build -v HOST:PATH:ro); never copied into an image
#   FIND_LINKS     space-separated directories of wheels mounted at build time (torch CPU, llama-cpp-python, models)
# Constraints are the caller's (-c constraints.txt in every install).
set -eu
cmd=$1
shift
if [ -n "${PIP_CERT_FILE:-}" ]; then
  if [ ! -f "$PIP_CERT_FILE" ]; then
    echo "build-pip: PIP_CERT_FILE=$PIP_CERT_FILE is not mounted into the build" >&2
    exit 2
  fi
  set -- --cert "$PIP_CERT_FILE" "$@"
fi
for dir in ${FIND_LINKS:-}; do
  if [ -d "$dir" ]; then
    set -- --find-links "$dir" "$@"
  else
    echo "build-pip: find-links directory $dir is not mounted; skipped" >&2
  fi
done
exec python -m pip "$cmd" --no-cache-dir --disable-pip-version-check --no-input --progress-bar off "$@"
