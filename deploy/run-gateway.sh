#!/usr/bin/env bash
# Builds clustergate (release) and starts it with the shipped configuration, or another:
#   deploy/run-gateway.sh [CONFIG]        default conf/clustergate.toml
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/install-deps.sh
cargo build --release --locked --quiet
exec target/release/clustergate run --config "${1:-conf/clustergate.toml}"
