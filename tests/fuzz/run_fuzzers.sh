#!/usr/bin/env bash
# Builds Kiln's libFuzzer targets (clang-19, -fsanitize=fuzzer,address,undefined)
# in a build directory of their own and runs them, one after the other:
#
#   tests/fuzz/run_fuzzers.sh TARGET|all SECONDS
#
# TARGET: onnx_import, graph_proto, package_load, record_jsonl (docs/testing.md).
# Each runs SECONDS seconds over its corpus (build dir corpus/TARGET, kept
# between runs), seeded with the ONNX conformance models (Debian's
# libonnx-testdata), the graphs and packages Kiln makes from them
# (kiln_fuzz_make_seeds) and tests/fuzz/{seeds,regressions}/TARGET. A crash,
# leak, hang (-timeout) or OOM (-rss_limit_mb) leaves its input in
# artifacts/TARGET/ and makes the script exit 1: fix the bug, then copy the
# input to tests/fuzz/regressions/TARGET/ so that ctest (FuzzRegression.TARGET)
# replays it in every build.
#
# Environment: KILN_FUZZ_BUILD_DIR (default build-fuzz), KILN_FUZZ_JOBS (ninja
# -j, default nproc), KILN_FUZZ_NICE (default 10), KILN_FUZZ_ONNX_DATA (default
# /usr/share/libonnx-testdata/data), KILN_FUZZ_SEED (libFuzzer's -seed; default
# random), KILN_FUZZ_RUNS (stop each target after this many inputs, SECONDS
# then only a cap). With KILN_FUZZ_SEED and KILN_FUZZ_RUNS set, each target
# starts from an empty corpus: the pass then reaches the same depth on any
# machine and tries nearly the same inputs (absl's per-process hash seed and
# the source path move coverage a little), so the CI pass (deploy/bootstrap.sh)
# run here is close to CI's. Needs clang-19 and libclang-rt-19-dev.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
ALL=(onnx_import graph_proto package_load record_jsonl)
usage() { echo "usage: $0 ${ALL[*]// /|}|all SECONDS" >&2; exit 2; }
[ $# -eq 2 ] || usage
case "$1" in
  all) targets=("${ALL[@]}") ;;
  onnx_import|graph_proto|package_load|record_jsonl) targets=("$1") ;;
  *) usage ;;
esac
seconds=$2
[[ "$seconds" =~ ^[0-9]+$ ]] || usage
BUILD=${KILN_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}
JOBS=${KILN_FUZZ_JOBS:-$(nproc)}
NICE=${KILN_FUZZ_NICE:-10}
DATA=${KILN_FUZZ_ONNX_DATA:-/usr/share/libonnx-testdata/data}
for tool in clang-19 clang++-19; do
  command -v $tool >/dev/null || { echo "run_fuzzers: $tool not found (apt-get install clang-19)" >&2; exit 2; }
done
if ! ls /usr/lib/llvm-19/lib/clang/19/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "run_fuzzers: libFuzzer's runtime is missing (apt-get install libclang-rt-19-dev)" >&2
  exit 2
fi

# --- build: only the fuzz binaries and what they link --------------------------
export CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=true
san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# -O1 with assertions on (no -DNDEBUG): a broken invariant an input can reach is a finding.
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 -DKILN_FUZZ=ON \
  -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
build_targets=()
for t in "${targets[@]}"; do build_targets+=("kiln_fuzz_$t"); done
case " ${targets[*]} " in *" graph_proto "*|*" package_load "*) build_targets+=(kiln_fuzz_make_seeds) ;; esac
start=$SECONDS
nice -n "$NICE" ninja -C "$BUILD" -j"$JOBS" "${build_targets[@]}"
echo "run_fuzzers: built ${build_targets[*]} in $((SECONDS - start)) s"

# --- seeds -------------------------------------------------------------------------
models=()
if [ -d "$DATA" ]; then
  # Small models only: libFuzzer mutates whole inputs, and big weights slow it down.
  while IFS= read -r f; do models+=("$f"); done < <(find "$DATA" -name model.onnx -size -64k | sort)
else
  echo "run_fuzzers: no ONNX test data in $DATA (apt-get install libonnx-testdata): seeds from tests/fuzz only" >&2
fi
make_seeds() {  # target, kiln_fuzz_make_seeds option
  local dir=$BUILD/fuzz-seeds/$1
  [ -f "$dir/.done" ] && return
  rm -rf "$dir" && mkdir -p "$dir"
  # Its summary goes to stderr: seed_dirs' stdout is the list of seed folders.
  [ ${#models[@]} -gt 0 ] && nice -n "$NICE" "$BUILD/tests/fuzz/kiln_fuzz_make_seeds" "$2" "$dir" "${models[@]}" >&2
  touch "$dir/.done"
}
seed_dirs() {  # target -> the seed folders that exist
  local t=$1 d
  case $t in
    onnx_import)
      d=$BUILD/fuzz-seeds/onnx_import
      if [ ! -f "$d/.done" ]; then
        rm -rf "$d" && mkdir -p "$d"
        for f in "${models[@]}"; do cp "$f" "$d/$(basename "$(dirname "$f")")"; done
        touch "$d/.done"
      fi ;;
    graph_proto) make_seeds graph_proto --graphs ;;
    package_load) make_seeds package_load --packages ;;
  esac
  for d in "$BUILD/fuzz-seeds/$t" "$ROOT/tests/fuzz/seeds/$t" "$ROOT/tests/fuzz/regressions/$t"; do
    [ -d "$d" ] && echo "$d"
  done
}

# --- run -----------------------------------------------------------------------------
declare -A max_len=([onnx_import]=65536 [graph_proto]=65536 [package_load]=131072 [record_jsonl]=4096)
failed=()
for t in "${targets[@]}"; do
  mapfile -t seeds < <(seed_dirs "$t")
  corpus=$BUILD/corpus/$t
  artifacts=$BUILD/artifacts/$t
  runs=()
  if [ -n "${KILN_FUZZ_RUNS:-}" ]; then
    runs=(-runs="$KILN_FUZZ_RUNS")
    [ -n "${KILN_FUZZ_SEED:-}" ] && rm -rf "$corpus"  # a reproducible pass: nothing from earlier runs
  fi
  mkdir -p "$corpus" "$artifacts"
  opts=(-max_total_time="$seconds" "${runs[@]}" -timeout=25 -rss_limit_mb=4096 -max_len="${max_len[$t]}"
        -artifact_prefix="$artifacts/" -print_final_stats=1)
  [ -f "$ROOT/tests/fuzz/$t.dict" ] && opts+=(-dict="$ROOT/tests/fuzz/$t.dict")
  # A fixed seed (CI sets one) makes two runs over the same code mutate alike.
  [ -n "${KILN_FUZZ_SEED:-}" ] && opts+=(-seed="$KILN_FUZZ_SEED")
  echo "run_fuzzers: $t for $seconds s${KILN_FUZZ_RUNS:+ or $KILN_FUZZ_RUNS inputs} (corpus $corpus, seeds ${seeds[*]})"
  set +e
  # Sanitizer reports go to the log too: a finding names its input ("Test unit written to ...").
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
    nice -n "$NICE" "$BUILD/tests/fuzz/kiln_fuzz_$t" "${opts[@]}" "$corpus" "${seeds[@]}" 2>&1 | tee "$BUILD/fuzz-$t.log" |
    grep -E --line-buffered '^(#[0-9]+ +(INITED|DONE|pulse)|stat::|==[0-9]+==|SUMMARY|Test unit|artifact_prefix|.*fuzz check failed)'
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -ne 0 ]; then
    echo "run_fuzzers: $t FAILED (exit $rc): log $BUILD/fuzz-$t.log, input in $artifacts/" >&2
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "run_fuzzers: findings in ${failed[*]}" >&2
  exit 1
fi
echo "run_fuzzers: ${targets[*]}: no finding in $seconds s${KILN_FUZZ_RUNS:+ or $KILN_FUZZ_RUNS inputs} each"
