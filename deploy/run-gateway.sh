#!/usr/bin/env bash
# Builds clustergate (release) and starts it with the shipped configuration, or another:
#   deploy/run-gateway.sh [CONFIG]        default conf/clustergate.toml
#
# The shipped configuration forwards to a dashboard on 127.0.0.1:18080 with the service
# account password in conf/upstream.pass. When that file does not exist yet, this script
# first starts a real Ceph dashboard to try the gateway with (deploy/ceph-dev/start-dashboard.sh:
# one mon and one mgr on 127.0.0.1, dashboard on 18080, state in /tmp/clustergate-ceph) and
# copies its service account's password there. Stop that dashboard with:
#   deploy/ceph-dev/stop-dashboard.sh /tmp/clustergate-ceph --purge
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:-conf/clustergate.toml}
deploy/install-deps.sh

if [[ "$config" == conf/clustergate.toml && ! -e conf/upstream.pass ]]; then
  echo "run-gateway: no conf/upstream.pass: starting a Ceph dashboard to try the gateway with" >&2
  dir=${CG_CEPH_DIR:-/tmp/clustergate-ceph}
  CG_CEPH_MGR_X_PORT=${CG_CEPH_MGR_X_PORT:-18080} deploy/ceph-dev/start-dashboard.sh "$dir" >/dev/null
  install -m 600 "$dir/upstream.pass" conf/upstream.pass
  echo "run-gateway: dashboard ready; its users and passwords are in $dir/dashboard.env" >&2
fi

cargo build --release --locked --quiet
exec target/release/clustergate run --config "$config"
