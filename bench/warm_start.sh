#!/bin/bash
# Usage: bench/warm_start.sh [MODEL in $CORPUS, default /work/corpus] [TRIALS]; works in /tmp/warm.
# Warm start from a sibling target: the sibling is this machine's records relabelled
# as another CPU of the same ISA (an upper bound: a real sibling's bests transfer less).
set -e
K=${KILN:-$(cd "$(dirname "$0")/.." && pwd)/build/client/kiln}
M=${CORPUS:-/work/corpus}/${1:-mobilenet_v2_op10}.onnx
T=${2:-3}
INPUTS=$(for f in ${CORPUS:-/work/corpus}/${1:-mobilenet_v2_op10}.inputs/*; do echo -n "--input $(basename $f .npy)=$f "; done)
mkdir -p /tmp/warm && cd /tmp/warm && rm -rf *.db* *.kpkg *.jsonl
$K compile $M --trials 12 --db sib.db -o sib.kpkg -q 2>/dev/null | head -3
$K db export --db sib.db > sib.jsonl
python3 - <<'PY'
import json
with open('sib.jsonl') as f, open('sibling.jsonl', 'w') as out:
    for line in f:
        d = json.loads(line)
        d['target']['key'] = 'cpu/x86_64/sibling-cpu/00000001'
        d['target']['cpu_name'] = 'sibling-cpu'
        out.write(json.dumps(d) + '\n')
PY
$K db import sibling.jsonl --db warm.db
for mode in cold warm; do
  start=$(date +%s.%N)
  $K compile $M --trials $T --db $mode.db -o $mode.kpkg -q 2>/dev/null | head -3
  end=$(date +%s.%N)
  echo "$mode tuning wall s: $(echo "$end - $start" | bc)"
  $K report $M --db $mode.db 2>/dev/null | sed -n 2,3p
done
$K report $M --db sib.db 2>/dev/null | sed -n 2,3p
for r in 1 2 3; do for mode in cold warm sib; do
  echo -n "$mode "; $K run $mode.kpkg $INPUTS --repeat 200 --threads 1 2>/dev/null | grep -o '"median_ms":[0-9.]*' ; done; done
