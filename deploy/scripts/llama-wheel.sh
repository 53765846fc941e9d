#!/usr/bin/env bash
# Prints the path of a portable llama-cpp-python wheel (the version constraints.txt pins), building it once when
# absent (~5-10 min on 2 cores). Used by `make setup` and images-local.sh.
#
#   deploy/scripts/llama-wheel.sh PYTHON            # a venv's python with pip
#
# Portable: GGML_NATIVE=OFF with AVX2/FMA/F16C, the x86-64 baseline llama.cpp's own CPU builds use. pip's default
# build is native (-march=native), and a native build on a Xeon with AMX segfaulted on its first token in this
# project's VMs (the guest lists AMX but cannot use it), in the embedded server and in plain llama_cpp.Llama alike.
# pip's wheel cache cannot tell the two builds apart, so the portable one lives in a directory of its own:
# RLGPT_WHEELS (default ~/.cache/rlgpt/wheels), kept across clones on a machine.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PY=${1:?usage: llama-wheel.sh PYTHON}
WHEELS=${RLGPT_WHEELS:-$HOME/.cache/rlgpt/wheels}
version=$(sed -n 's/^llama-cpp-python==\([0-9.]*\).*/\1/p' "$RLGPT_ROOT/constraints.txt")
[[ -n $version ]] || die "constraints.txt pins no llama-cpp-python==<version>"
mkdir -p "$WHEELS"
wheel=$(compgen -G "$WHEELS/llama_cpp_python-$version-*.whl" | head -1 || true)
if [[ -z $wheel ]]; then
  log "building a portable llama-cpp-python $version wheel into $WHEELS (once per machine, ~5-10 min on 2 cores)"
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \
    "$PY" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-cache-dir -w "$WHEELS" \
    "llama-cpp-python==$version" >&2
  wheel=$(compgen -G "$WHEELS/llama_cpp_python-$version-*.whl" | head -1 || true)
  [[ -n $wheel ]] || die "pip wheel llama-cpp-python==$version left no wheel in $WHEELS"
fi
echo "$wheel"
