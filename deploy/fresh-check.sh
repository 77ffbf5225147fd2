#!/usr/bin/env bash
# Runs one of the README's commands (deploy/bootstrap.sh demo|test) the way a new
# user would: in a brand-new Debian 12 root made for this run (mmdebstrap, variant
# apt), on a fresh clone of the committed HEAD, with nothing installed on this
# machine visible. CI calls it (.ci/run); run it yourself before you stop:
#
#   sudo bash deploy/fresh-check.sh test      # the test command (what CI runs)
#   sudo bash deploy/fresh-check.sh demo      # the demo command
#
# Caches that hold downloads and compiler output, never installed software, live
# outside the root and are bound into it so that a second run is fast:
#   $KILN_FRESH_CACHE/apt     -> /var/cache/apt/archives  (downloaded .debs)
#   $KILN_FRESH_CACHE/wheels  -> /root/.cache/kiln-wheels (downloaded wheels, KILN_WHEELHOUSE)
#   $KILN_FRESH_CACHE/ccache  -> /root/.cache/ccache      (compiler output)
# KILN_FRESH_CACHE defaults to /var/cache/kiln-fresh-check; set KILN_FRESH_NOCACHE=1
# for a cold run. KEEP=1 keeps the root afterwards for a look. Needs root (mounts,
# chroot). Exit status: that of the command inside the root.
set -euo pipefail
what=${1:-}
case "$what" in
  demo|test) ;;
  *) echo "usage: $0 demo|test" >&2; exit 2 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "fresh-check: needs root (mmdebstrap, mounts, chroot); run it with sudo" >&2; exit 2; }

repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
cache=${KILN_FRESH_CACHE:-/var/cache/kiln-fresh-check}
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-fresh.XXXXXX")
root=$work/root
log=$work/bootstrap.log
phase_start=$SECONDS
phase() { echo "fresh-check: $* (+$((SECONDS - phase_start)) s)"; }

cleanup() {
  local rc=$?
  if [ -n "${KEEP:-}" ]; then
    echo "fresh-check: root kept in $root (log $log)"
  else
    rm -rf --one-file-system "$work"
  fi
  exit $rc
}
trap cleanup EXIT

if ! command -v mmdebstrap >/dev/null; then
  phase "installing mmdebstrap on this machine (a tool of the check, not of Kiln)"
  DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >/dev/null
fi

phase "creating a Debian 12 root in $root"
mmdebstrap --quiet --variant=apt --include=ca-certificates,git,sudo bookworm "$root" >/dev/null
phase "root ready with $(chroot "$root" dpkg-query -W -f='.' | wc -c) Debian packages (the apt variant: none of Kiln's); cloning $(git -C "$repo" rev-parse --short HEAD) of $repo"
git clone -q --no-hardlinks "$repo" "$root/src/kiln"

# What every machine here is given: the certificate bundle and pip's settings that
# reach the registries, and the name servers.
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt" 2>/dev/null || true
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"
# pip's find-links folder, if this machine names one (it may be empty).
[ -n "${PIP_FIND_LINKS:-}" ] && [ -d "$PIP_FIND_LINKS" ] && mkdir -p "$root/$PIP_FIND_LINKS"
envs=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 CI=true)
while IFS='=' read -r name value; do
  envs+=("$name=$value")
done < <(env | grep -E '^(PIP_|HTTPS?_PROXY=|https?_proxy=|NO_PROXY=|no_proxy=|SSL_CERT_|REQUESTS_CA_BUNDLE=|CURL_CA_BUNDLE=)' || true)

if [ -z "${KILN_FRESH_NOCACHE:-}" ]; then
  mkdir -p "$cache/apt/partial" "$cache/wheels" "$cache/ccache" \
           "$root/var/cache/apt/archives" "$root/root/.cache/kiln-wheels" "$root/root/.cache/ccache"
  envs+=(KILN_WHEELHOUSE=/root/.cache/kiln-wheels)
  echo "fresh-check: caches in $cache ($(du -sh "$cache" 2>/dev/null | cut -f1))"
else
  echo "fresh-check: KILN_FRESH_NOCACHE set: a cold run, nothing bound in"
fi

# The mounts live in a private mount namespace: they vanish with it however this
# script ends, so the root can be deleted without touching what was bound in.
phase "running 'bash deploy/bootstrap.sh $what' inside the root (log $log)"
set +e
unshare --mount --propagation private bash -euo pipefail -c '
  root=$1; cache=$2; nocache=$3; shift 3
  for m in proc sys dev dev/pts; do mount --bind "/$m" "$root/$m"; done
  if [ -z "$nocache" ]; then
    mount --bind "$cache/apt" "$root/var/cache/apt/archives"
    mount --bind "$cache/wheels" "$root/root/.cache/kiln-wheels"
    mount --bind "$cache/ccache" "$root/root/.cache/ccache"
  fi
  exec chroot "$root" /usr/bin/env -i "$@" bash -c "cd /src/kiln && bash deploy/bootstrap.sh '"$what"'"
' fresh-check "$root" "$cache" "${KILN_FRESH_NOCACHE:-}" "${envs[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
phase "'bootstrap.sh $what' exited $rc in a brand-new root"
exit "$rc"
