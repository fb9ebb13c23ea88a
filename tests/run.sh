#!/usr/bin/env bash
#   tests/run.sh          the whole suite (what CI runs): the fast tier, then the integration
#                         tests (tests/it/, one binary) against real components
#   tests/run.sh --fast   the fast tier alone: formatting, lints, the repository's checks, the
#                         book, the shipped configuration and the unit tests; a few minutes,
#                         no Ceph
#
# The whole suite: formatting, lints, the shipped configuration, unit and
# integration tests (the API fuzzer, tests/it/api_fuzz.rs, among them). Installs what a fresh
# Debian 12 machine lacks first (Schemathesis included), and starts a real Ceph dashboard
# for the integration tests, and one of each other release of deploy/ceph-releases (18.2,
# 20.2) for the tests that run against every release (all stopped again on exit). 16.2's and 20.2's clusters hold data (an OSD, a
# radosgw, a pool, an RBD image, an RGW user: start-dashboard.sh --data), which tests such as
# tests/it/cluster_data.rs read.
set -euo pipefail
cd "$(dirname "$0")/.."

# The fast tier.
fast_tier() {
  local started=$SECONDS
  cargo fmt --all --check
  cargo clippy --locked --workspace --all-targets -- -D warnings
  deploy/tools/check-vendored.sh
  deploy/tools/vendor-patches.sh --check
  deploy/tools/check-imports.py
  # The shell scripts, as git names them (none has a space in its name).
  # shellcheck disable=SC2046
  shellcheck $(git ls-files '*.sh' .ci/run)
  .lint-venv/bin/ruff check deploy bench tests
  # The book: builds without a warning, and every link and anchor in it resolves.
  deploy/tools/check-book.py
  deploy/tools/render-diagrams.sh --check
  # The shipped configuration must validate (with a stand-in service account password).
  local conf_copy
  conf_copy=$(mktemp -d)
  cp -r conf/. "$conf_copy/"
  printf 'stand-in' > "$conf_copy/upstream.pass"
  chmod 600 "$conf_copy/upstream.pass"
  cargo run --locked --quiet -- check-config --config "$conf_copy/clustergate.toml"
  rm -rf "$conf_copy"
  cargo test --locked --lib --bins
  echo "run.sh: the fast tier passed in $((SECONDS - started)) s" >&2
}

if [[ "${1:-}" == "--fast" ]]; then
  deploy/install-deps.sh --fast
  fast_tier
  exit 0
fi

deploy/install-deps.sh --test

declare -A release_dirs=() release_jobs=()
dash_dir=$(mktemp -d /tmp/clustergate-test-ceph.XXXXXX)
cleanup() {
  deploy/ceph-dev/stop-dashboard.sh "$dash_dir" --purge >/dev/null 2>&1 || true
  for release in "${!release_dirs[@]}"; do
    wait "${release_jobs[$release]}" 2>/dev/null || true
    deploy/ceph-dev/stop-dashboard.sh "${release_dirs[$release]}" --purge >/dev/null 2>&1 || true
    rm -f "${release_dirs[$release]}.log"
  done
}
trap cleanup EXIT

# The dashboards of the releases other than the shared one's (deploy/ceph-releases:
# TEST_CLUSTER) start in the background while the lints run; each start's output (its time
# included) is in DIR.log.
while read -r release _ _ cluster _; do
  [[ $release != \#* && $cluster != shared ]] || continue
  data=()
  [[ $cluster != data ]] || data=(--data)
  release_dirs[$release]=$(mktemp -d "/tmp/clustergate-test-ceph-$release.XXXXXX")
  deploy/ceph-dev/start-dashboard.sh --release "$release" "${data[@]}" "${release_dirs[$release]}" </dev/null \
    >"${release_dirs[$release]}.log" 2>&1 &
  release_jobs[$release]=$!
done < <(grep -v '^[[:space:]]*$' deploy/ceph-releases)

fast_tier
# The dependency tree's licences, sources and duplicates (deny.toml).
.tools/bin/cargo-deny --log-level error check licenses bans sources

# One dashboard shared by the integration tests; tests that fail managers over or change
# its settings start their own.
deploy/ceph-dev/start-dashboard.sh --data "$dash_dir" >/dev/null
export CG_TEST_DASHBOARD_ENV="$dash_dir/dashboard.env"
for release in "${!release_jobs[@]}"; do
  if ! wait "${release_jobs[$release]}"; then
    cat "${release_dirs[$release]}.log" >&2
    echo "run.sh: the Ceph $release dashboard did not start" >&2
    exit 1
  fi
  grep -h 'ready:' "${release_dirs[$release]}.log" >&2
  export "CG_TEST_DASHBOARD_ENV_${release/./_}=${release_dirs[$release]}/dashboard.env"
done

# The integration tests, one area (a module of tests/it/) at a time: the areas share the
# real dashboards, and some read a dashboard's state as a whole (its audit log, its
# accounts, what a fuzzer may have changed), so only the tests of one area overlap, as when
# each area was a binary of its own. The binary is built once.
cargo test --locked --test it --no-run
mapfile -t areas < <(sed -n 's/^mod \([a-z0-9_]*\);$/\1/p' tests/it/main.rs)
failed=()
for area in "${areas[@]}"; do
  # A filter matches anywhere in a test's path: `cluster::` would run multi_cluster's too.
  skips=()
  for other in "${areas[@]}"; do
    if [[ $other != "$area" && $other == *"_$area" ]]; then
      skips+=(--skip "$other::")
    fi
  done
  cargo test --locked --test it -- "$area::" "${skips[@]}" || failed+=("$area")
done
if ((${#failed[@]} > 0)); then
  echo "run.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "run.sh: everything passed in $SECONDS s" >&2
