#!/usr/bin/env bash
# Packs what tests/gpu_host_check.sh needs from a build tree into one file, for
# a GPU host that has a driver, CUDA's ptxas and Python but none of Kiln's
# Debian libraries (another distribution, no registry):
#
#   tests/gpu_host_bundle.sh BUILD_DIR OUT.tar.xz
#
# The bundle holds the binaries the GPU checks run (stripped of debug info),
# every shared library they load but the C and C++ runtimes (the host's newer
# ones serve), with RPATH /opt/kilnlib set by patchelf, the Python package,
# and the ONNX node tests the conformance check reads. On the GPU host, from
# a checkout of the same commit:
#
#   mkdir -p /opt/kilnbundle && tar -C /opt/kilnbundle -xJf OUT.tar.xz
#   mv /opt/kilnbundle/kilnlib /opt/kilnlib
#   KILN_ONNX_NODE_TESTS=/opt/kilnbundle/node tests/gpu_host_check.sh /opt/kilnbundle/build OUT_DIR
#
# The binaries keep the source and build paths they were built with
# (KILN_SOURCE_DIR, KILN_BINARY_DIR): link those paths to the checkout and to
# /opt/kilnbundle/build there if they differ. Needs patchelf and xz here.
set -euo pipefail
if [ $# -ne 2 ]; then
  awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" >&2
  exit 2
fi
BUILD=$(cd "$1" && pwd)
OUT=$(realpath -m "$2")
NODE_TESTS=${KILN_ONNX_NODE_TESTS:-/usr/lib/python3/dist-packages/onnx/backend/test/data/node}
for tool in patchelf xz; do
  command -v $tool >/dev/null || { echo "gpu_host_bundle: $tool is not installed" >&2; exit 2; }
done
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
BINARIES="tests/kiln_runtime_tests tests/kiln_package_tests tests/kiln_worker_tests tests/kiln_server_tests
  tests/kiln_e2e_tests tests/conformance/kiln_conformance client/kiln server/kiln-server worker/kiln-worker
  client/runtime/libkiln_runtime.so proto/libkiln_proto.so"
mkdir -p "$STAGE/kilnlib"
for b in $BINARIES; do
  [ -e "$BUILD/$b" ] || { echo "gpu_host_bundle: $BUILD/$b is not built" >&2; exit 1; }
  mkdir -p "$STAGE/build/$(dirname "$b")"
  cp "$BUILD/$b" "$STAGE/build/$b"
  strip --strip-debug "$STAGE/build/$b"
done
cp -r "$BUILD/python" "$STAGE/build/python"
# The libraries the binaries load, but glibc's and the C++ runtime's.
for b in $BINARIES; do ldd "$BUILD/$b" | awk '/=> \// { print $3 }'; done | sort -u |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s)\.so|ld-linux|^'"$BUILD" |
  while read -r lib; do cp -L "$lib" "$STAGE/kilnlib/"; done
cp "$BUILD/proto/libkiln_proto.so" "$STAGE/kilnlib/"
for lib in "$STAGE"/kilnlib/*; do
  strip --strip-debug "$lib" 2>/dev/null || true
  patchelf --set-rpath /opt/kilnlib "$lib"
done
# DT_RPATH (not RUNPATH): it also serves the libraries' own dependencies.
for b in $BINARIES; do patchelf --force-rpath --set-rpath /opt/kilnlib "$STAGE/build/$b"; done
[ -d "$NODE_TESTS" ] && cp -r "$NODE_TESTS" "$STAGE/node"
tar -C "$STAGE" -cf - . | xz -9e -T0 >"$OUT"
echo "gpu_host_bundle: $OUT ($(du -h "$OUT" | cut -f1))"
