#!/usr/bin/env bash
# Sets up a Debian 12 machine for Kiln and runs one of its jobs:
#   deploy/bootstrap.sh demo   install deps, build, run the end-to-end demo
#   deploy/bootstrap.sh test   install deps, build, run the whole test suite (ctest)
#   deploy/bootstrap.sh build  install deps and build only
# Idempotent and non-interactive; needs root (or sudo) for apt-get only.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${KILN_BUILD_DIR:-$ROOT/build}

# Every Debian package a build needs, and nothing more: docs/dependencies.md says
# why each is here and what is lost without the optional ones. Installed with
# --no-install-recommends, so a package another one only *recommends* (OpenCL for
# oneDNN's CMake config) must be listed here itself.
PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libsqlite3-dev libssl-dev libcli11-dev
  libxgboost-dev libgtest-dev libgmock-dev llvm-19-dev clang-19 libonnx-dev libonnx-testdata
  libdnnl-dev ocl-icd-opencl-dev opencl-headers
  python3 python3-venv python3-pip
  openssl     # the TLS tests make their certificates with it
  prometheus  # promtool: DeployCheckTest.prometheus checks deploy/prometheus and the dashboard's queries
  libclang-rt-19-dev  # libFuzzer and the sanitizer runtimes: tests/fuzz/run_fuzzers.sh (the CI fuzz step)
)
# Test-only Python tools: models are exported with PyPI's torch/torchvision
# (timm and transformers for the corpus subset) and checked against ONNX Runtime;
# grpcio, grpcio-tools (stubs from proto/) and pytest build and test python/;
# nvidia-cuda-nvcc-cu12 brings ptxas, which the GPU code generator's tests
# assemble every kernel's PTX with (no GPU needed; Debian has no CUDA 12).
PY_PACKAGES=(torch torchvision onnx onnxscript numpy onnxruntime timm transformers grpcio grpcio-tools pytest
             nvidia-cuda-nvcc-cu12)
VENV=${KILN_VENV:-$ROOT/.venv}

install_deps() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "bootstrap: all ${#PACKAGES[@]} Debian packages present"
    return
  fi
  echo "bootstrap: installing ${missing[*]}"
  local SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
}

install_python() {
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  if "$VENV/bin/python" -c "import torch, torchvision, onnx, onnxscript, numpy, onnxruntime, timm, transformers, grpc, grpc_tools, pytest" 2>/dev/null &&
     compgen -G "$VENV/lib/python3*/site-packages/nvidia/cuda_nvcc/bin/ptxas" >/dev/null; then
    echo "bootstrap: Python packages present in $VENV"
    return
  fi
  echo "bootstrap: installing ${PY_PACKAGES[*]} into $VENV"
  local pip=("$VENV/bin/python" -m pip --disable-pip-version-check)
  if [ -n "${KILN_WHEELHOUSE:-}" ]; then
    # A folder that keeps the downloaded wheels (~3 GB with torch's CUDA
    # libraries) between set-ups; deploy/fresh-check.sh binds one in. pip's own
    # HTTP cache does not keep them here: the registry's answers are not cacheable.
    mkdir -p "$KILN_WHEELHOUSE"
    "${pip[@]}" download -q -d "$KILN_WHEELHOUSE" "${PY_PACKAGES[@]}"
    "${pip[@]}" install -q --no-index --find-links "$KILN_WHEELHOUSE" "${PY_PACKAGES[@]}"
  else
    "${pip[@]}" install -q "${PY_PACKAGES[@]}"
  fi
}

build() {
  export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
  # Hits across clones in different folders (paths enter the debug info).
  export CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=true
  local py=()
  [ -x "$VENV/bin/python" ] && py=(-DKILN_PYTHON="$VENV/bin/python")
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${py[@]}" >/dev/null
  local start=$SECONDS
  ninja -C "$BUILD" -j"$(nproc)"
  echo "bootstrap: build finished in $((SECONDS - start)) s"
}

# CI only (CI=true): a short pass of every fuzz target (tests/fuzz/run_fuzzers.sh,
# docs/testing.md) in its own build folder. It is reproducible: seed 1, a fixed
# number of inputs (KILN_CI_FUZZ_RUNS per target, 0 skips the pass) and an empty
# corpus, so the same pass run here reaches the depth CI reaches.
# KILN_CI_FUZZ_SECONDS only caps a target on a slow machine.
fuzz() {
  [ "${CI:-}" = true ] || return 0
  local runs=${KILN_CI_FUZZ_RUNS:-250000}
  [ "$runs" -gt 0 ] || return 0
  local start=$SECONDS
  KILN_FUZZ_BUILD_DIR="$ROOT/build-fuzz" KILN_FUZZ_SEED=${KILN_FUZZ_SEED:-1} KILN_FUZZ_RUNS=$runs \
    "$ROOT/tests/fuzz/run_fuzzers.sh" all "${KILN_CI_FUZZ_SECONDS:-300}"
  echo "bootstrap: fuzz pass finished in $((SECONDS - start)) s"
}

case "${1:-}" in
  demo)  install_deps; build; exec "$ROOT/deploy/demo.sh" "$BUILD" ;;
  test)  install_deps; install_python; build
         (cd "$BUILD" && ctest --output-on-failure -j"$(nproc)" --timeout 900)
         fuzz ;;
  build) install_deps; build ;;
  *) echo "usage: $0 demo|test|build" >&2; exit 2 ;;
esac
