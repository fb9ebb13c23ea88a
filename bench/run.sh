#!/usr/bin/env bash
# bench/run.sh -- clustergate's benchmark suite: the gateway side by side with nginx and
# HAProxy on the same machine in the same run, plus its token check against the real Ceph
# dashboard, login cost and memory. Everything on 127.0.0.1, every run bounded in time.
#
#   bench/run.sh                 full run (about 14 minutes on 2 cores)
#   BENCH_QUICK=1 bench/run.sh   short runs to check the suite end to end (about 5.5 minutes)
#
# Writes bench/results/<UTC date-time>.json, bench/results/latest.{json,svg,md}.
# Installs what is missing (wrk, nghttp2-client, nginx, haproxy, curl; the Ceph packages
# through deploy/ceph-dev/start-dashboard.sh) with apt-get; needs root or sudo for that.
# See bench/README.md for what is measured and every BENCH_* variable.
set -euo pipefail

ROOT=$(cd "$(dirname "$(realpath "$0")")/.." && pwd)
BENCH=$ROOT/bench
TOOL=(python3 "$BENCH/benchtool.py")
RESULTS=${BENCH_RESULTS_DIR:-$BENCH/results}
T0=$SECONDS
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ)

is_true() { case "${1:-}" in 1|true|yes|on) return 0 ;; *) return 1 ;; esac; }
log() { printf '[bench %4ds] %s\n' "$((SECONDS - T0))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ------------------------------------------------------------------ settings
QUICK=0; is_true "${BENCH_QUICK:-}" && QUICK=1
if [ "$QUICK" = 1 ]; then
  d_rounds=2; d_sat=3; d_rate_s=4; d_check_s=3; d_check_rounds=1; d_flood_s=4; d_flood_rounds=1; d_logins=5
else
  d_rounds=3; d_sat=6; d_rate_s=6; d_check_s=8; d_check_rounds=2; d_flood_s=10; d_flood_rounds=2; d_logins=20
fi
ROUNDS=${BENCH_ROUNDS:-$d_rounds}                  # interleaved rounds of the proxy comparison
SAT_S=${BENCH_SATURATION_SECONDS:-$d_sat}          # one wrk run at saturation
RATE=${BENCH_RATE:-5000}                           # the fixed rate of the latency runs, req/s
RATE_S=${BENCH_RATE_SECONDS:-$d_rate_s}            # one h2load run at the fixed rate
CONNS=${BENCH_CONNECTIONS:-50}                     # client connections of the proxy runs
CHECK_S=${BENCH_CHECK_SECONDS:-$d_check_s}         # one /api/auth/check run
CHECK_ROUNDS=${BENCH_CHECK_ROUNDS:-$d_check_rounds}
CHECK_CONNS=${BENCH_CHECK_CONNECTIONS:-10}
FLOOD_S=${BENCH_FLOOD_SECONDS:-$d_flood_s}         # one proxied-latency run with / without the login flood
FLOOD_ROUNDS=${BENCH_FLOOD_ROUNDS:-$d_flood_rounds}
FLOOD_CLIENTS=${BENCH_FLOOD_CLIENTS:-50}
LOGINS=${BENCH_LOGINS:-$d_logins}                  # sequential logins timed
IDLE_CONNS=${BENCH_IDLE_CONNECTIONS:-10000}
CG_THREADS=${BENCH_CG_THREADS:-1}                  # clustergate's server.threads (one core: 1)
CG_LOG=${BENCH_CG_LOG:-warn}                       # RUST_LOG of clustergate (info logs every request)
TLS_KEY=${BENCH_TLS_KEY:-rsa}                      # the TLS contenders' certificate key: rsa (2048) or ec (P-256)
SKIP_CEPH=0; is_true "${BENCH_SKIP_CEPH:-}" && SKIP_CEPH=1
PERF=0; is_true "${BENCH_PERF:-}" && PERF=1
CALLGRIND=1; [ -n "${BENCH_CALLGRIND:-}" ] && ! is_true "$BENCH_CALLGRIND" && CALLGRIND=0
CG_REQUESTS=${BENCH_CALLGRIND_REQUESTS:-$([ "$QUICK" = 1 ] && echo 1000 || echo 3000)}  # per callgrind count
ONLY_CG=0; is_true "${BENCH_ONLY_CALLGRIND:-}" && ONLY_CG=1   # only the instruction counts (section 8)
KEEP=0; is_true "${BENCH_KEEP:-}" && KEEP=1
BUILD=1; is_true "${BENCH_NO_BUILD:-}" && BUILD=0
for v in ROUNDS SAT_S RATE RATE_S CONNS CHECK_S CHECK_ROUNDS CHECK_CONNS FLOOD_S FLOOD_ROUNDS \
         FLOOD_CLIENTS LOGINS IDLE_CONNS CG_THREADS CG_REQUESTS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer (got '${!v}')"
done
RPS_PER_CONN=$(( (RATE + CONNS - 1) / CONNS ))     # h2load --rps is per client
RATE=$(( RPS_PER_CONN * CONNS ))

# Pinning: servers on one core, load generators on another, so that they do not take
# turns on the same core (the figures swing by a third unpinned on 2 cores).
NCPU=$(nproc)
if [ -n "${BENCH_SERVER_CPUS:-}${BENCH_LOAD_CPUS:-}" ]; then
  SERVER_CPUS=${BENCH_SERVER_CPUS:?set both BENCH_SERVER_CPUS and BENCH_LOAD_CPUS}
  LOAD_CPUS=${BENCH_LOAD_CPUS:?set both BENCH_SERVER_CPUS and BENCH_LOAD_CPUS}
elif [ "$NCPU" -ge 2 ]; then
  SERVER_CPUS=0; LOAD_CPUS=1
else
  SERVER_CPUS=""; LOAD_CPUS=""
fi
srv() { if [ -n "$SERVER_CPUS" ]; then taskset -c "$SERVER_CPUS" "$@"; else "$@"; fi; }
ld() { if [ -n "$LOAD_CPUS" ]; then taskset -c "$LOAD_CPUS" "$@"; else "$@"; fi; }

V1='application/vnd.ceph.api.v1.0+json'
HEALTH=/api/health/minimal

# ------------------------------------------------------------------ cleanup: only what we started
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clustergate-bench.XXXXXX")
PIDS=()          # servers and background load generators, by pid
declare -A PID_START=()   # pid -> its start time, so that a pid reused by someone else is left alone
CEPH_DIR=""      # set once start-dashboard.sh has been called
POLICY_RC=""     # a policy-rc.d we created for the install (removed after it)
proc_start() {  # pid -> start time in clock ticks since boot; empty if gone
  local st
  st=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  st=${st##*) }
  # shellcheck disable=SC2086  # split the fields on purpose
  set -- $st
  case "$1" in Z|X|x) return 0 ;; esac   # a zombie has exited
  printf '%s' "${20}"
}
ours() { [ -n "${PID_START[$1]:-}" ] && [ "$(proc_start "$1")" = "${PID_START[$1]}" ]; }
track() { PIDS+=("$1"); PID_START[$1]=$(proc_start "$1"); }
forget() {  # pid: a background job that has been waited for
  local p keep=()
  for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  PIDS=(${keep[@]+"${keep[@]}"}); unset "PID_START[$1]"
}
cleanup() {
  local rc=$? pid i alive
  trap - EXIT INT TERM
  [ -z "$POLICY_RC" ] || rm -f "$POLICY_RC"
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    if ours "${PIDS[i]}"; then kill -TERM "${PIDS[i]}" 2>/dev/null || true; fi
  done
  for ((i = 0; i < 50; i++)); do
    alive=0
    for pid in ${PIDS[@]+"${PIDS[@]}"}; do ours "$pid" && alive=1; done
    [ "$alive" = 1 ] || break
    sleep 0.1
  done
  for pid in ${PIDS[@]+"${PIDS[@]}"}; do
    if ours "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
  done
  wait 2>/dev/null || true
  if [ -n "$CEPH_DIR" ] && [ -d "$CEPH_DIR" ]; then
    "$ROOT/deploy/ceph-dev/stop-dashboard.sh" "$CEPH_DIR" --purge >>"$WORK/ceph-stop.log" 2>&1 ||
      log "stop-dashboard.sh failed; see $WORK/ceph-stop.log"
  fi
  if [ "$rc" = 0 ] && [ "$KEEP" = 0 ]; then
    rm -rf -- "$WORK"
  else
    log "work directory kept: $WORK (logs and configuration)"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# Background processes are started as simple commands (taskset execs the program), so that
# $! is the server's own pid and the cleanup above signals it directly.
start_server() {  # name command... : runs pinned to the server cores, records its pid
  local name=$1; shift
  if [ -n "$SERVER_CPUS" ]; then
    taskset -c "$SERVER_CPUS" "$@" >"$WORK/$name.out" 2>&1 &
  else
    "$@" >"$WORK/$name.out" 2>&1 &
  fi
  track $!
  log "started $name (pid $!)"
}
LAST_BG=""
start_load_bg() {  # outfile command... : a background load generator on the load cores
  local outf=$1; shift
  if [ -n "$LOAD_CPUS" ]; then
    taskset -c "$LOAD_CPUS" "$@" >"$outf" 2>&1 &
  else
    "$@" >"$outf" 2>&1 &
  fi
  LAST_BG=$!
  track "$LAST_BG"
}

# ------------------------------------------------------------------ packages
need_pkgs=()
command -v wrk >/dev/null 2>&1 || need_pkgs+=(wrk)
command -v h2load >/dev/null 2>&1 || need_pkgs+=(nghttp2-client)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need_pkgs+=(nginx)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || need_pkgs+=(haproxy)
command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || need_pkgs+=(redis-server)
command -v curl >/dev/null 2>&1 || need_pkgs+=(curl)
command -v taskset >/dev/null 2>&1 || need_pkgs+=(util-linux)
command -v python3 >/dev/null 2>&1 || need_pkgs+=(python3)
if [ "$PERF" = 1 ] && ! command -v perf >/dev/null 2>&1; then need_pkgs+=(linux-perf); fi
if [ "$CALLGRIND" = 1 ] && ! command -v valgrind >/dev/null 2>&1; then need_pkgs+=(valgrind); fi
if [ "${#need_pkgs[@]}" -gt 0 ]; then
  log "installing ${need_pkgs[*]}"
  sudo=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "missing ${need_pkgs[*]} and not root (no sudo)"
    sudo=(sudo)
  fi
  # The nginx and haproxy packages start their system services on install; the
  # benchmark runs its own instances, so keep the packaged ones from starting.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    "${sudo[@]}" sh -c 'printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d'
    POLICY_RC=/usr/sbin/policy-rc.d
  fi
  export DEBIAN_FRONTEND=noninteractive
  if ! "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >"$WORK/apt.log" 2>&1; then
    "${sudo[@]}" apt-get update -qq >>"$WORK/apt.log" 2>&1 || true
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >>"$WORK/apt.log" 2>&1 ||
      die "apt-get install ${need_pkgs[*]} failed; see $WORK/apt.log"
  fi
  [ -z "$POLICY_RC" ] || { "${sudo[@]}" rm -f "$POLICY_RC"; POLICY_RC=""; }
fi
export PATH=$PATH:/usr/sbin:/sbin
NGINX=$(command -v nginx); HAPROXY=$(command -v haproxy); REDIS=$(command -v redis-server)

# 10,000 client connections need as many descriptors in the gateway and in the client.
hard=$(ulimit -Hn)
if [ "$hard" = unlimited ] || [ "$hard" -ge 65536 ]; then ulimit -n 65536; else ulimit -n "$hard"; fi
NOFILE=$(ulimit -n)
if [ "$NOFILE" -lt $((IDLE_CONNS + 500)) ]; then
  if ! { ulimit -Hn $((IDLE_CONNS + 2000)) 2>/dev/null && ulimit -n $((IDLE_CONNS + 2000)); }; then
    die "open files limit $NOFILE is too low for $IDLE_CONNS connections (raise ulimit -n)"
  fi
  NOFILE=$(ulimit -n)
fi

# ------------------------------------------------------------------ build
if [ "$BUILD" = 1 ]; then
  "$ROOT/deploy/install-deps.sh" >&2
  log "cargo build --release"
  (cd "$ROOT" && cargo build --release --quiet && cargo build --release --quiet --example pingora-floor) ||
    die "cargo build --release failed"
fi
CG=${BENCH_CLUSTERGATE_BIN:-$ROOT/target/release/clustergate}   # another build, e.g. a commit's before a change
FLOOR=${BENCH_FLOOR_BIN:-$ROOT/target/release/examples/pingora-floor}   # likewise for the floor
for bin in "$CG" "$FLOOR"; do [ -x "$bin" ] || die "$bin is missing (run without BENCH_NO_BUILD)"; done
BUILD_S=$((SECONDS - T0))
T_MEASURE=$SECONDS

# ------------------------------------------------------------------ configuration
read -r P_BACKEND P_NGINX P_HAPROXY P_HAPROXY_UNPINNED P_FLOOR P_CG P_CG_METRICS P_CGR P_CGR_METRICS P_REDIS \
  P_FLOOR_NOSTEAL P_CGS P_CGS_METRICS P_NGINX_TLS P_NGINX_STATUS P_HAPROXY_TLS P_CGT P_CGT_METRICS \
  <<<"$("${TOOL[@]}" ports 18)"
BACKEND_TOKEN=$("${TOOL[@]}" backend-token)
SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')          # 64 hex characters
BENCH_USER=bench
BENCH_PW=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
mkdir -p "$WORK/cg" "$WORK/nginx-backend" "$WORK/nginx-proxy" "$WORK/haproxy" "$WORK/out"
( umask 077; printf '%s\n' "$SECRET" >"$WORK/cg/jwt-secret"; printf 'unused\n' >"$WORK/cg/upstream.pass" )
HASH=$(printf '%s' "$BENCH_PW" | "$CG" hash-password)
cat >"$WORK/cg/users.toml" <<EOF
[[users]]
username = "$BENCH_USER"
password_hash = "$HASH"
roles = ["read-only"]
enabled = true
EOF
cat >"$WORK/cg/clustergate.toml" <<EOF
# clustergate for bench/run.sh: plain HTTP on loopback, in front of the nginx stand-in dashboard
[server]
listen = "127.0.0.1:$P_CG"
tls = false
state_dir = "state"
threads = $CG_THREADS
shutdown_grace_seconds = 1
# stop at once on SIGTERM (no balancer to drain from): the cleanup waits 5 s before SIGKILL,
# and deploy/tools/pgo-build.sh's instrumented binary writes its profile only at its exit
drain_seconds = 0
# every client connection (10,000 of them idle) comes from 127.0.0.1
max_connections_per_ip = 0
[metrics]
listen = "127.0.0.1:$P_CG_METRICS"
[auth]
users_file = "users.toml"
secret_file = "jwt-secret"
# the login flood uses wrong passwords for a real user: no lockout and no limit per client
# address (all of it comes from 127.0.0.1), so every one is hashed
lockout_attempts = 0
max_failed_logins_per_ip_per_minute = 0
[upstream]
servers = ["http://127.0.0.1:$P_BACKEND"]
health_path = "/"
username = "clustergate"
password_file = "upstream.pass"
# The stand-in dashboard cannot hold the accounts the default identity ("roles") makes, so
# requests go as the service account: what is measured is forwarding. The roles identity
# adds, per request, the account's keyed name and its token's lookup.
identity = "service"
# The places that protect a dashboard (8 at once, half of them and of the queue per user:
# CherryPy serves with 10 threads) would queue the requests of the bench's one user on 50
# connections, then refuse most of them with 503, and the rows would measure refusals. The
# stand-in is nginx, without such a pool, and HAProxy in front of it queues nothing: room
# for every connection of every row, so that each request takes a place at once.
max_in_flight = 1024
max_queued = 1024
[access]
scopes_file = "$ROOT/conf/scopes/16.2.toml"
# What is measured here is forwarding; with the cache on (the default) the gateway would
# answer the polled health path from memory. The cache's effect is bench/manager_load.py's.
[answer_cache]
enabled = false
# The key row of section 8 sends 3,000 requests with one key at once: its bucket holds them.
[api_keys]
rate_per_second = 100000
burst = 100000
EOF
"$CG" check-config --config "$WORK/cg/clustergate.toml" >"$WORK/cg/check-config.out" 2>&1 ||
  die "bench clustergate config refused: $(cat "$WORK/cg/check-config.out")"
# One certificate per run for every TLS contender, for 127.0.0.1: RSA 2048 by default. With
# ECDSA P-256 (BENCH_TLS_KEY=ec) a full handshake costs the client (verifying) more than the
# server (signing), and curl, not the servers, limited the handshake runs on 2 cores.
mkdir -p "$WORK/tls"
case "$TLS_KEY" in
  rsa) key_opts=(-newkey rsa:2048) ;;
  ec) key_opts=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1) ;;
  *) die "BENCH_TLS_KEY must be rsa or ec (got '$TLS_KEY')" ;;
esac
openssl req -x509 "${key_opts[@]}" -nodes -days 2 -subj /CN=localhost \
  -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" -keyout "$WORK/tls/key.pem" -out "$WORK/tls/cert.pem" \
  >"$WORK/tls/openssl.out" 2>&1 || die "openssl could not make the certificate: $(cat "$WORK/tls/openssl.out")"
cat "$WORK/tls/cert.pem" "$WORK/tls/key.pem" >"$WORK/tls/haproxy.pem"
# Variants of the same gateway (their own listeners and state directories; the same users
# and secret, so one token serves all): DIR PORT METRICS_PORT [sed expressions...]
gateway_variant() {
  local dir=$WORK/$1 port=$2 metrics=$3; shift 3
  mkdir -p "$dir"
  cp -p "$WORK/cg/jwt-secret" "$WORK/cg/upstream.pass" "$WORK/cg/users.toml" "$dir/"
  sed -e "s/127.0.0.1:$P_CG\"/127.0.0.1:$port\"/" -e "s/127.0.0.1:$P_CG_METRICS\"/127.0.0.1:$metrics\"/" "$@" \
    "$WORK/cg/clustergate.toml" >"$dir/clustergate.toml"
}
# with its state in Redis
gateway_variant cgr "$P_CGR" "$P_CGR_METRICS"
# The key that seals tokens in Redis (state.redis.encryption_keys), owner-only as required.
(umask 077 && head -c 32 /dev/urandom | base64 >"$WORK/cgr/redis.key")
printf '[state]\nbackend = "redis"\n[state.redis]\nurl = "redis://127.0.0.1:%s"\nencryption_keys = [{ kid = "1", secret_file = "redis.key" }]\n' "$P_REDIS" >>"$WORK/cgr/clustergate.toml"
# with the other runtime than its default (work stealing on)
gateway_variant cgs "$P_CGS" "$P_CGS_METRICS" -e "s/^threads = .*/&\nwork_stealing = true/"
# terminating TLS itself (rustls)
gateway_variant cgt "$P_CGT" "$P_CGT_METRICS" \
  -e "s|^tls = false|tls = true\ncert_file = \"$WORK/tls/cert.pem\"\nkey_file = \"$WORK/tls/key.pem\"|"
for dir in cgr cgs cgt; do
  "$CG" check-config --config "$WORK/$dir/clustergate.toml" >"$WORK/$dir/check-config.out" 2>&1 ||
    die "bench clustergate config $dir refused: $(cat "$WORK/$dir/check-config.out")"
done

# The stand-in dashboard: a fixed body shaped like GET /api/health/minimal of Ceph 16.2
# (~1 KB), what the gateway's service account login needs, and the health check path.
HEALTH_BODY='{"client_perf": {"read_bytes_sec": 0, "read_op_per_sec": 0, "recovering_bytes_per_sec": 0, "write_bytes_sec": 0, "write_op_per_sec": 0}, "df": {"stats": {"total_avail_bytes": 96636764160, "total_bytes": 107374182400, "total_used_raw_bytes": 10737418240}}, "fs_map": {"filesystems": [], "standbys": []}, "health": {"checks": [], "mutes": [], "status": "HEALTH_OK"}, "hosts": 3, "iscsi_daemons": {"down": 0, "up": 0}, "mgr_map": {"active_name": "x", "standbys": [{"name": "y"}]}, "mon_status": {"monmap": {"mons": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}, "quorum": [0, 1, 2]}, "osd_map": {"osds": [{"in": 1, "up": 1}, {"in": 1, "up": 1}, {"in": 1, "up": 1}]}, "pg_info": {"object_stats": {"num_object_copies": 0, "num_objects": 0, "num_objects_degraded": 0, "num_objects_misplaced": 0, "num_objects_unfound": 0}, "pgs_per_osd": 32.0, "statuses": {"active+clean": 96}}, "pools": [{"pool": 1, "pool_name": "device_health_metrics"}, {"pool": 2, "pool_name": "rbd"}], "rgw": 0, "scrub_status": "Inactive"}'
printf '%s' "$HEALTH_BODY" >"$WORK/health.json"
# An nginx config with one worker and unlimited keep-alive, its files under $WORK/NAME;
# standard input: the rest of its http block.
write_nginx_conf() {
  local dir=$WORK/$1
  {
    cat <<EOF
worker_processes 1;
worker_rlimit_nofile $NOFILE;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 16384; }
http {
  access_log off;
  keepalive_requests 1000000;
  keepalive_timeout 120s;
  client_body_temp_path $dir/tmp;
EOF
    cat
    echo "}"
  } >"$dir/nginx.conf"
}
# The security headers every dashboard answer carries (observed on Ceph 16.2.15), so that
# the contenders pass on what they would in front of a real dashboard.
write_nginx_conf nginx-backend <<EOF
  default_type "$V1";
  add_header Content-Security-Policy "frame-ancestors 'self';" always;
  add_header X-Content-Type-Options nosniff always;
  add_header Strict-Transport-Security "max-age=63072000; includeSubDomains; preload" always;
  add_header Vary Accept-Encoding;
  server {
    listen 127.0.0.1:$P_BACKEND backlog=4096;
    location = $HEALTH { return 200 '$HEALTH_BODY'; }
    location = /api/auth { return 201 '{"token": "$BACKEND_TOKEN"}'; }
    # The summary's version line, from which the gateway learns the manager's release.
    location = /api/summary { return 200 '{"health_status": "HEALTH_OK", "version": "ceph version 16.2.15 (618f440892089921c3e944a991122ddc44e60516) pacific (stable)"}'; }
    location = / { default_type text/html; return 200 'stand-in dashboard'; }
    location / { return 404 '{"detail": "not found"}'; }
  }
EOF
# The same proxy with TLS 1.3 (OpenSSL) on a second port, and a status page (its
# accepted connections show that the handshake runs open one connection per request).
write_nginx_conf nginx-proxy <<EOF
  proxy_temp_path $WORK/nginx-proxy/tmp-proxy;
  upstream dashboard {
    server 127.0.0.1:$P_BACKEND;
    keepalive 128;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:$P_NGINX backlog=4096;
    listen 127.0.0.1:$P_NGINX_TLS ssl backlog=4096;
    ssl_certificate $WORK/tls/cert.pem;
    ssl_certificate_key $WORK/tls/key.pem;
    ssl_protocols TLSv1.3;
    location / {
      proxy_pass http://dashboard;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
  server {
    listen 127.0.0.1:$P_NGINX_STATUS;
    location / { stub_status; }
  }
EOF
# HAProxy 2.6: the bearer JWT must be HS256 (pinned, never the token's own alg), signed with
# the gateway's secret, issued by it and unexpired. The second frontend is the pattern that
# takes the algorithm from the token; it only serves the alg:none check and is not measured.
# The same checks serve the plain frontend and the TLS 1.3 one (OpenSSL).
JWT_RULES="  http-request set-var(txn.bearer) http_auth_bearer
  http-request set-var(txn.now) date()
  http-request deny deny_status 401 unless { var(txn.bearer) -m found }
  http-request deny deny_status 401 unless { var(txn.bearer),jwt_header_query('\$.alg') -m str HS256 }
  http-request deny deny_status 401 unless { var(txn.bearer),jwt_verify(\"HS256\",\"$SECRET\") -m int 1 }
  http-request deny deny_status 401 unless { var(txn.bearer),jwt_payload_query('\$.iss') -m str clustergate }
  http-request set-var(txn.exp) var(txn.bearer),jwt_payload_query('\$.exp','int')
  http-request deny deny_status 401 unless { var(txn.exp) -m found }
  http-request deny deny_status 401 if { var(txn.exp),sub(txn.now) -m int lt 0 }
  default_backend dashboard"
cat >"$WORK/haproxy/haproxy.cfg" <<EOF
global
  nbthread 1
  stats socket $WORK/haproxy/stats.sock mode 600 level user
  maxconn $(( (NOFILE - 200) / 2 < 20000 ? (NOFILE - 200) / 2 : 20000 ))
defaults
  mode http
  option http-keep-alive
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  timeout http-keep-alive 120s
frontend jwt
  bind 127.0.0.1:$P_HAPROXY
$JWT_RULES
frontend jwt_tls
  bind 127.0.0.1:$P_HAPROXY_TLS ssl crt $WORK/tls/haproxy.pem ssl-min-ver TLSv1.3
$JWT_RULES
frontend jwt_alg_from_token
  bind 127.0.0.1:$P_HAPROXY_UNPINNED
  http-request set-var(txn.bearer) http_auth_bearer
  http-request set-var(txn.alg) var(txn.bearer),jwt_header_query('\$.alg')
  http-request deny deny_status 401 unless { var(txn.bearer),jwt_verify(txn.alg,"$SECRET") -m int 1 }
  default_backend dashboard
backend dashboard
  server dashboard 127.0.0.1:$P_BACKEND
EOF
"$HAPROXY" -c -f "$WORK/haproxy/haproxy.cfg" >"$WORK/haproxy/check.out" 2>&1 ||
  die "haproxy refused its configuration: $(cat "$WORK/haproxy/check.out")"
"$NGINX" -t -q -p "$WORK/nginx-backend" -e "$WORK/nginx-backend/error.log" -c "$WORK/nginx-backend/nginx.conf" 2>"$WORK/nginx-backend/t.out" ||
  die "nginx refused the backend configuration: $(cat "$WORK/nginx-backend/t.out")"

# ------------------------------------------------------------------ results metadata
export B_QUICK=$QUICK B_ROUNDS=$ROUNDS B_SAT_S=$SAT_S B_RATE=$RATE B_RATE_S=$RATE_S B_CONNS=$CONNS \
  B_CHECK_S=$CHECK_S B_CHECK_ROUNDS=$CHECK_ROUNDS B_CHECK_CONNS=$CHECK_CONNS B_FLOOD_S=$FLOOD_S \
  B_FLOOD_ROUNDS=$FLOOD_ROUNDS B_FLOOD_CLIENTS=$FLOOD_CLIENTS B_LOGINS=$LOGINS B_IDLE_CONNS=$IDLE_CONNS \
  B_CG_THREADS=$CG_THREADS B_CG_LOG=$CG_LOG B_TLS_KEY=$TLS_KEY B_SERVER_CPUS=$SERVER_CPUS B_LOAD_CPUS=$LOAD_CPUS \
  B_DATE=$DATE B_ROOT=$ROOT B_CG=$CG B_NGINX=$NGINX B_HAPROXY=$HAPROXY B_NOTE="${BENCH_NOTE:-}"
"${TOOL[@]}" meta >"$WORK/meta.json"
mkdir -p "$WORK/extra"
: >"$WORK/runs.jsonl"
: >"$WORK/checks.jsonl"
: >"$WORK/errors.txt"
put() { printf '%s\n' "$2" >"$WORK/extra/$1.json"; }   # key json
soft_error() { log "ERROR (continuing): $*"; printf '%s\n' "$*" >>"$WORK/errors.txt"; }

# ------------------------------------------------------------------ servers (pinned)
start_server nginx-backend "$NGINX" -p "$WORK/nginx-backend" -e "$WORK/nginx-backend/error.log" \
  -c "$WORK/nginx-backend/nginx.conf" -g 'daemon off;'
start_server nginx-proxy "$NGINX" -p "$WORK/nginx-proxy" -e "$WORK/nginx-proxy/error.log" \
  -c "$WORK/nginx-proxy/nginx.conf" -g 'daemon off;'
start_server haproxy "$HAPROXY" -db -f "$WORK/haproxy/haproxy.cfg"
HAPROXY_PID=${PIDS[-1]}
# pingora's own proxy with nothing of clustergate's: what the framework costs by itself
start_server pingora-floor "$FLOOR" "127.0.0.1:$P_FLOOR" "127.0.0.1:$P_BACKEND" "$CG_THREADS" steal
FLOOR_PID=${PIDS[-1]}
start_server pingora-floor-nosteal "$FLOOR" "127.0.0.1:$P_FLOOR_NOSTEAL" "127.0.0.1:$P_BACKEND" "$CG_THREADS" nosteal
export RUST_LOG=$CG_LOG      # read by clustergate only
start_server clustergate "$CG" run --config "$WORK/cg/clustergate.toml"
CG_PID=${PIDS[-1]}
start_server redis "$REDIS" --bind 127.0.0.1 --port "$P_REDIS" --save '' --appendonly no --dir "$WORK/cgr"
start_server clustergate-redis "$CG" run --config "$WORK/cgr/clustergate.toml"
CGR_PID=${PIDS[-1]}
start_server clustergate-steal "$CG" run --config "$WORK/cgs/clustergate.toml"
CGS_PID=${PIDS[-1]}
start_server clustergate-tls "$CG" run --config "$WORK/cgt/clustergate.toml"
CGT_PID=${PIDS[-1]}
# the servers whose CPU time is counted per request (with their children: nginx's workers);
# nginx and HAProxy serve TLS from the same process as plain HTTP, on another port
PROCS=(backend="${PIDS[0]}" nginx="${PIDS[1]}" haproxy="${PIDS[2]}" pingora="$FLOOR_PID"
  pingora_nosteal="${PIDS[4]}" clustergate="$CG_PID" clustergate_redis="$CGR_PID" clustergate_steal="$CGS_PID"
  clustergate_tls="$CGT_PID")

URL_DIRECT=http://127.0.0.1:$P_BACKEND$HEALTH
URL_NGINX=http://127.0.0.1:$P_NGINX$HEALTH
URL_HAPROXY=http://127.0.0.1:$P_HAPROXY$HEALTH
URL_FLOOR=http://127.0.0.1:$P_FLOOR$HEALTH
URL_CG=http://127.0.0.1:$P_CG$HEALTH
URL_CGR=http://127.0.0.1:$P_CGR$HEALTH
declare -A URL=([direct]=$URL_DIRECT [nginx]=$URL_NGINX [haproxy]=$URL_HAPROXY [pingora]=$URL_FLOOR [clustergate]=$URL_CG
  [clustergate_redis]=$URL_CGR [pingora_nosteal]=http://127.0.0.1:$P_FLOOR_NOSTEAL$HEALTH
  [clustergate_steal]=http://127.0.0.1:$P_CGS$HEALTH [nginx_tls]=https://127.0.0.1:$P_NGINX_TLS$HEALTH
  [haproxy_tls]=https://127.0.0.1:$P_HAPROXY_TLS$HEALTH [clustergate_tls]=https://127.0.0.1:$P_CGT$HEALTH)
# curl: the run's certificate, TLS 1.3 and nothing older
TLS13=(--cacert "$WORK/tls/cert.pem" --tlsv1.3 --tls-max 1.3)

code_of() {  # url [curl args...] -> status (000: no answer)
  local url=$1; shift
  curl -s --noproxy '*' -o /dev/null -w '%{http_code}' --max-time 5 "$@" "$url" 2>/dev/null || true
}
wait_code() {  # what url code seconds [curl args...]
  local what=$1 url=$2 want=$3 secs=$4; shift 4
  local deadline=$((SECONDS + secs))
  until [ "$(code_of "$url" "$@")" = "$want" ]; do
    [ "$SECONDS" -lt "$deadline" ] || die "$what did not answer $want at $url within ${secs}s"
    sleep 0.2
  done
}
wait_code "nginx backend" "$URL_DIRECT" 200 20
wait_code "nginx proxy" "$URL_NGINX" 200 20
wait_code "haproxy" "$URL_HAPROXY" 401 20
wait_code "pingora floor" "$URL_FLOOR" 200 20
wait_code "pingora floor without work stealing" "${URL[pingora_nosteal]}" 200 20
wait_code "nginx proxy over TLS" "${URL[nginx_tls]}" 200 20 "${TLS13[@]}"
wait_code "haproxy over TLS" "${URL[haproxy_tls]}" 401 20 "${TLS13[@]}"
# the gateway answers 503 until its health check has seen the backend active
wait_code "clustergate metrics" "http://127.0.0.1:$P_CG_METRICS/healthz" 200 30
wait_code "clustergate (Redis) readiness" "http://127.0.0.1:$P_CGR_METRICS/readyz" 200 30
wait_code "clustergate (work stealing) readiness" "http://127.0.0.1:$P_CGS_METRICS/readyz" 200 30
wait_code "clustergate (TLS) readiness" "http://127.0.0.1:$P_CGT_METRICS/readyz" 200 30

sleep 1
RSS_START=$(awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$CG_PID/status")   # before any login

# ------------------------------------------------------------------ the gateway's token
login_body() { printf '{"username": "%s", "password": "%s"}' "$1" "$2"; }
login_body "$BENCH_USER" "$BENCH_PW" >"$WORK/login.json"
login_body "$BENCH_USER" "wrong-$BENCH_PW" >"$WORK/login-wrong.json"
curl -s --noproxy '*' --max-time 10 -o "$WORK/login.out" -w '%{http_code}' -X POST \
  -H "Accept: $V1" -H 'Content-Type: application/json' --data-binary @"$WORK/login.json" \
  "http://127.0.0.1:$P_CG/api/auth" >"$WORK/login.code" || true
[ "$(cat "$WORK/login.code")" = 201 ] || die "login to clustergate answered $(cat "$WORK/login.code"): $(cat "$WORK/login.out")"
TOKEN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$WORK/login.out")
AUTH="Authorization: Bearer $TOKEN"
ACCEPT="Accept: $V1"
CHECK_ACCEPT="Accept: $V1"
printf '{"token": "%s"}' "$TOKEN" >"$WORK/check-cg.json"
log "logged in to clustergate as $BENCH_USER"
wait_code "clustergate forwarding" "$URL_CG" 200 30 -H "$AUTH" -H "$ACCEPT"
wait_code "clustergate (Redis) forwarding" "$URL_CGR" 200 30 -H "$AUTH" -H "$ACCEPT"
wait_code "clustergate (work stealing) forwarding" "${URL[clustergate_steal]}" 200 30 -H "$AUTH" -H "$ACCEPT"
wait_code "clustergate (TLS) forwarding" "${URL[clustergate_tls]}" 200 30 -H "$AUTH" -H "$ACCEPT" "${TLS13[@]}"

# ------------------------------------------------------------------ correctness, before any load
check() {  # contender what url expected-code [curl args...]: records, returns 1 on mismatch
  local who=$1 what=$2 url=$3 want=$4 got body_ok=true
  shift 4
  got=$(curl -s --noproxy '*' -o "$WORK/out/check.body" -w '%{http_code}' --max-time 5 "$@" "$url" 2>/dev/null || true)
  if [ "$want" = 200 ] && ! cmp -s "$WORK/out/check.body" "$WORK/health.json"; then body_ok=false; fi
  printf '{"contender": "%s", "check": "%s", "expected": %s, "got": "%s", "body_matches": %s, "ok": %s}\n' \
    "$who" "$what" "$want" "$got" "$body_ok" \
    "$([ "$got" = "$want" ] && [ "$body_ok" = true ] && echo true || echo false)" >>"$WORK/checks.jsonl"
  if [ "$got" != "$want" ] || [ "$body_ok" != true ]; then
    log "CHECK FAILED: $who $what: expected $want, got $got (body matches: $body_ok)"
    return 1
  fi
}
"${TOOL[@]}" forge "$WORK/cg/jwt-secret" "$TOKEN" >"$WORK/forged.json"
forged() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$WORK/forged.json" "$1"; }
bad=0
check direct "fixed body" "$URL_DIRECT" 200 -H "$AUTH" -H "$ACCEPT" || bad=1
check nginx "fixed body through the proxy" "$URL_NGINX" 200 -H "$AUTH" -H "$ACCEPT" || bad=1
check pingora "fixed body through the proxy" "$URL_FLOOR" 200 -H "$AUTH" -H "$ACCEPT" || bad=1
check pingora_nosteal "fixed body through the proxy" "${URL[pingora_nosteal]}" 200 -H "$AUTH" -H "$ACCEPT" || bad=1
check nginx_tls "fixed body through the proxy over TLS 1.3" "${URL[nginx_tls]}" 200 -H "$AUTH" -H "$ACCEPT" "${TLS13[@]}" || bad=1
for who in haproxy_tls clustergate_tls; do
  check "$who" "valid token over TLS 1.3" "${URL[$who]}" 200 -H "$AUTH" -H "$ACCEPT" "${TLS13[@]}" || bad=1
  check "$who" "no token over TLS 1.3" "${URL[$who]}" 401 -H "$ACCEPT" "${TLS13[@]}" || bad=1
done
for who in haproxy clustergate clustergate_steal clustergate_redis; do
  url=${URL[$who]}
  check "$who" "valid token" "$url" 200 -H "$AUTH" -H "$ACCEPT" || bad=1
  check "$who" "no token" "$url" 401 -H "$ACCEPT" || bad=1
  for kind in garbage bad_signature tampered_payload alg_none expired; do
    check "$who" "$kind token" "$url" 401 -H "Authorization: Bearer $(forged "$kind")" -H "$ACCEPT" || bad=1
  done
done
# The pattern that takes the algorithm from the token (not measured): what does alg:none get?
unpinned=$(code_of "http://127.0.0.1:$P_HAPROXY_UNPINNED$HEALTH" -H "Authorization: Bearer $(forged alg_none)")
printf '{"contender": "haproxy_alg_from_token", "check": "alg_none token (informational: the pattern that takes alg from the token)", "expected": "401 if safe", "got": "%s", "ok": null}\n' \
  "$unpinned" >>"$WORK/checks.jsonl"
log "HAProxy with the algorithm taken from the token answers an alg:none token with $unpinned"
[ "$bad" = 0 ] || die "a contender answered wrongly (see above); not loading it"
log "correctness checks passed: every contender serves the fixed body; both token checkers refuse forged tokens with 401"

# ------------------------------------------------------------------ measurement helpers
cpu_snap() { grep '^cpu[0-9]' /proc/stat >"$1"; }
times_snap() { times >"$1"; }
record() {  # key=value... -> one line of runs.jsonl
  "${TOOL[@]}" record "$WORK/runs.jsonl" "$@"
}
saturation() {  # contender round
  local who=$1 r=$2 f="$WORK/out/sat-$1-$2"
  "${TOOL[@]}" procsnap "$f.p0" "${PROCS[@]}"
  cpu_snap "$f.cpu0"; times_snap "$f.t0"
  ld wrk -t1 -c"$CONNS" -d"${SAT_S}s" --timeout 5s --latency -H "$AUTH" -H "$ACCEPT" "${URL[$who]}" >"$f.out" 2>&1 ||
    die "wrk failed against $who: $(tail -3 "$f.out")"
  times_snap "$f.t1"; cpu_snap "$f.cpu1"
  "${TOOL[@]}" procsnap "$f.p1" "${PROCS[@]}"
  record phase=saturation contender="$who" round="$r" wrk="$f.out" cpu_before="$f.cpu0" cpu_after="$f.cpu1" \
    times_before="$f.t0" times_after="$f.t1" procs_before="$f.p0" procs_after="$f.p1" seconds="$SAT_S"
}
# Connections and TLS handshakes the servers count: nginx's accepted connections, HAProxy's
# TLS connections and its rates of TLS connections and of full handshakes (keys computed),
# the host's passive TCP opens.
conn_snap() { "${TOOL[@]}" connsnap "$1" "$P_NGINX_STATUS" "$WORK/haproxy/stats.sock"; }
# TLS handshake rate: a new connection and a full handshake for every request, over HTTP/1.1
# like the other runs (clustergate also offers h2 in ALPN, where a close ends no connection).
# wrk and h2load reconnect after `Connection: close` but resume the TLS session (nginx's
# $ssl_session_reused says so); curl with --no-sessionid does not. $CONNS transfers at a time
# for $SAT_S seconds; each answer's status goes to stderr (unbuffered, so none is lost when
# timeout stops curl). The URL is the other runs' one, repeated in a config file.
handshake() {  # contender round
  local who=$1 r=$2 f="$WORK/out/handshake-$1-$2" t0 t1 curl_pid
  "${TOOL[@]}" procsnap "$f.p0" "${PROCS[@]}"
  cpu_snap "$f.cpu0"; times_snap "$f.t0"; conn_snap "$f.c0"
  [ -s "$WORK/urls-$who.cfg" ] ||
    printf 'url = "%s"\noutput = "/dev/null"\n' "${URL[$who]}" | "${TOOL[@]}" repeat "$(( SAT_S * 10000 ))" >"$WORK/urls-$who.cfg"
  t0=$(date +%s.%N)
  start_load_bg "$f.codes" timeout -s INT "$SAT_S" curl -s --no-progress-meter --noproxy '*' \
    -k --no-sessionid --tlsv1.3 --tls-max 1.3 --http1.1 \
    --parallel --parallel-immediate --parallel-max "$CONNS" -w '%{stderr}%{http_code}\n' \
    -H "$AUTH" -H "$ACCEPT" -H 'Connection: close' -K "$WORK/urls-$who.cfg"
  curl_pid=$LAST_BG
  sleep "$(( SAT_S / 2 ))"
  conn_snap "$f.cmid"    # HAProxy's rates are of the last second: taken while the load runs
  wait "$curl_pid" || true
  forget "$curl_pid"
  t1=$(date +%s.%N)
  conn_snap "$f.c1"; times_snap "$f.t1"; cpu_snap "$f.cpu1"
  "${TOOL[@]}" procsnap "$f.p1" "${PROCS[@]}"
  record phase=handshake contender="$who" round="$r" curl_codes="$f.codes" cpu_before="$f.cpu0" cpu_after="$f.cpu1" \
    times_before="$f.t0" times_after="$f.t1" procs_before="$f.p0" procs_after="$f.p1" \
    seconds="$(python3 -c "print(round($t1 - $t0, 3))")" conns_before="$f.c0" conns_mid="$f.cmid" conns_after="$f.c1"
}
fixed_rate() {  # phase contender round url seconds [extra h2load args...]
  local phase=$1 who=$2 r=$3 url=$4 secs=$5 f="$WORK/out/$1-$2-$3"
  shift 5
  rm -f "$f.log"
  cpu_snap "$f.cpu0"
  ld h2load --h1 -c "$CONNS" --rps "$RPS_PER_CONN" -D "$secs" --warm-up-time 1 --log-file "$f.log" \
    -H "$AUTH" -H "$ACCEPT" "$@" "$url" >"$f.out" 2>&1 || die "h2load failed against $who: $(tail -3 "$f.out")"
  cpu_snap "$f.cpu1"
  record phase="$phase" contender="$who" round="$r" h2load="$f.out" log="$f.log" \
    cpu_before="$f.cpu0" cpu_after="$f.cpu1" seconds="$secs"
}
rss_mb() { awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

# BENCH_ONLY_CALLGRIND skips every timed section: instruction counts need no quiet machine.
if [ "$ONLY_CG" = 0 ]; then
# ------------------------------------------------------------------ 7. memory
sleep 2
RSS_IDLE=$(rss_mb "$CG_PID")
put rss_idle_mb "$RSS_IDLE"
put rss_start_mb "$RSS_START"
log "clustergate resident idle: $RSS_IDLE MB; opening $IDLE_CONNS idle keep-alive connections"
ld "${TOOL[@]}" conns "$P_CG" "$IDLE_CONNS" "$CG_PID" "$HEALTH" "$AUTH" "$ACCEPT" >"$WORK/extra/conns.json" ||
  soft_error "the idle-connections probe failed"
log "with $IDLE_CONNS connections: $(cat "$WORK/extra/conns.json")"
sleep 2

# ------------------------------------------------------------------ 1-4. proxies, interleaved
ORDER=(direct nginx haproxy pingora pingora_nosteal clustergate clustergate_steal clustergate_redis
  nginx_tls haproxy_tls clustergate_tls)
TLS_ORDER=(nginx_tls haproxy_tls clustergate_tls)
log "warm-up: 1 s of load on each contender"
for who in "${ORDER[@]}"; do
  ld wrk -t1 -c"$CONNS" -d1s -H "$AUTH" -H "$ACCEPT" "${URL[$who]}" >/dev/null 2>&1 || true
done
for ((r = 1; r <= ROUNDS; r++)); do
  # rotate the order each round, so that no contender always runs first or last
  shift_by=$(( (r - 1) % ${#ORDER[@]} ))
  rot=("${ORDER[@]:$shift_by}" "${ORDER[@]:0:$shift_by}")
  for who in "${rot[@]}"; do
    saturation "$who" "$r"
    log "round $r/$ROUNDS saturation $who: $(tail -1 "$WORK/runs.jsonl" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["rps"], "req/s, loader CPU", d.get("loader_cpu"))')"
  done
  for who in "${rot[@]}"; do
    fixed_rate rate "$who" "$r" "${URL[$who]}" "$RATE_S"
    log "round $r/$ROUNDS $RATE req/s $who: $(tail -1 "$WORK/runs.jsonl" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("p50", d["p50_ms"], "p99", d["p99_ms"], "p99.9", d["p999_ms"], "ms")')"
  done
  shift_by=$(( (r - 1) % ${#TLS_ORDER[@]} ))
  for who in "${TLS_ORDER[@]:$shift_by}" "${TLS_ORDER[@]:0:$shift_by}"; do
    handshake "$who" "$r"
    log "round $r/$ROUNDS handshakes $who: $(tail -1 "$WORK/runs.jsonl" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["rps"], "req/s, loader CPU", d.get("loader_cpu"), "connections", d.get("connections"))')"
  done
done

# ------------------------------------------------------------------ optional profile of the gateway
if [ "$PERF" = 1 ]; then
  if command -v perf >/dev/null 2>&1; then
    # ~2,500 samples: enough for the hot spots; unwinding them takes about a minute
    perf_s=$(( SAT_S < 5 ? SAT_S : 5 ))
    log "perf: profiling clustergate at saturation for $perf_s s"
    start_load_bg "$WORK/out/perf-wrk.out" wrk -t1 -c"$CONNS" -d"$((perf_s + 2))s" -H "$AUTH" -H "$ACCEPT" "$URL_CG"
    wrk_pid=$LAST_BG
    sleep 1
    ld perf record -q -e cpu-clock -F 499 --call-graph dwarf,16384 -p "$CG_PID" -o "$WORK/perf.data" \
      -- sleep "$perf_s" >"$WORK/perf-record.out" 2>&1 || soft_error "perf record failed: $(tail -2 "$WORK/perf-record.out")"
    wait "$wrk_pid" || true
    forget "$wrk_pid"
    if [ -s "$WORK/perf.data" ]; then
      mkdir -p "$RESULTS"
      # (unwinding the DWARF call chains is slow: both reports at once, about a minute)
      log "perf: writing the reports"
      timeout 300 perf report -i "$WORK/perf.data" --stdio --no-children --sort symbol --percent-limit 0.7 -g none \
        >"$RESULTS/$STAMP-perf-self.txt" 2>/dev/null &
      rep1=$!
      timeout 300 perf report -i "$WORK/perf.data" --stdio --children --sort symbol --percent-limit 1 -g none \
        >"$RESULTS/$STAMP-perf-children.txt" 2>/dev/null || true
      wait "$rep1" || true
      # perf pads every line to the longest symbol: drop the padding and the empty IPC columns
      for f in "$RESULTS/$STAMP-perf-self.txt" "$RESULTS/$STAMP-perf-children.txt"; do
        sed -E -i 's/([[:space:]]+-)+[[:space:]]*$//; s/[[:space:]]+$//' "$f" 2>/dev/null || true
      done
      "${TOOL[@]}" perf-summary "$RESULTS/$STAMP-perf-self.txt" "$RESULTS/$STAMP-perf-children.txt" >"$WORK/extra/profile.json" || true
    fi
  else
    soft_error "BENCH_PERF=1 but perf is not installed"
  fi
fi

# ------------------------------------------------------------------ 6. logins
"${TOOL[@]}" logins "$P_CG" "$BENCH_USER" "$BENCH_PW" 1 >/dev/null      # first login: warm-up
ld "${TOOL[@]}" logins "$P_CG" "$BENCH_USER" "$BENCH_PW" "$LOGINS" >"$WORK/extra/login.json" ||
  soft_error "timing logins failed"
log "login: $(cat "$WORK/extra/login.json")"
"${TOOL[@]}" logins "$P_CGR" "$BENCH_USER" "$BENCH_PW" 1 >/dev/null
ld "${TOOL[@]}" logins "$P_CGR" "$BENCH_USER" "$BENCH_PW" "$LOGINS" >"$WORK/extra/login_redis.json" ||
  soft_error "timing logins with Redis state failed"
log "login with Redis state: $(cat "$WORK/extra/login_redis.json")"
wrong=$(curl -s --noproxy '*' -o /dev/null -w '%{http_code}' --max-time 10 -X POST -H "$ACCEPT" \
  -H 'Content-Type: application/json' --data-binary @"$WORK/login-wrong.json" "http://127.0.0.1:$P_CG/api/auth" || true)
[ "$wrong" = 400 ] || soft_error "a wrong password answered $wrong, not 400"
for ((r = 1; r <= FLOOD_ROUNDS; r++)); do
  fixed_rate flood_base clustergate "$r" "$URL_CG" "$FLOOD_S"
  start_load_bg "$WORK/out/flood-logins-$r.out" h2load --h1 -c "$FLOOD_CLIENTS" -D "$((FLOOD_S + 3))" \
    -d "$WORK/login-wrong.json" -H "$ACCEPT" -H 'Content-Type: application/json' "http://127.0.0.1:$P_CG/api/auth"
  flood_pid=$LAST_BG
  sleep 1
  fixed_rate flood clustergate "$r" "$URL_CG" "$FLOOD_S"
  wait "$flood_pid" || soft_error "the login flood's h2load failed: $(tail -3 "$WORK/out/flood-logins-$r.out")"
  forget "$flood_pid"
  "${TOOL[@]}" annotate-flood "$WORK/runs.jsonl" "$WORK/out/flood-logins-$r.out"
  log "flood round $r: $(tail -1 "$WORK/runs.jsonl" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("p99", d["p99_ms"], "ms with", d.get("logins_rps"), "wrong-password logins/s", d.get("logins_status"))')"
done
put rss_after_load_mb "$(rss_mb "$CG_PID")"

# ------------------------------------------------------------------ 5. token check vs the Ceph dashboard
check_run() {  # who round url body
  local who=$1 r=$2 url=$3 body=$4 f="$WORK/out/check-$1-$2"
  cpu_snap "$f.cpu0"
  ld h2load --h1 -c "$CHECK_CONNS" -D "$CHECK_S" --warm-up-time 1 -d "$body" -H "$CHECK_ACCEPT" \
    -H 'Content-Type: application/json' "$url" >"$f.out" 2>&1 || { soft_error "h2load failed on $who's check"; return 0; }
  cpu_snap "$f.cpu1"
  record phase=check contender="$who" round="$r" h2load="$f.out" cpu_before="$f.cpu0" cpu_after="$f.cpu1" seconds="$CHECK_S"
  log "check round $r $who: $(tail -1 "$WORK/runs.jsonl" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["rps"], "req/s", d.get("status"))')"
}
check_body_ok() {  # url body-file -> the answer names the user
  curl -s --noproxy '*' --max-time 30 -X POST -H "$CHECK_ACCEPT" -H 'Content-Type: application/json' \
    --data-binary @"$2" "$1" 2>/dev/null | grep -q '"username"'
}
CEPH_URL=""
if [ "$SKIP_CEPH" = 0 ]; then
  CEPH_DIR=$WORK/ceph
  log "starting a real Ceph dashboard (deploy/ceph-dev/start-dashboard.sh; about a minute)"
  if CEPH_URL=$(timeout 600 "$ROOT/deploy/ceph-dev/start-dashboard.sh" "$CEPH_DIR" 2>"$WORK/ceph-start.log"); then
    # shellcheck disable=SC1091
    . "$CEPH_DIR/dashboard.env"
    for pid in "${CG_MGR_X_PID:-}" "${CG_MON_PID:-}"; do
      [ -z "$pid" ] || [ -z "$SERVER_CPUS" ] || taskset -a -p -c "$SERVER_CPUS" "$pid" >/dev/null 2>&1 ||
        soft_error "could not pin Ceph pid $pid"
    done
    login_body "$CG_ADMIN_USER" "$CG_ADMIN_PASSWORD" >"$WORK/ceph-login.json"
    curl -s --noproxy '*' --max-time 30 -o "$WORK/ceph-login.out" -X POST -H "Accept: $V1" \
      -H 'Content-Type: application/json' --data-binary @"$WORK/ceph-login.json" "$CEPH_URL/api/auth" || true
    rm -f "$WORK/ceph-login.json"
    CEPH_TOKEN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$WORK/ceph-login.out" 2>/dev/null || true)
    if [ -n "$CEPH_TOKEN" ]; then
      printf '{"token": "%s"}' "$CEPH_TOKEN" >"$WORK/check-ceph.json"
      ok_cg=true; ok_ceph=true
      check_body_ok "http://127.0.0.1:$P_CG/api/auth/check" "$WORK/check-cg.json" || ok_cg=false
      check_body_ok "$CEPH_URL/api/auth/check" "$WORK/check-ceph.json" || ok_ceph=false
      printf '{"contender": "clustergate", "check": "POST /api/auth/check with a valid token names the user", "expected": "username", "got": "%s", "ok": %s}\n' \
        "$ok_cg" "$ok_cg" >>"$WORK/checks.jsonl"
      printf '{"contender": "ceph", "check": "POST /api/auth/check with a valid token names the user", "expected": "username", "got": "%s", "ok": %s}\n' \
        "$ok_ceph" "$ok_ceph" >>"$WORK/checks.jsonl"
      if [ "$ok_cg" = true ] && [ "$ok_ceph" = true ]; then
        for ((r = 1; r <= CHECK_ROUNDS; r++)); do
          check_run clustergate "$r" "http://127.0.0.1:$P_CG/api/auth/check" "$WORK/check-cg.json"
          check_run ceph "$r" "$CEPH_URL/api/auth/check" "$WORK/check-ceph.json"
        done
      else
        soft_error "a /api/auth/check did not name the user (clustergate: $ok_cg, ceph: $ok_ceph)"
      fi
    else
      soft_error "login to the Ceph dashboard failed: $(head -c 300 "$WORK/ceph-login.out" 2>/dev/null)"
    fi
    log "stopping the Ceph dashboard"
    "$ROOT/deploy/ceph-dev/stop-dashboard.sh" "$CEPH_DIR" --purge >>"$WORK/ceph-stop.log" 2>&1 ||
      soft_error "stop-dashboard.sh failed (see $WORK/ceph-stop.log)"
    CEPH_DIR=""
  else
    soft_error "start-dashboard.sh failed: $(tail -5 "$WORK/ceph-start.log" | tr '\n' ' ')"
  fi
else
  log "BENCH_SKIP_CEPH=1: the token check runs against clustergate only"
  for ((r = 1; r <= CHECK_ROUNDS; r++)); do
    check_run clustergate "$r" "http://127.0.0.1:$P_CG/api/auth/check" "$WORK/check-cg.json"
  done
fi

fi  # ONLY_CG = 0

# ------------------------------------------------------------------ 8. instructions per request (callgrind)
# Wall-clock figures swing with whatever else the host runs; instruction counts do not. The
# pingora floor and the gateway are restarted under valgrind's callgrind with the same
# configuration (same secret: the token stays valid), and the user-space instructions of N
# requests are counted: the floor's, the gateway's proxied request and token check with
# RUST_LOG as the bench sets it, its proxied request again with the access log on
# (`info`, the default `log.level`), and HAProxy's proxied request with `jwt_verify` (its
# profile beside ours shows where the difference goes).
callgrind_count() {  # label pid url [h2load args...]
  local label=$1 pid=$2 url=$3 dump; shift 3
  callgrind_control -z "$pid" >/dev/null 2>&1 || { soft_error "callgrind_control -z failed"; return 0; }
  ld h2load --h1 -n "$CG_REQUESTS" -c 10 "$@" "$url" >"$WORK/out/callgrind-$label.out" 2>&1 ||
    { soft_error "h2load failed under callgrind ($label)"; return 0; }
  grep -q "status codes: $CG_REQUESTS 2xx" "$WORK/out/callgrind-$label.out" ||
    soft_error "not every $label request under callgrind answered 2xx: $(grep 'status codes' "$WORK/out/callgrind-$label.out")"
  callgrind_control --dump="$label" "$pid" >/dev/null 2>&1 || { soft_error "callgrind_control -d failed"; return 0; }
  for _ in $(seq 50); do
    dump=$(grep -l "^desc: Trigger: dump $label\$" "$WORK"/callgrind.out.* 2>/dev/null | head -1 || true)
    [ -n "$dump" ] && break
    sleep 0.2
  done
  [ -n "$dump" ] || { soft_error "no callgrind dump for $label"; return 0; }
  mkdir -p "$RESULTS"
  "${TOOL[@]}" callgrind "$dump" "$CG_REQUESTS" "$RESULTS/$STAMP-callgrind-$label.txt" >"$WORK/extra/callgrind_$label.json" ||
    soft_error "reading the callgrind dump for $label failed"
  log "callgrind $label: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["instructions_per_request"])' "$WORK/extra/callgrind_$label.json" 2>/dev/null) instructions per request"
}
stop_server() {  # pid: one of ours, stopped and forgotten
  kill -TERM "$1" 2>/dev/null || true
  for _ in $(seq 100); do ours "$1" || break; sleep 0.1; done
  wait "$1" 2>/dev/null || true
  forget "$1"
}
under_callgrind() {  # name command... : started under valgrind's callgrind; its pid in VG_PID
  local name=$1; shift
  start_server "$name" valgrind --tool=callgrind --cache-sim=yes --branch-sim=yes --dump-instr=no \
    --callgrind-out-file="$WORK/callgrind.out.%p" "$@"
  VG_PID=${PIDS[-1]}
}
until_forwarding() {  # url: true once it answers 200 (valgrind starts a server about 50 times slower)
  local deadline=$((SECONDS + 180))
  until [ "$(code_of "$1" -H "$AUTH" -H "$ACCEPT")" = 200 ] || [ "$SECONDS" -ge "$deadline" ]; do sleep 0.5; done
  [ "$(code_of "$1" -H "$AUTH" -H "$ACCEPT")" = 200 ] || return 1
  ld h2load --h1 -n 300 -c 10 -H "$AUTH" -H "$ACCEPT" "$1" >/dev/null 2>&1 || true   # warm-up
}
bench_api_key() {  # an API key of the bench user's, made through the key API: the key
  curl -fsS -H "$AUTH" -H "$ACCEPT" -H 'Content-Type: application/json' \
    -d '{"name": "bench", "roles": ["read-only"], "expires_in_seconds": 3600}' \
    "http://127.0.0.1:$P_CG/api/clustergate/keys" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])'
}
if [ "$CALLGRIND" = 1 ]; then
  log "callgrind: restarting the pingora floor under valgrind to count instructions per request"
  stop_server "$FLOOR_PID"
  under_callgrind pingora-floor-callgrind "$FLOOR" "127.0.0.1:$P_FLOOR" "127.0.0.1:$P_BACKEND" "$CG_THREADS"
  if until_forwarding "$URL_FLOOR"; then
    callgrind_count floor "$VG_PID" "$URL_FLOOR" -H "$AUTH" -H "$ACCEPT"
  else
    soft_error "the pingora floor under callgrind did not start forwarding"
  fi
  stop_server "$VG_PID"
  log "callgrind: restarting clustergate under valgrind"
  stop_server "$CG_PID"
  under_callgrind clustergate-callgrind "$CG" run --config "$WORK/cg/clustergate.toml"
  if until_forwarding "$URL_CG"; then
    callgrind_count proxied "$VG_PID" "$URL_CG" -H "$AUTH" -H "$ACCEPT"
    callgrind_count check "$VG_PID" "http://127.0.0.1:$P_CG/api/auth/check" -d "$WORK/check-cg.json" \
      -H "$CHECK_ACCEPT" -H 'Content-Type: application/json'
    # The same proxied request with an API key instead of the login's token.
    if api_key=$(bench_api_key); then
      callgrind_count proxied_key "$VG_PID" "$URL_CG" -H "Authorization: Bearer $api_key" -H "$ACCEPT"
    else
      soft_error "no API key could be made for the key row"
    fi
  else
    soft_error "clustergate under callgrind did not start forwarding"
  fi
  stop_server "$VG_PID"
  log "callgrind: clustergate again with the access log on (RUST_LOG=info)"
  export RUST_LOG=info
  under_callgrind clustergate-callgrind-logged "$CG" run --config "$WORK/cg/clustergate.toml"
  export RUST_LOG=$CG_LOG
  if until_forwarding "$URL_CG"; then
    callgrind_count proxied_logged "$VG_PID" "$URL_CG" -H "$AUTH" -H "$ACCEPT"
  else
    soft_error "clustergate under callgrind with the access log on did not start forwarding"
  fi
  # HAProxy's own profile under the same requests: where its instructions go beside ours
  log "callgrind: restarting HAProxy (jwt_verify) under valgrind"
  stop_server "$HAPROXY_PID"
  under_callgrind haproxy-callgrind "$HAPROXY" -db -f "$WORK/haproxy/haproxy.cfg"
  if until_forwarding "$URL_HAPROXY"; then
    callgrind_count haproxy "$VG_PID" "$URL_HAPROXY" -H "$AUTH" -H "$ACCEPT"
  else
    soft_error "HAProxy under callgrind did not start forwarding"
  fi
  stop_server "$VG_PID"
  "${TOOL[@]}" callgrind-summary "$WORK" >"$WORK/extra/callgrind_summary.json" || true
  log "callgrind: $(cat "$WORK/extra/callgrind_summary.json")"
fi

# ------------------------------------------------------------------ report
if [ "$ONLY_CG" = 1 ]; then
  mkdir -p "$RESULTS"
  cp "$WORK/extra/callgrind_summary.json" "$RESULTS/$STAMP-callgrind.json" 2>/dev/null || true
  log "callgrind only: $RESULTS/$STAMP-callgrind.json and -callgrind-*.txt ($((SECONDS - T0)) s)"
  [ -s "$WORK/errors.txt" ] && { cat "$WORK/errors.txt" >&2; exit 2; }
  exit 0
fi
put loadavg_end "\"$(cut -d' ' -f1-3 /proc/loadavg)\""
put duration_s "$((SECONDS - T_MEASURE))"    # without the build
put build_s "$BUILD_S"
mkdir -p "$RESULTS"
"${TOOL[@]}" report "$WORK" "$RESULTS" "$STAMP" >"$WORK/summary.json"
if [ "$QUICK" = 1 ]; then
  log "results: $RESULTS/$STAMP-quick.json (a quick run does not replace latest.*) ($((SECONDS - T0)) s)"
else
  log "results: $RESULTS/$STAMP.json, $RESULTS/latest.{json,svg,md} ($((SECONDS - T0)) s)"
fi
cat "$WORK/summary.json"
# the report's errors: ours (errors.txt, which it reads in) and its own (a row whose answers
# were not all 2xx)
errors=$(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["errors"]))' \
  "$WORK/summary.json")
if [ -n "$errors" ]; then
  log "finished with errors:"; printf '%s\n' "$errors" >&2
  exit 2
fi
