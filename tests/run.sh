#!/usr/bin/env bash
# Runs the whole test suite: formatting, lints, unit and integration tests.
# Installs what a fresh Debian 12 machine lacks first.
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/install-deps.sh --test
cargo fmt --check
cargo clippy --locked --all-targets -- -D warnings
cargo run --locked --quiet -- check-config --config conf/clustergate.toml
cargo test --locked
