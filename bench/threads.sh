#!/bin/bash
# Usage: bench/threads.sh [MODEL in $CORPUS, default mobilenet_v2_op10] [TRIALS, default 8]; works in /tmp/threads.
# Tuning on the threads the package runs with: the same model tuned with
# `--threads 1` and with `--threads 2` (the embedded farm's worker then measures
# on two threads), both run on two threads, rounds interleaved, against ONNX
# Runtime on two threads in the same rounds. Prints medians; compare ratios.
set -e
K=${KILN:-$(cd "$(dirname "$0")/.." && pwd)/build/client/kiln}
PY=${PYTHON:-/work/corpus-venv/bin/python}
NAME=${1:-mobilenet_v2_op10}
M=${CORPUS:-/work/corpus}/$NAME.onnx
IN=${CORPUS:-/work/corpus}/$NAME.inputs
T=${2:-8}
INPUTS=$(for f in $IN/*; do echo -n "--input $(basename $f .npy)=$f "; done)
mkdir -p /tmp/threads && cd /tmp/threads && rm -rf *.db* *.kpkg
for t in 1 2; do
  start=$(date +%s.%N)
  $K compile $M --trials $T --threads $t --db t$t.db -o t$t.kpkg -q 2>/dev/null | sed -n 3p
  echo "tuned for $t thread(s): $(echo "$(date +%s.%N) - $start" | bc) s"
done
for r in 1 2 3; do
  for t in 1 2; do
    echo -n "round $r, tuned for $t, run on 2: "
    $K run t$t.kpkg $INPUTS --repeat 200 --threads 2 2>/dev/null | grep -o '"median_ms":[0-9.]*'
  done
  echo -n "round $r, onnxruntime on 2: "
  $PY - "$M" "$IN" <<'PYEOF'
import sys, glob, os, time, statistics, numpy as np, onnxruntime as ort
o = ort.SessionOptions(); o.intra_op_num_threads = 2; o.inter_op_num_threads = 1
s = ort.InferenceSession(sys.argv[1], o, providers=["CPUExecutionProvider"])
feed = {os.path.basename(f)[:-4]: np.load(f) for f in glob.glob(sys.argv[2] + "/*.npy")}
for _ in range(10): s.run(None, feed)
ts = []
for _ in range(200):
    t0 = time.perf_counter(); s.run(None, feed); ts.append((time.perf_counter() - t0) * 1e3)
print('"median_ms":%.5f' % statistics.median(ts))
PYEOF
done
