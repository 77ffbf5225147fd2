#!/usr/bin/env bash
# Installs the runtime component into a fresh prefix and uses it as a
# deployment would: checks what libkiln_runtime.so needs and exports, builds
# examples/ with find_package(KilnRuntime) and the C example with pkg-config,
# runs them on a compiled package and compares with `kiln run`.
#   installed_runtime_test.sh BUILD_DIR SOURCE_DIR KILN PYTHON
set -euo pipefail
BUILD=$1 SRC=$2 KILN=$3 PY=$4
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kiln-install.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$BUILD" --component runtime --prefix "$WORK/prefix" >/dev/null
LIB=$(ls "$WORK"/prefix/lib*/libkiln_runtime.so.1)
LIBDIR=$(dirname "$LIB")
for f in "$LIBDIR/libkiln_runtime.so" "$LIBDIR/libkiln_runtime.a" "$WORK/prefix/include/kiln_runtime.h" \
         "$WORK/prefix/include/kiln_runtime.hpp" "$LIBDIR/cmake/KilnRuntime/KilnRuntimeConfig.cmake" \
         "$LIBDIR/pkgconfig/kiln_runtime.pc"; do
  [ -e "$f" ] || fail "not installed: $f"
done

# Needs nothing but the C and C++ libraries, and has no RUNPATH into the build.
# A build with sanitizers (tests/sanitize.sh) needs their runtimes too.
echo "ldd $LIB:"; ldd "$LIB"
allowed='linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|libstdc\+\+\.so\.6|libgcc_s\.so\.1|/lib64/ld-linux-x86-64\.so\.2'
SAN=""  # the build's -fsanitize=..., which the programs linking it need as well
if grep -qE '^CMAKE_CXX_FLAGS:STRING=.*-fsanitize=' "$BUILD/CMakeCache.txt"; then
  allowed="$allowed|libasan\.so\.[0-9]+|libubsan\.so\.[0-9]+"
  SAN=$(sed -n 's/^CMAKE_CXX_FLAGS:STRING=//p' "$BUILD/CMakeCache.txt" | grep -oE -- '-fsanitize=[a-z,]+' | head -1)
fi
bad=$(ldd "$LIB" | awk '{print $1}' | grep -vE "^($allowed)\$" || true)
[ -z "$bad" ] || fail "libkiln_runtime.so needs $bad"
if readelf -d "$LIB" | grep -qE 'RUNPATH|RPATH'; then fail "installed library has a RUNPATH"; fi
readelf -d "$LIB" | grep -q 'SONAME.*libkiln_runtime\.so\.1' || fail "SONAME is not libkiln_runtime.so.1"
# Exports the C API only, every symbol versioned.
others=$(nm -D --defined-only "$LIB" | awk '{print $3}' | grep -vE '^kiln_[a-z_]+@@KILN_RUNTIME_1\.[0-9]+$|^KILN_RUNTIME_1\.[0-9]+$' || true)
[ -z "$others" ] || fail "exports more than the C API: $(echo $others | head -c 400)"
declared=$(grep -oE 'KILN_API [^(]*\b(kiln_[a-z_]+)\(' "$SRC/client/runtime/kiln_runtime.h" | grep -oE 'kiln_[a-z_]+\($' | tr -d '(' | sort)
exported=$(nm -D --defined-only "$LIB" | awk '{print $3}' | grep -oE '^kiln_[a-z_]+' | sort)
[ "$declared" = "$exported" ] || fail "header and exports differ: $(diff <(echo "$declared") <(echo "$exported") | tr '\n' ' ')"

# A real package and the reference outputs from the CLI.
"$KILN" example mlp -o "$WORK/ex" > "$WORK/ex.txt"
SHAPE=$(sed -n 's/^shape //p' "$WORK/ex.txt" | head -1)
"$KILN" compile "$WORK/ex/mlp.onnx" --shape "$SHAPE" --trials 0 -q --db "$WORK/tuning.db" -o "$WORK/mlp.kpkg" >/dev/null
"$KILN" run "$WORK/mlp.kpkg" --input x="$WORK/ex/x.npy" --output-dir "$WORK/ref" >/dev/null
"$PY" - "$WORK" <<'PYEOF'
import sys, numpy as np
w = sys.argv[1]
np.load(w + "/ex/x.npy").astype("<f4").tofile(w + "/x.bin")
PYEOF

# CMake package route: examples/ exactly as a user builds them.
cmake -S "$SRC/examples" -B "$WORK/build-examples" -G Ninja -DCMAKE_PREFIX_PATH="$WORK/prefix" \
  ${SAN:+-DCMAKE_C_FLAGS=$SAN -DCMAKE_CXX_FLAGS=$SAN -DCMAKE_EXE_LINKER_FLAGS=$SAN} >/dev/null
cmake --build "$WORK/build-examples" >/dev/null
echo "C example (shared):"
"$WORK/build-examples/run_package_c" "$WORK/mlp.kpkg" "$WORK/x.bin" | tee "$WORK/c.txt"
"$WORK/build-examples/run_package_c_static" "$WORK/mlp.kpkg" "$WORK/x.bin" > "$WORK/c_static.txt"
diff "$WORK/c.txt" "$WORK/c_static.txt" || fail "static and shared builds differ"
ldd "$WORK/build-examples/run_package_c_static" | grep -q kiln_runtime && fail "static example links libkiln_runtime.so"
echo "C++ example:"
"$WORK/build-examples/run_package_cpp" "$WORK/mlp.kpkg" 2 | tee "$WORK/cpp.txt"

# pkg-config route.
PKG_CONFIG_PATH="$LIBDIR/pkgconfig" cc -std=c99 -Wall -Werror $SAN -o "$WORK/run_pc" "$SRC/examples/run_package.c" \
  $(PKG_CONFIG_PATH="$LIBDIR/pkgconfig" pkg-config --cflags --libs kiln_runtime) -Wl,-rpath,"$LIBDIR"
"$WORK/run_pc" "$WORK/mlp.kpkg" "$WORK/x.bin" > "$WORK/pc.txt"
diff "$WORK/c.txt" "$WORK/pc.txt" || fail "pkg-config build differs"

# The C example's sums agree with kiln run's outputs.
"$PY" - "$WORK" <<'PYEOF'
import glob, os, re, sys, numpy as np
w = sys.argv[1]
sums = {m.group(1): float(m.group(2)) for m in re.finditer(r"^output (\S+) \[.*sum (\S+)$", open(w + "/c.txt").read(), re.M)}
assert sums, "the C example printed no output sums"
for path in glob.glob(w + "/ref/*.npy"):
    name = os.path.basename(path)[:-4]
    ref = float(np.load(path).astype(np.float64).sum())
    assert name in sums, f"output {name} missing from the C example"
    assert abs(sums[name] - ref) <= 1e-4 * max(1.0, abs(ref)), f"{name}: C example {sums[name]}, kiln run {ref}"
print("outputs match kiln run:", ", ".join(f"{k}={v:.6g}" for k, v in sums.items()))
PYEOF
grep -q "^kiln runtime [0-9]*\.[0-9]*\.[0-9]* (ABI 1003)" "$WORK/c.txt" || fail "no version line"
grep -q "for x86-64-v[234] " "$WORK/c.txt" || fail "no ISA level in the package target"
echo PASS
