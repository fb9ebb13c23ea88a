#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test clustergate.
# Idempotent: installs only what is missing. Needs root (or sudo) when something is missing.
#   deploy/install-deps.sh            build dependencies (cmake, a C compiler)
#   deploy/install-deps.sh --test     also what the test suite uses (the real Ceph
#                                     dashboard's packages are installed by
#                                     deploy/ceph-dev/start-dashboard.sh)
set -euo pipefail

want=(cmake gcc make)
if [[ "${1:-}" == "--test" ]]; then
  # curl for the dashboard harness; Chromium and Node for the browser tests; Redis and
  # HAProxy for the tests of several gateways; Prometheus (and its promtool) for the
  # deploy kit's scrape config, alert rules and their unit tests.
  want+=(curl chromium nodejs redis-server haproxy prometheus)
fi

missing=()
for pkg in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done

if ! command -v cargo >/dev/null 2>&1; then
  echo "install-deps: cargo is not on PATH; install a Rust toolchain (rustup) first" >&2
  exit 1
fi

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
# Redis, HAProxy and Prometheus start their system services on install (Prometheus on
# :9090); the tests run their own instances, so keep the packaged ones from starting.
policy_rc=""
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  "${sudo[@]}" sh -c 'printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d'
  policy_rc=/usr/sbin/policy-rc.d
  trap '"${sudo[@]}" rm -f "$policy_rc"' EXIT
fi
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
