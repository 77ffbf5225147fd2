#!/usr/bin/env bash
# Runs a farm from the images deploy/check.sh builds, the way docs/operations.md
# deploys one: kiln-server in its container (TLS, an auth file, its database on
# a volume) and kiln-worker in the CPU worker's container, both on the host's
# network (127.0.0.1), and the image's own `kiln` CLI as the client. Checks:
#   - the server answers over TLS; plaintext to its port is refused;
#   - a compile with tuning trials is measured by the containerised worker
#     (the worker's records are in the volume's database) and its package runs;
#   - a client without a token is refused (UNAUTHENTICATED, exit 7);
#   - `docker stop` (SIGTERM) ends the server with exit 0, and a new server
#     container on the same volume answers `kiln lookup` with the same package.
#
# Usage: deploy/containers/farm_check.sh ENGINE SERVER_IMAGE WORKER_IMAGE
#   ENGINE: docker or podman (a runtime that can run containers, not only build)
# Exit: 0 every check passed; 1 one failed (the containers' logs are printed).
set -uo pipefail
if [ $# -ne 3 ]; then
  sed -n '2,14p' "$0"
  exit 2
fi
ENGINE=$1
SERVER_IMAGE=$2
WORKER_IMAGE=$3
TAG=kiln-farm-check-$$
DIR=$(mktemp -d)
VOLUME=$TAG-db
say() { echo "farm_check: $*"; }
containers() { "$ENGINE" ps -aq --filter "name=$TAG" 2>/dev/null; }
cleanup() {
  local c
  for c in $(containers); do "$ENGINE" rm -f "$c" >/dev/null 2>&1; done
  "$ENGINE" volume rm -f "$VOLUME" >/dev/null 2>&1
  rm -rf "$DIR"
}
trap cleanup EXIT
fail() {
  say "FAILED: $*"
  local c
  for c in $(containers); do
    say "--- log of $("$ENGINE" inspect -f '{{.Name}}' "$c")"
    "$ENGINE" logs --tail 40 "$c" 2>&1
  done
  exit 1
}
# The image's kiln CLI, as a client on the host's network; $DIR is /w inside.
kiln() {
  "$ENGINE" run --rm --network host --user "$(id -u):$(id -g)" -v "$DIR:/w" -w /w \
    --entrypoint /usr/local/bin/kiln "$SERVER_IMAGE" "$@"
}

# Certificates made now, by OpenSSL: a CA and a server certificate for
# 127.0.0.1. Tokens per role; the auth file holds only their digests.
(
  cd "$DIR" &&
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem \
      -days 1 -subj /CN=kiln-farm-check-ca &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key -out server.csr \
      -subj /CN=kiln-server &&
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >san.ext &&
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 1 \
      -extfile san.ext
) >"$DIR/openssl.log" 2>&1 || { cat "$DIR/openssl.log"; fail "making certificates with openssl"; }
for role in client worker; do
  openssl rand -hex 24 | tr -d '\n' >"$DIR/$role.token"
  printf '%s  farm-check-%s  sha256:%s\n' "$role" "$role" "$(sha256sum <"$DIR/$role.token" | cut -d' ' -f1)" \
    >>"$DIR/auth"
done
# The containers run as uid 10001 (kiln): the files are mounted read-only.
chmod 0755 "$DIR"
chmod 0644 "$DIR"/*

PORT=$((20000 + $$ % 20000))
METRICS=$((PORT + 1))
server() {
  "$ENGINE" run -d --name "$TAG-server-$1" --network host -v "$VOLUME:/var/lib/kiln" -v "$DIR:/etc/kiln:ro" \
    "$SERVER_IMAGE" --listen "127.0.0.1:$PORT" --db /var/lib/kiln/tuning.db --metrics "127.0.0.1:$METRICS" \
    --tls-cert /etc/kiln/server.pem --tls-key /etc/kiln/server.key --auth-file /etc/kiln/auth >/dev/null
}
# The server is up when a lookup over TLS with the client's token gets an
# answer: NOT_FOUND (exit 3) before the first compile. 60 s at most.
CLIENT=(--tls-ca /w/ca.pem --token-file /w/client.token)
wait_up() {
  local rc _
  for _ in $(seq 60); do
    kiln "${CLIENT[@]}" lookup /w/mlp.onnx --shape x=8,64 --server "127.0.0.1:$PORT" --connect-timeout 1 \
      --cache-dir /w/no-cache -o /w/up.kpkg >/dev/null 2>&1
    rc=$?
    [ $rc -eq 3 ] || [ $rc -eq 0 ] && return 0
    sleep 1
  done
  return 1
}

say "server: $SERVER_IMAGE on 127.0.0.1:$PORT (TLS, auth file), database on volume $VOLUME"
"$ENGINE" volume create "$VOLUME" >/dev/null || fail "creating volume $VOLUME"
kiln example -o /w >/dev/null || fail "kiln example in the server image (writes mlp.onnx, x.npy)"
server 1 || fail "starting the server container"
wait_up || fail "the server did not come up in 60 s"
say "ok: the server is up"

say "worker: $WORKER_IMAGE"
"$ENGINE" run -d --name "$TAG-worker" --network host -v "$DIR:/etc/kiln:ro" "$WORKER_IMAGE" \
  --server "127.0.0.1:$PORT" --tls-ca /etc/kiln/ca.pem --token-file /etc/kiln/worker.token \
  --name farm-check-worker --device cpu >/dev/null || fail "starting the worker container"

out=$(kiln "${CLIENT[@]}" compile /w/mlp.onnx --shape x=8,64 --server "127.0.0.1:$PORT" --trials 3 -o /w/mlp.kpkg --json 2>&1) ||
  { echo "$out"; fail "a compile with 3 trials through the containerised farm"; }
say "ok: compiled through the farm"
kiln run /w/mlp.kpkg --input x=/w/x.npy >/dev/null 2>&1 || fail "running the package the farm returned"
say "ok: the package runs"

# Refusals: no token, and plaintext to the TLS port.
kiln compile /w/mlp.onnx --shape x=8,64 --server "127.0.0.1:$PORT" --trials 0 -o /w/refused.kpkg --tls-ca /w/ca.pem \
  >"$DIR/refused.log" 2>&1
rc=$?
if [ $rc -ne 7 ] || ! grep -q UNAUTHENTICATED "$DIR/refused.log"; then
  cat "$DIR/refused.log"
  fail "a compile without a token exited $rc, not 7 with UNAUTHENTICATED"
fi
say "ok: no token -> UNAUTHENTICATED"
kiln lookup /w/mlp.onnx --shape x=8,64 --server "127.0.0.1:$PORT" --connect-timeout 3 --cache-dir /w/no-cache -o /w/plain.kpkg >"$DIR/plain.log" 2>&1 &&
  fail "a plaintext lookup to the TLS port succeeded"
say "ok: plaintext to the TLS port is refused"

# Clean stop: SIGTERM, exit 0; the records the worker measured are in the
# volume's database, under the containerised worker's name.
"$ENGINE" stop -t 30 "$TAG-server-1" >/dev/null
rc=$("$ENGINE" inspect -f '{{.State.ExitCode}}' "$TAG-server-1")
[ "$rc" = 0 ] || fail "the server exited $rc on SIGTERM, not 0"
say "ok: SIGTERM -> the server exited 0"
"$ENGINE" run --rm -v "$VOLUME:/var/lib/kiln" --entrypoint /usr/local/bin/kiln "$SERVER_IMAGE" \
  db export --db /var/lib/kiln/tuning.db >"$DIR/records.jsonl" 2>"$DIR/export.log" || {
  cat "$DIR/export.log"
  fail "kiln db export of the volume's database"
}
n=$(grep -c 'farm-check-worker' "$DIR/records.jsonl")
[ "$n" -gt 0 ] || fail "no record in the database was measured by the containerised worker"
say "ok: $n records measured by the containerised worker, kept on the volume"

# A new server container on the same volume: the compile's package is there.
server 2 || fail "restarting the server container"
wait_up || fail "the restarted server did not come up in 60 s"
kiln "${CLIENT[@]}" lookup /w/mlp.onnx --shape x=8,64 --server "127.0.0.1:$PORT" --cache-dir /w/cache -o /w/again.kpkg \
  >"$DIR/lookup.log" 2>&1 || { cat "$DIR/lookup.log"; fail "kiln lookup from the restarted server"; }
cmp -s "$DIR/mlp.kpkg" "$DIR/again.kpkg" || fail "the restarted server's package differs from the compile's"
say "ok: a restarted server on the same volume answers the lookup with the same package"
say "all farm checks passed"
