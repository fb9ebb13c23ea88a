#!/usr/bin/env bash
# Runs the whole test suite: formatting, lints, the shipped configuration, unit and
# integration tests (the API fuzzer, tests/api_fuzz.rs, among them). Installs what a fresh
# Debian 12 machine lacks first (Schemathesis included), and starts a real Ceph dashboard
# for the integration tests (stopped again on exit).
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/install-deps.sh --test

cargo fmt --check
cargo clippy --locked --all-targets -- -D warnings
deploy/tools/check-vendored.sh
deploy/tools/vendor-patches.sh --check
deploy/tools/check-imports.py

# The shipped configuration must validate (with a stand-in service account password).
conf_copy=$(mktemp -d)
dash_dir=$(mktemp -d /tmp/clustergate-test-ceph.XXXXXX)
cleanup() {
  deploy/ceph-dev/stop-dashboard.sh "$dash_dir" --purge >/dev/null 2>&1 || true
  rm -rf "$conf_copy"
}
trap cleanup EXIT
cp -r conf/. "$conf_copy/"
printf 'stand-in' > "$conf_copy/upstream.pass"
chmod 600 "$conf_copy/upstream.pass"
cargo run --locked --quiet -- check-config --config "$conf_copy/clustergate.toml"

# One dashboard shared by the integration tests; tests that fail managers over or change
# its settings start their own.
deploy/ceph-dev/start-dashboard.sh "$dash_dir" >/dev/null
export CG_TEST_DASHBOARD_ENV="$dash_dir/dashboard.env"

cargo test --locked
