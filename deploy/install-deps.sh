#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test clustergate.
# Idempotent: installs only what is missing. Needs root (or sudo) when something is missing.
#   deploy/install-deps.sh            build dependencies (cmake, a C compiler)
#   deploy/install-deps.sh --fast     also what the fast tier of the tests uses (tests/run.sh
#                                     --fast: Redis and Sentinel for the state stores' unit
#                                     tests, patch and Python for the repository's checks,
#                                     ShellCheck, ruff in .lint-venv/, and mdbook in
#                                     .tools/ and Graphviz for the book's checks)
#   deploy/install-deps.sh --test     also what the test suite uses (the real Ceph
#                                     dashboard's packages are installed by
#                                     deploy/ceph-dev/start-dashboard.sh; the OSD's and the
#                                     radosgw's for clusters with data here), the Debian
#                                     roots that run Ceph 18.2 and 20.2 with the same (built
#                                     once, ~4-5 min each, then cached: no test downloads
#                                     anything), and
#                                     Schemathesis and kubernetes-validate in .test-venv/ for
#                                     tests/it/api_fuzz.rs and tests/it/kubernetes.rs
#                                     (CG_TEST_VENV: another place for that venv),
#                                     the browser test's driver in tests/ui, and
#                                     cargo-deny in .tools/ (deny.toml)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

testing=false
want=(cmake gcc make)
linting=false
fast=(redis-server redis-sentinel patch python3 python3-venv shellcheck graphviz)
if [[ "${1:-}" == "--fast" ]]; then
  linting=true
  want+=("${fast[@]}")
fi
if [[ "${1:-}" == "--test" ]]; then
  testing=true
  linting=true
  want+=(shellcheck graphviz)
  # curl for the dashboard harness (and, with jq, the book's quick start that
  # tests/it/book_examples.rs runs); Chromium and Node for the browser tests; Redis and
  # HAProxy for the tests of several gateways, Redis Sentinel for their failover;
  # Prometheus (and its promtool) for the deploy kit's scrape config, alert rules and their
  # unit tests; Python's venv for the API fuzzer; patch for deploy/tools/vendor-patches.sh
  # (the vendored pingora's check); debootstrap for the Debian roots of Ceph 18.2 and 20.2;
  # ceph-osd and radosgw for the test clusters that hold data (start-dashboard.sh --data).
  want+=(curl jq chromium nodejs redis-server redis-sentinel haproxy prometheus python3 python3-venv patch debootstrap
    ceph-osd radosgw)
fi

missing=()
for pkg in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
# Debian's nodejs comes without npm (its own package); another nodejs (NodeSource's) has it
# and conflicts with Debian's npm.
if $testing && ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi

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
# Schemathesis (tests/it/api_fuzz.rs) and kubernetes-validate (tests/it/kubernetes.rs).
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

# The browser test's driver (playwright-core, pinned by tests/ui/package-lock.json; it
# downloads no browser: the test drives Debian's chromium), made again when the lock changes.
install_ui_driver() {
  local ui=$repo/tests/ui stamp
  stamp=$(sha256sum "$ui/package-lock.json" | cut -d' ' -f1)
  if [[ -f "$ui/node_modules/playwright-core/package.json" && "$(cat "$ui/node_modules/.installed" 2>/dev/null)" == "$stamp" ]]; then
    return
  fi
  echo "install-deps: installing the browser test's driver into tests/ui/node_modules" >&2
  (cd "$ui" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --silent)
  printf '%s\n' "$stamp" >"$ui/node_modules/.installed"
}

# The single sign-on tests' identity provider (tests/oidc/provider.js): panva's
# oidc-provider, OpenID Certified, pinned in tests/oidc/package-lock.json.
install_oidc_provider() {
  local dir=$repo/tests/oidc stamp
  stamp=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
  if [[ -f "$dir/node_modules/oidc-provider/package.json" && "$(cat "$dir/node_modules/.installed" 2>/dev/null)" == "$stamp" ]]; then
    return
  fi
  echo "install-deps: installing the single sign-on tests' provider into tests/oidc/node_modules" >&2
  (cd "$dir" && npm ci --no-audit --no-fund --silent)
  printf '%s\n' "$stamp" >"$dir/node_modules/.installed"
}

if ((${#missing[@]} > 0)); then
  install_packages
fi
# ruff, pinned, in a venv of its own (the fast tier needs none of the test tools).
install_lint_venv() {
  local venv=$repo/.lint-venv pins=$repo/deploy/tools/lint-requirements.txt stamp
  stamp="$(sha256sum <"$pins" | cut -d' ' -f1) $(/usr/bin/python3 --version)"
  if [[ -x "$venv/bin/ruff" && "$(cat "$venv/.installed" 2>/dev/null)" == "$stamp" ]]; then
    return
  fi
  echo "install-deps: installing ruff into $venv" >&2
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$pins"
  printf '%s\n' "$stamp" >"$venv/.installed"
}

# A tool from crates.io, pinned, built into .tools/ once (again only when `TOOL --version`
# does not print VERSION_TEXT). Built without optimisation (--debug): the tools run for
# seconds, their builds would take twice as long optimised.
#   install_tool CRATE VERSION VERSION_TEXT [cargo install options...]
install_tool() {
  local crate=$1 version=$2 version_text=$3
  shift 3
  if [[ "$("$repo/.tools/bin/$crate" --version 2>/dev/null)" == "$version_text" ]]; then
    return
  fi
  echo "install-deps: building $crate $version into .tools/" >&2
  cargo install --quiet --debug --locked --version "$version" "$@" --root "$repo/.tools" "$crate"
}

# mdBook: the book under docs/, which the fast tier builds and checks
# (deploy/tools/check-book.py). Without its `serve` and `watch` features (a web server and a
# file watcher the check does not use: far fewer crates): about 2 minutes of build on 2
# cores, the book in a second.
install_mdbook() {
  install_tool mdbook 0.4.52 "mdbook v0.4.52" --no-default-features --features search
}

if $linting; then
  install_lint_venv
  install_mdbook
fi

# The releases of deploy/ceph-releases that run in a Debian root (18.2, 20.2), for the tests
# that run against every release: each root is built once into
# /var/cache/clustergate-ceph-dev and reused (needs root), and ceph-osd and radosgw are
# added to it once (a root built before has them installed).
install_release_roots() {
  local release suite sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  while read -r release suite _; do
    [[ $release != \#* && $suite != host ]] || continue
    "${sudo[@]}" "$repo/deploy/ceph-dev/release-root.sh" data "$release" </dev/null >/dev/null
  done < <(grep -v '^[[:space:]]*$' "$repo/deploy/ceph-releases")
}

# cargo-deny: the licence, duplicate and source checks of the dependency tree against
# deny.toml. Debug: 232 CPU-seconds of build instead of 408, and its check of this tree still
# takes 5 s.
install_cargo_deny() {
  install_tool cargo-deny 0.20.2 "cargo-deny 0.20.2"
}

if $testing; then
  install_cargo_deny
  install_test_venv
  install_ui_driver
  install_oidc_provider
  install_release_roots
fi
