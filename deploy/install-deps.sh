#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test clustergate.
# Idempotent: installs only what is missing. Needs root (or sudo) when something is missing.
#   deploy/install-deps.sh            build dependencies (cmake, a C compiler)
#   deploy/install-deps.sh --test     also what the test suite uses (the real Ceph
#                                     dashboard's packages are installed by
#                                     deploy/ceph-dev/start-dashboard.sh), and
#                                     Schemathesis and kubernetes-validate in .test-venv/ for
#                                     tests/api_fuzz.rs and tests/kubernetes.rs
#                                     (CG_TEST_VENV: another place for that venv)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

testing=false
want=(cmake gcc make)
if [[ "${1:-}" == "--test" ]]; then
  testing=true
  # curl for the dashboard harness; Chromium and Node for the browser tests; Redis and
  # HAProxy for the tests of several gateways, Redis Sentinel for their failover;
  # Prometheus (and its promtool) for the deploy kit's scrape config, alert rules and their
  # unit tests; Python's venv for the API fuzzer.
  want+=(curl chromium nodejs redis-server redis-sentinel haproxy prometheus python3 python3-venv)
fi

missing=()
for pkg in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done

if ! command -v cargo >/dev/null 2>&1; then
  echo "install-deps: cargo is not on PATH; install a Rust toolchain (rustup) first" >&2
  exit 1
fi

install_packages() {
  echo "install-deps: installing ${missing[*]}" >&2
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  # Redis, HAProxy and Prometheus start their system services on install (Prometheus on
  # :9090); the tests run their own instances, so keep the packaged ones from starting.
  local policy_rc=""
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    "${sudo[@]}" sh -c 'printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d'
    policy_rc=/usr/sbin/policy-rc.d
  fi
  export DEBIAN_FRONTEND=noninteractive
  if ! "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  if [[ -n "$policy_rc" ]]; then
    "${sudo[@]}" rm -f "$policy_rc"
  fi
}

# The test suite's Python tools, pinned with their dependencies, in a venv of its own (never
# the system Python's packages), made again when the pins or Debian's Python change:
# Schemathesis (tests/api_fuzz.rs) and kubernetes-validate (tests/kubernetes.rs).
install_test_venv() {
  local venv=${CG_TEST_VENV:-$repo/.test-venv}
  local requirements=("$repo/tests/api_fuzz/requirements.txt" "$repo/tests/kubernetes/requirements.txt")
  local stamp
  stamp="$(cat "${requirements[@]}" | sha256sum | cut -d' ' -f1) $(/usr/bin/python3 --version)"
  if [[ -x "$venv/bin/schemathesis" && "$(cat "$venv/.installed" 2>/dev/null)" == "$stamp" ]]; then
    return
  fi
  echo "install-deps: installing the test tools into $venv" >&2
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input \
    -r "${requirements[0]}" -r "${requirements[1]}"
  printf '%s\n' "$stamp" >"$venv/.installed"
}

if ((${#missing[@]} > 0)); then
  install_packages
fi
if $testing; then
  install_test_venv
fi
