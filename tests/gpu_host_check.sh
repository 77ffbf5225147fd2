#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, run on a GPU host from a build tree:
#
#   tests/gpu_host_check.sh BUILD_DIR OUT_DIR [--seconds N] [--bench "ARGS"]
#
# Each check runs with its own time limit inside an overall budget (--seconds,
# default 900), writes OUT_DIR/<check>.log, and adds one line to
# OUT_DIR/summary.txt: "<check> rc=<exit code> <seconds>s". A check that the
# budget no longer fits is "skipped (budget)". The checks:
#
#   device        nvidia-smi and the ptxas used
#   cuda_driver   kiln_runtime_tests CudaDriverTest.* and Cuda*: the driver and
#                 the runtime's CUDA sessions on the real device
#   gpu_package   kiln_package_tests GpuPackageWriterTest.*: packages with cubins run
#   gpu_worker    kiln_worker_tests Device*: the worker's device process
#   gpu_server    kiln_server_tests Gpu*
#   gpu_farm      kiln_e2e_tests GpuFarmTest.*: kiln-server + kiln-worker --device
#                 cuda:0 + the CLI, tuned on the GPU, outputs against the interpreter
#   conformance   the ONNX node suite's compiled path on this GPU (kiln_conformance
#                 --target cuda:sm_XY --real-gpu), held to the reviewed lists
#   python_cuda   python/tests/test_cuda.py ($PYTHON, default python3, with numpy, onnx, pytest)
#   corpus        with KILN_CORPUS=DIR (a corpus of make_corpus.py): every model compiled for
#                 this GPU and run on it against ONNX Runtime (run_corpus.py --target)
#   bench         bench/gpu.py with --bench's arguments (default: untuned, all parts)
#
# The exit code is 0 when every check that ran passed. The device's SM comes
# from nvidia-smi; ptxas from PATH or /usr/local/cuda. Nothing here changes
# the GPU's settings.
set -u
if [ $# -lt 2 ]; then
  awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" >&2
  exit 2
fi
BUILD=$(cd "$1" && pwd)
OUT=$2
shift 2
SECONDS_BUDGET=900
BENCH_ARGS="--trials 0 --torch-compile none"
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) SECONDS_BUDGET=$2; shift 2 ;;
    --bench) BENCH_ARGS=$2; shift 2 ;;
    *) echo "gpu_host_check: unknown argument $1" >&2; exit 2 ;;
  esac
done
SOURCE=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
DEADLINE=$(($(date +%s) + SECONDS_BUDGET))
FAILED=0

# check NAME LIMIT_SECONDS COMMAND...: runs COMMAND for at most LIMIT seconds,
# or what is left of the budget.
check() {
  local name=$1 limit=$2
  shift 2
  local left=$((DEADLINE - $(date +%s)))
  if [ "$left" -lt 20 ]; then
    echo "$name skipped (budget)" | tee -a "$SUMMARY"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local start rc
  start=$(date +%s)
  timeout -k 10 "$limit" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && FAILED=1
  echo "$name rc=$rc $(($(date +%s) - start))s$([ $rc -eq 124 ] && echo " (timed out after ${limit}s)")" |
    tee -a "$SUMMARY"
}

PTXAS=$(command -v ptxas || true)
[ -z "$PTXAS" ] && [ -x /usr/local/cuda/bin/ptxas ] && PTXAS=/usr/local/cuda/bin/ptxas
CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
SM=${CAP:-90}
check device 30 bash -c "nvidia-smi; echo; echo ptxas: '$PTXAS'; '$PTXAS' --version; echo sm_$SM"

check cuda_driver 120 "$BUILD/tests/kiln_runtime_tests" --gtest_filter='Cuda*'
check gpu_package 180 "$BUILD/tests/kiln_package_tests" --gtest_filter='GpuPackageWriterTest.*'
check gpu_worker 120 "$BUILD/tests/kiln_worker_tests" --gtest_filter='Device*:GpuMeasurer*'
check gpu_server 120 "$BUILD/tests/kiln_server_tests" --gtest_filter='Gpu*'
check gpu_farm 300 "$BUILD/tests/kiln_e2e_tests" --gtest_filter='GpuFarmTest.*'

conformance=(--target "cuda:sm_$SM" --real-gpu
             --expected "$SOURCE/tests/conformance/expected_failures.txt"
             --expected "$SOURCE/tests/conformance/compiled_gaps.txt"
             --expected "$SOURCE/tests/conformance/compiled_gaps_cuda.txt")
[ -n "$PTXAS" ] && conformance+=(--ptxas "$PTXAS")
[ -n "${KILN_ONNX_NODE_TESTS:-}" ] && conformance+=(--data "$KILN_ONNX_NODE_TESTS")
check conformance 420 "$BUILD/tests/conformance/kiln_conformance" "${conformance[@]}"

check python_cuda 180 env PYTHONPATH="$BUILD/python" PYTHONDONTWRITEBYTECODE=1 \
  KILN_RUNTIME_LIBRARY="$BUILD/client/runtime/libkiln_runtime.so" KILN_SERVER="$BUILD/server/kiln-server" \
  KILN_WORKER="$BUILD/worker/kiln-worker" KILN_CLI="$BUILD/client/kiln" KILN_PTXAS="$PTXAS" \
  KILN_SOURCE_DIR="$SOURCE" "$PYTHON" -m pytest -p no:cacheprovider -v -rs "$SOURCE/python/tests/test_cuda.py"

if [ -n "${KILN_CORPUS:-}" ]; then
  check corpus 1800 "$PYTHON" "$SOURCE/tests/models/corpus/run_corpus.py" "$KILN_CORPUS" \
    --kiln "$BUILD/client/kiln" --target "cuda:sm_$SM" --no-snapshot --json "$OUT/corpus.json"
fi

# shellcheck disable=SC2086  # BENCH_ARGS is a list of arguments
check bench 600 "$PYTHON" "$SOURCE/bench/gpu.py" --build "$BUILD" --work "$OUT/bench-work" \
  --markdown "$OUT/gpu.md" --json "$OUT/gpu.json" $BENCH_ARGS
rm -rf "$OUT/bench-work"
exit $FAILED
