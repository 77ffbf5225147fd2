#!/usr/bin/env bash
# Kiln's main job end to end, on loopback: a kiln-server and a CPU kiln-worker
# as real processes; compile an example model through them, run the package,
# check it against the reference interpreter, and compile again to show that
# the tuning database remembers (same digest, nothing measured).
set -euo pipefail
BUILD=${1:-$(cd "$(dirname "$0")/.." && pwd)/build}
KILN=$BUILD/client/kiln
WORK=$(mktemp -d /tmp/kiln-demo.XXXXXX)
cleanup() { kill "${WORKER_PID:-}" "${SERVER_PID:-}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT

echo "== example model"
"$KILN" example mlp -o "$WORK"

echo "== kiln-server and kiln-worker on 127.0.0.1"
"$BUILD/server/kiln-server" --listen 127.0.0.1:0 --db "$WORK/tuning.db" --port-file "$WORK/port" \
  2>"$WORK/server.log" &
SERVER_PID=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
[ -s "$WORK/port" ] || { echo "server did not start:"; cat "$WORK/server.log"; exit 1; }
ADDR=127.0.0.1:$(cat "$WORK/port")
"$BUILD/worker/kiln-worker" --server "$ADDR" --device cpu 2>"$WORK/worker.log" &
WORKER_PID=$!
echo "server $ADDR (pid $SERVER_PID), worker pid $WORKER_PID, logs in $WORK"

echo "== compile (tuning every group on the worker)"
"$KILN" compile "$WORK/mlp.onnx" --shape x=8,64 --target cpu --trials 8 --server "$ADDR" -o "$WORK/mlp.kpkg"

echo "== run the package and compare with the reference interpreter"
"$KILN" run "$WORK/mlp.kpkg" --input x="$WORK/x.npy" --output-dir "$WORK/out"
"$KILN" eval "$WORK/mlp.onnx" --input x="$WORK/x.npy" --output-dir "$WORK/ref"
"$KILN" compare "$WORK/ref" "$WORK/out" --atol 1e-5 --rtol 0
"$KILN" run "$WORK/mlp.kpkg" --input x="$WORK/x.npy" --repeat 200 --threads 1

echo "== compile again: the tuning database answers, nothing is measured"
"$KILN" compile "$WORK/mlp.onnx" --shape x=8,64 --target cpu --trials 8 --server "$ADDR" -q \
  -o "$WORK/mlp2.kpkg"
D1=$(sha256sum "$WORK/mlp.kpkg" | cut -d' ' -f1)
D2=$(sha256sum "$WORK/mlp2.kpkg" | cut -d' ' -f1)
if [ "$D1" = "$D2" ]; then
  echo "reproducible: both packages are sha256:$D1"
else
  echo "NOT reproducible: sha256:$D1 vs sha256:$D2"; exit 1
fi
echo "== done: package $WORK/mlp.kpkg digest sha256:$D1"
