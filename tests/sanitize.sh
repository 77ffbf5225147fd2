#!/usr/bin/env bash
# Builds Kiln with AddressSanitizer and UndefinedBehaviorSanitizer (gcc) in a
# build folder of its own and runs ctest there (docs/testing.md):
#
#   tests/sanitize.sh [CTEST_ARGS...]          # e.g. tests/sanitize.sh -R 'Runtime|Fuzz'
#
# Any UB report is fatal (-fno-sanitize-recover), so a test that triggers one
# fails. Leak checking is off unless ASAN_OPTIONS says otherwise (gRPC and
# protobuf keep process-lifetime allocations).
#
# Environment: KILN_ASAN_BUILD_DIR (default build-asan), KILN_ASAN_JOBS (ninja
# -j, default nproc), KILN_ASAN_NICE (default 15: it must not starve the
# machine), KILN_ASAN_TARGETS (ninja targets; default all),
# KILN_ASAN_CTEST_JOBS (default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${KILN_ASAN_BUILD_DIR:-$ROOT/build-asan}
JOBS=${KILN_ASAN_JOBS:-$(nproc)}
NICE=${KILN_ASAN_NICE:-15}
read -r -a TARGETS <<<"${KILN_ASAN_TARGETS:-all}"
PY=()
[ -x "$ROOT/.venv/bin/python" ] && PY=(-DKILN_PYTHON="$ROOT/.venv/bin/python")

export CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=true
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# -O1 keeps the tests' run time bearable; assertions stay on (no -DNDEBUG).
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${PY[@]}" \
  -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ \
  -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_MODULE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
start=$SECONDS
nice -n "$NICE" ninja -C "$BUILD" -j"$JOBS" "${TARGETS[@]}"
echo "sanitize: built ${TARGETS[*]} in $((SECONDS - start)) s"

# handle_segv=0 and friends: the worker's isolation tests crash kernels on
# purpose in child processes and check the signal; a real crash still fails.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0:verify_asan_link_order=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$BUILD"
start=$SECONDS
set +e
nice -n "$NICE" ctest --output-on-failure -j"${KILN_ASAN_CTEST_JOBS:-1}" --timeout 1800 "$@"
rc=$?
set -e
echo "sanitize: ctest exited $rc after $((SECONDS - start)) s"
exit $rc
