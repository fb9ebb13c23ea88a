#!/usr/bin/env bash
# start-dashboard.sh -- start a REAL Ceph manager dashboard (a release of
# deploy/ceph-releases) on 127.0.0.1 for clustergate's integration tests, benchmarks and trials: one ceph-mon "a", one ceph-mgr
# "x" (and with CG_CEPH_STANDBY=1 a standby ceph-mgr "y"), no OSDs, cephx on, no systemd, every
# port chosen free at run time, all state, logs and sockets under one directory. With --data
# (or CG_CEPH_DATA=1) also a cluster that holds data: one memstore OSD "0", a radosgw
# "rgw.a" known to the dashboard, a pool of size 1 with an RBD image, and an RGW user.
#
#   deploy/ceph-dev/start-dashboard.sh [--release RELEASE] [--data] [DIR]
#                                    DIR default: $CG_CEPH_DIR or /tmp/clustergate-ceph
#                                    release default: $CG_CEPH_RELEASE or the host's (16.2)
#
# The host's release runs from the host's Debian 12 packages; the others (18.2, 20.2) inside
# the Debian root of deploy/ceph-releases' suite that release-root.sh builds on first use and
# caches (root needed).
#
# Prints the active dashboard URL on stdout (progress goes to stderr) and writes
# DIR/dashboard.env (source it). Idempotent: when DIR's daemons are alive and the service
# account can log in, it just prints the URL again. See README.md for every variable.
#
# Exit codes: 0 ok, 1 start failed (log tails printed, everything it started is stopped),
# 2 bad DIR / usage, 3 packages missing or install failed, 4 DIR holds a live instance that is
# unhealthy or was started with other settings, 5 a forced port is in use / no free ports.
# shellcheck disable=SC2034  # the CG_* keys are written by name (env_write in lib.sh)
set -euo pipefail
CGD_PROG='start-dashboard.sh'
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$(dirname "$(realpath "$0")")/lib.sh"

USAGE="usage: start-dashboard.sh [--release ${CGD_RELEASES// /|}] [--data] [DIR]"
REQ_RELEASE=${CG_CEPH_RELEASE:-}
REQ_DATA_GIVEN=${CG_CEPH_DATA:-}
arg_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage_header; exit 0 ;;
    --release) [ $# -ge 2 ] || die 2 "--release needs a value ($USAGE)"; REQ_RELEASE=$2; shift 2 ;;
    --release=*) REQ_RELEASE=${1#--release=}; shift ;;
    --data) REQ_DATA_GIVEN=1; shift ;;
    -*) die 2 "unknown option '$1' ($USAGE)" ;;
    *) [ -z "$arg_dir" ] || die 2 "too many arguments ($USAGE)"; arg_dir=$1; shift ;;
  esac
done
DIR=$(resolve_dir "${arg_dir:-${CG_CEPH_DIR:-/tmp/clustergate-ceph}}")
release_setup "${REQ_RELEASE:-$CGD_HOST_RELEASE}"
# Everything but the final URL goes to stderr: stdout is kept on fd 3.
exec 3>&1 1>&2

# ------------------------------------------------------------------ requested settings
is_true() { case "${1:-}" in 1|true|yes|on) return 0 ;; *) return 1 ;; esac; }
REQ_TLS=0; is_true "${CG_CEPH_TLS:-}" && REQ_TLS=1
REQ_STANDBY=0; is_true "${CG_CEPH_STANDBY:-}" && REQ_STANDBY=1
REQ_DATA=0; is_true "$REQ_DATA_GIVEN" && REQ_DATA=1
REQ_BEHAVIOUR=${CG_CEPH_STANDBY_BEHAVIOUR:-redirect}
case "$REQ_BEHAVIOUR" in redirect|error) ;; *) die 2 "CG_CEPH_STANDBY_BEHAVIOUR must be redirect or error" ;; esac
REQ_STATUS=${CG_CEPH_STANDBY_STATUS:-}
[ -z "$REQ_STATUS" ] || [[ $REQ_STATUS =~ ^[1-5][0-9][0-9]$ ]] || die 2 "CG_CEPH_STANDBY_STATUS must be an HTTP status code"
if [ "$REQ_BEHAVIOUR" = redirect ]; then REQ_CODE=303; else REQ_CODE=${REQ_STATUS:-500}; fi
REQ_JWT_TTL=${CG_CEPH_JWT_TTL:-}
[ -z "$REQ_JWT_TTL" ] || [[ $REQ_JWT_TTL =~ ^[1-9][0-9]*$ ]] || die 2 "CG_CEPH_JWT_TTL must be a positive number of seconds"
[[ $CGD_TIMEOUT =~ ^[1-9][0-9]*$ ]] || die 2 "CG_CEPH_TIMEOUT must be a positive number of seconds"
# Reef's certificate check imports trixie's python3-cryptography (PyO3), which no ceph-mgr
# sub-interpreter can load: its HTTPS port never opens.
[ "$REQ_TLS" = 0 ] || [ "$(release_field "$CGD_RELEASE" tls)" != no ] ||
  die 2 "CG_CEPH_TLS=1 does not work with Ceph $CGD_RELEASE from Debian (deploy/ceph-releases); use another release"

# ------------------------------------------------------------------ packages
PKGS=(ceph-mon ceph-mgr ceph-mgr-dashboard ceph-common uuid-runtime curl openssl)
COMMANDS=(ceph-mon ceph-mgr ceph ceph-authtool monmaptool uuidgen curl openssl)
if [ "$REQ_DATA" = 1 ]; then PKGS+=(ceph-osd radosgw python3); COMMANDS+=(ceph-osd radosgw radosgw-admin rbd python3); fi
packages_missing() {
  local c
  for c in "${COMMANDS[@]}"; do
    command -v "$c" >/dev/null 2>&1 || return 0
  done
  [ -f /usr/share/ceph/mgr/dashboard/module.py ] || return 0
  return 1
}
install_packages() {
  local aptlog sudo=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || die 3 "packages missing and not root (no sudo): install ${PKGS[*]}"
    sudo=(sudo)
  fi
  aptlog=$(mktemp "${TMPDIR:-/tmp}/clustergate-ceph-apt.XXXXXX")
  log "installing ${PKGS[*]} (apt log: $aptlog)"
  export DEBIAN_FRONTEND=noninteractive
  # a fresh image has no package lists: update first; otherwise only when the install fails
  if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
    "${sudo[@]}" apt-get update >>"$aptlog" 2>&1 || true
  fi
  if ! "${sudo[@]}" apt-get install -y --no-install-recommends "${PKGS[@]}" >>"$aptlog" 2>&1; then
    "${sudo[@]}" apt-get update >>"$aptlog" 2>&1 || true
    if ! "${sudo[@]}" apt-get install -y --no-install-recommends "${PKGS[@]}" >>"$aptlog" 2>&1; then
      tail -20 "$aptlog" >&2
      die 3 "apt-get install failed (log: $aptlog)"
    fi
  fi
  rm -f "$aptlog"
  log "packages installed"
}
INSTALL=${CG_CEPH_INSTALL:-auto}
is_true "${CG_CEPH_NO_INSTALL:-}" && INSTALL=never
case "$INSTALL" in auto|always|never) ;; *) die 2 "CG_CEPH_INSTALL must be auto, always or never" ;; esac
if [ "$CGD_RELEASE" != "$CGD_HOST_RELEASE" ]; then
  # the release's root: built (and timed) on first use, then reused; with data, ceph-osd and
  # radosgw are added to it once (release-root.sh data)
  if [ "$INSTALL" = never ]; then
    root=$("${CGD_IN_ROOT[0]}" path "$CGD_RELEASE") || exit 3
    if [ "$REQ_DATA" = 1 ] && ! { [ -x "$root/usr/bin/ceph-osd" ] && [ -x "$root/usr/bin/radosgw" ]; }; then
      die 3 "the Ceph $CGD_RELEASE root has no ceph-osd/radosgw and installing is forbidden (release-root.sh data $CGD_RELEASE)"
    fi
  elif [ "$REQ_DATA" = 1 ]; then "${CGD_IN_ROOT[0]}" data "$CGD_RELEASE" >/dev/null || exit 3
  else "${CGD_IN_ROOT[0]}" build "$CGD_RELEASE" >/dev/null || exit 3; fi
  # the host parses radosgw-admin's answer
  [ "$REQ_DATA" = 0 ] || command -v python3 >/dev/null 2>&1 || die 3 "--data needs python3 on the host"
else
  case "$INSTALL" in
    auto) if packages_missing; then install_packages; fi ;;
    always) install_packages ;;
    never) if packages_missing; then die 3 "ceph packages missing and installing is forbidden; install: ${PKGS[*]}"; fi ;;
  esac
fi

# ------------------------------------------------------------------ a cluster with data (--data)
DATA_POOL=cg-data
DATA_IMAGE=cg-image
RGW_USER=cg-user
# the OSD, the radosgw and the pools, in ceph.conf: every pool has size 1 and few PGs (one
# OSD holds them all), the OSD keeps its objects in memory (memstore) and binds loopback only
data_global() {
  cat <<EOF
mon allow pool size one = true
mon warn on pool no redundancy = false
osd pool default pg autoscale mode = off
osd pool default pg num = 8
osd pool default pgp num = 8
mon max pg per osd = 1000
osd crush chooseleaf type = 0
EOF
}
data_sections() {
  cat <<EOF
[osd]
osd data = $DIR/osd/\$cluster-\$id
keyring = $DIR/osd/\$cluster-\$id/keyring
osd objectstore = memstore
memstore device bytes = $((512 * 1024 * 1024))
[client.rgw.a]
keyring = $DIR/rgw/keyring
rgw data = $DIR/rgw
rgw frontends = beast endpoint=$CGD_ADDR:$CG_RGW_PORT
rgw thread pool size = 16
EOF
}
# osd.0 (its key is in the mon's keyring from the start) made and started, then the radosgw,
# which creates its pools once the OSD is up: all while mgr x boots
data_daemons() {
  local uuid
  uuid=$(cat /proc/sys/kernel/random/uuid)
  log "creating osd.0 (memstore) and the pool $DATA_POOL"
  printf '%s\n' "osd new $uuid 0" "osd pool create $DATA_POOL 8 8 replicated" \
    "osd pool application enable $DATA_POOL rbd" | cg_ceph >"$DIR/log/data.out" 2>"$DIR/log/data.err" ||
    die 1 "creating osd.0 and the pool failed: $(head -3 "$DIR/log/data.err")"
  if grep -q '^Error' "$DIR/log/data.err"; then die 1 "creating osd.0 and the pool failed: $(head -3 "$DIR/log/data.err")"; fi
  ${CGD_IN_ROOT[@]+"${CGD_IN_ROOT[@]}"} ceph-osd -c "$CONF" -i 0 --mkfs --osd-uuid "$uuid" \
    >"$DIR/log/osd.0.mkfs" 2>&1 || die 1 "ceph-osd --mkfs failed"
  start_daemon osd.0
  start_daemon rgw.a
}
rgw_answers() { [ "$(http_code "$CG_RGW_URL/")" = 200 ]; }
# the service account's token in DIR/.auth-header (a curl header file, mode 600)
service_token() {
  local token
  token=$(curl -s --noproxy '*' --max-time 10 ${CGD_CURL_TLS[@]+"${CGD_CURL_TLS[@]}"} -X POST \
    -H "Accept: $CGD_ACCEPT" -H 'Content-Type: application/json' --data-binary @- "$CG_DASH_URL/api/auth" \
    <<<"{\"username\": $(json_str "$CG_SERVICE_USER"), \"password\": $(json_str "$CG_SERVICE_PASSWORD")}" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])') || return 1
  printf 'Authorization: Bearer %s\n' "$token" >"$DIR/.auth-header"
}
dashboard_lists() {  # path text [version] -> GET path (as the service account) answers 200 naming text
  local answer
  answer=$(curl -s --noproxy '*' --max-time 20 ${CGD_CURL_TLS[@]+"${CGD_CURL_TLS[@]}"} -H @"$DIR/.auth-header" \
    -H "Accept: application/vnd.ceph.api.v${3:-1.0}+json" -w '\n%{http_code}' "$CG_DASH_URL$1") || return 1
  [ "${answer##*$'\n'}" = 200 ] && [[ $answer == *"\"$2\""* ]]
}
# the image, the RGW user, and the dashboard's own RGW credentials (its system user
# "dashboard"), once the radosgw serves (so the OSD is up and the pools exist)
data_contents() {
  local user
  wait_for "the radosgw at $CG_RGW_URL" rgw_answers
  log "radosgw answers at $CG_RGW_URL; creating $DATA_POOL/$DATA_IMAGE and the RGW user $RGW_USER"
  timeout 120 ${CGD_IN_ROOT[@]+"${CGD_IN_ROOT[@]}"} rbd -c "$CONF" create --size 64M "$DATA_POOL/$DATA_IMAGE" \
    >"$DIR/log/rbd.out" 2>&1 || die 1 "rbd create failed: $(tail -3 "$DIR/log/rbd.out")"
  user=$(timeout 120 ${CGD_IN_ROOT[@]+"${CGD_IN_ROOT[@]}"} radosgw-admin -c "$CONF" user create \
    --uid="$RGW_USER" --display-name="clustergate test user" 2>"$DIR/log/rgw-user.err") ||
    die 1 "radosgw-admin user create failed: $(tail -3 "$DIR/log/rgw-user.err")"
  read -r CG_RGW_ACCESS_KEY CG_RGW_SECRET_KEY < <(printf '%s' "$user" | python3 -c '
import json, sys
key = json.load(sys.stdin)["keys"][0]
print(key["access_key"], key["secret_key"])') || die 1 "radosgw-admin user create gave no keys"
  cg_ceph dashboard set-rgw-credentials >"$DIR/log/rgw-credentials.out" 2>&1 ||
    die 1 "ceph dashboard set-rgw-credentials failed: $(tail -3 "$DIR/log/rgw-credentials.out")"
  CG_DATA_POOL=$DATA_POOL; CG_DATA_IMAGE=$DATA_IMAGE; CG_RGW_USER=$RGW_USER
  service_token || die 1 "the service account cannot log in"
  wait_for "the dashboard to list the RGW user $RGW_USER" dashboard_lists /api/rgw/user "$RGW_USER"
  # the image list is version 2.0 (paginated) in every release
  wait_for "the dashboard to list the image $DATA_IMAGE" dashboard_lists /api/block/image "$DATA_IMAGE" 2.0
  rm -f "$DIR/.auth-header"
  log "data ready: pool $DATA_POOL, image $DATA_IMAGE, RGW user $RGW_USER at $CG_RGW_URL"
}

# ------------------------------------------------------------------ lock DIR, reuse a live instance
mkdir -p "$DIR" || die 2 "cannot create $DIR"
[ -d "$DIR" ] || die 2 "$DIR is not a directory"
lock_dir

live_daemons() {  # number of recorded daemons that are still alive and ours
  local n=0 name pid
  if [ -f "$DIR/pids" ]; then
    while read -r name pid; do
      if pid_is_ours "$pid" "$name"; then n=$((n + 1)); fi
    done <"$DIR/pids"
  fi
  printf '%s' "$n"
}
healthy() {  # the active mgr answers POST /api/auth with 201 for the service account
  local a
  a=$(mgr_active) && login_ok "$(mgr_url "$a")" "$CG_SERVICE_USER" "$CG_SERVICE_PASSWORD"
}
existing_instance() {  # DIR has live daemons: exit 0 if healthy and as requested, else exit 4
  local problems=() want_mgrs=2 want_data=0 active url
  env_load || die 4 "$DIR has live ceph daemons but no dashboard.env; run stop-dashboard.sh $DIR"
  [ -z "$REQ_RELEASE" ] || [ "$REQ_RELEASE" = "$CGD_RELEASE" ] ||
    problems+=("Ceph $REQ_RELEASE requested, instance runs $CGD_RELEASE")
  [ -n "${CG_DASH_STANDBY_URL:-}" ] || want_mgrs=1
  [ "${CG_CEPH_DATA:-0}" = 0 ] || want_data=2
  [ -z "$REQ_DATA_GIVEN" ] || [ "$REQ_DATA" = "${CG_CEPH_DATA:-0}" ] ||
    problems+=("data $REQ_DATA requested (--data, CG_CEPH_DATA), instance has ${CG_CEPH_DATA:-0}")
  [ "$(live_daemons)" = $((1 + want_mgrs + want_data)) ] &&
    pid_is_ours "$(pids_get mon.a)" mon.a && pid_is_ours "$(pids_get mgr.x)" mgr.x ||
    problems+=("not all of its daemons are running (see $DIR/pids; mgr.sh $DIR start all)")
  # settings given explicitly must match; unset ones accept whatever the instance has
  [ -z "${CG_CEPH_TLS:-}" ] || [ "$REQ_TLS" = "${CG_DASH_TLS:-0}" ] ||
    problems+=("CG_CEPH_TLS=$REQ_TLS requested, instance has $CG_DASH_TLS")
  [ -z "${CG_CEPH_STANDBY:-}" ] || [ "$REQ_STANDBY" = $((want_mgrs - 1)) ] ||
    problems+=("CG_CEPH_STANDBY=$REQ_STANDBY requested, instance has $((want_mgrs - 1))")
  [ -z "${CG_CEPH_STANDBY_BEHAVIOUR:-}" ] || [ "$REQ_BEHAVIOUR" = "$CG_DASH_STANDBY_BEHAVIOUR" ] ||
    problems+=("standby behaviour $REQ_BEHAVIOUR requested, instance has $CG_DASH_STANDBY_BEHAVIOUR")
  [ -z "${CG_CEPH_STANDBY_BEHAVIOUR:-}${CG_CEPH_STANDBY_STATUS:-}" ] || [ "$REQ_CODE" = "$CG_DASH_STANDBY_CODE" ] ||
    problems+=("standby status $REQ_CODE requested, instance has $CG_DASH_STANDBY_CODE")
  [ -z "$REQ_JWT_TTL" ] || [ "$REQ_JWT_TTL" = "$CG_JWT_TTL" ] ||
    problems+=("CG_CEPH_JWT_TTL=$REQ_JWT_TTL requested, instance has $CG_JWT_TTL")
  local k
  for k in CG_ADMIN_USER CG_ADMIN_PASSWORD CG_VIEWER_USER CG_VIEWER_PASSWORD CG_POOLMGR_USER \
           CG_POOLMGR_PASSWORD CG_SERVICE_USER CG_SERVICE_PASSWORD; do
    local req_var="REQ_$k"
    if [ -n "${!req_var:-}" ] && [ "${!req_var}" != "${!k}" ]; then problems+=("$k differs"); fi
  done
  if [ "${#problems[@]}" = 0 ]; then
    curl_setup
    # a failover may be in progress: give it a little time
    local CGD_TIMEOUT=$((CGD_TIMEOUT < 60 ? CGD_TIMEOUT : 60))
    if wait_for "an active mgr with a working login" healthy; then
      active=$(mgr_active); url=$(mgr_url "$active")
      env_refresh_pids
      log "already running in $DIR (active mgr $active)"
      printf '%s\n' "$url" >&3
      exit 0
    fi
    problems+=("no mgr answers POST /api/auth with 201")
  fi
  printf '%s: %s has a live instance that cannot be reused:\n' "$CGD_PROG" "$DIR" >&2
  printf '  - %s\n' "${problems[@]}" >&2
  die 4 "stop it first: deploy/ceph-dev/stop-dashboard.sh $DIR"
}
# remember explicitly requested users/passwords before env_load overwrites the variables
for k in CG_ADMIN_USER CG_ADMIN_PASSWORD CG_VIEWER_USER CG_VIEWER_PASSWORD CG_POOLMGR_USER \
         CG_POOLMGR_PASSWORD CG_SERVICE_USER CG_SERVICE_PASSWORD; do
  printf -v "REQ_$k" '%s' "${!k:-}"
done
if [ "$(live_daemons)" -gt 0 ]; then release_load; existing_instance; fi

# ------------------------------------------------------------------ fresh state in DIR
if [ -n "$(ls -A "$DIR")" ] && [ ! -e "$DIR/$CGD_MARKER" ]; then
  die 2 "$DIR is not empty and was not made by this script (no $CGD_MARKER); refusing to wipe it"
fi
# wipe the contents but keep the directory itself: it carries our lock
find "$DIR" -mindepth 1 -delete
: >"$DIR/$CGD_MARKER"
printf '%s\n' "$CGD_RELEASE" >"$DIR/release"
chmod 700 "$DIR"
mkdir -p "$DIR"/{mon/ceph-a,mgr/ceph-x,log,run,tls}
[ "$REQ_STANDBY" = 0 ] || mkdir -p "$DIR/mgr/ceph-y"
umask 077
CONF="$DIR/ceph.conf"

STARTED=0
on_exit() {
  local rc=$? f name pid
  [ "$rc" != 0 ] || return 0
  [ "$STARTED" = 1 ] || return 0
  # clean up even if stderr is a closed pipe: no SIGPIPE death, no set -e abort half-way
  trap '' PIPE
  set +e
  printf '%s: FAILED (rc=%s); last log lines:\n' "$CGD_PROG" "$rc" >&2
  for f in "$DIR"/log/*.log "$DIR"/log/*.stdout "$DIR"/log/*.err; do
    [ -s "$f" ] && { printf -- '----- %s\n' "$f" >&2; tail -n 20 "$f" >&2; }
  done
  if [ -f "$DIR/pids" ]; then
    # mgrs first, then the mon; only what this run started (DIR was empty before)
    while read -r name pid; do
      stop_daemon "$name" "$pid" || true
    done < <(tac "$DIR/pids")
    mv -f "$DIR/pids" "$DIR/pids.failed"
  fi
  reg_release || true
  log "stopped what was started; state left in $DIR for inspection"
}
trap on_exit EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 141' PIPE
trap 'exit 143' TERM
STARTED=1

# ------------------------------------------------------------------ ports
PORT_RANGE=${CG_CEPH_PORT_RANGE:-20000-32767}
if ! [[ $PORT_RANGE =~ ^([0-9]+)-([0-9]+)$ ]] || [ "${BASH_REMATCH[1]}" -lt 1024 ] ||
  [ "${BASH_REMATCH[2]}" -gt 65535 ] || [ $((BASH_REMATCH[2] - BASH_REMATCH[1])) -lt 100 ]; then
  die 2 "CG_CEPH_PORT_RANGE must be LO-HI within 1024-65535, at least 100 ports wide"
fi
RANGE_LO=${BASH_REMATCH[1]}; RANGE_HI=${BASH_REMATCH[2]}
# each mgr binds 2 ports of the window, the OSD 8 (public, cluster, two heartbeats; v2 and v1)
MSGR_WIDTH=${CG_CEPH_MSGR_PORTS:-$((REQ_DATA == 1 ? 20 : 10))}

choose_port() {  # VAR override -> sets VAR to the forced port (checked) or a free one
  local var=$1 forced=$2
  if [ -n "$forced" ]; then
    if ! [[ $forced =~ ^[0-9]+$ ]] || [ "$forced" -lt 1 ] || [ "$forced" -gt 65535 ]; then die 2 "bad port '$forced' for $var"; fi
    [ -z "${CGD_BUSY[$forced]:-}" ] || die 5 "port $forced (forced for $var) is in use or reserved by another instance"
    CGD_BUSY[$forced]=1
    printf -v "$var" '%s' "$forced"
  else
    pick_port "$RANGE_LO" "$RANGE_HI" || die 5 "no free port left in $PORT_RANGE"
    printf -v "$var" '%s' "$REPLY"
  fi
}
choose_ports() {  # runs under the registry lock
  local j
  busy_scan
  choose_port CG_MON_PORT "${CG_CEPH_MON_PORT:-}"
  choose_port CG_MON_V1_PORT "${CG_CEPH_MON_V1_PORT:-}"
  choose_port CG_DASH_X_PORT "${CG_CEPH_MGR_X_PORT:-}"
  CG_DASH_Y_PORT=""
  [ "$REQ_STANDBY" = 0 ] || choose_port CG_DASH_Y_PORT "${CG_CEPH_MGR_Y_PORT:-}"
  CG_RGW_PORT=""
  [ "$REQ_DATA" = 0 ] || choose_port CG_RGW_PORT "${CG_CEPH_RGW_PORT:-}"
  if [ -n "${CG_CEPH_MSGR_PORT_MIN:-}${CG_CEPH_MSGR_PORT_MAX:-}" ]; then
    CG_MSGR_PORT_MIN=${CG_CEPH_MSGR_PORT_MIN:?set both CG_CEPH_MSGR_PORT_MIN and _MAX}
    CG_MSGR_PORT_MAX=${CG_CEPH_MSGR_PORT_MAX:?set both CG_CEPH_MSGR_PORT_MIN and _MAX}
    if ! [[ $CG_MSGR_PORT_MIN$CG_MSGR_PORT_MAX =~ ^[0-9]+$ ]] || [ $((CG_MSGR_PORT_MAX - CG_MSGR_PORT_MIN)) -lt 3 ]; then
      die 2 "CG_CEPH_MSGR_PORT_MIN/MAX must span at least 4 ports"
    fi
    for ((j = CG_MSGR_PORT_MIN; j <= CG_MSGR_PORT_MAX; j++)); do CGD_BUSY[$j]=1; done
  else
    if ! [[ $MSGR_WIDTH =~ ^[0-9]+$ ]] || [ "$MSGR_WIDTH" -lt 4 ]; then die 2 "CG_CEPH_MSGR_PORTS must be >= 4"; fi
    pick_window "$RANGE_LO" "$RANGE_HI" "$MSGR_WIDTH" || die 5 "no $MSGR_WIDTH consecutive free ports in $PORT_RANGE"
    CG_MSGR_PORT_MIN=$REPLY; CG_MSGR_PORT_MAX=$((REPLY + MSGR_WIDTH - 1))
  fi
  # shellcheck disable=SC2153  # set by choose_port through printf -v
  reg_rewrite "$DIR $(date +%s) $CG_MON_PORT $CG_MON_V1_PORT $CG_DASH_X_PORT $CG_DASH_Y_PORT $CG_RGW_PORT $CG_MSGR_PORT_MIN-$CG_MSGR_PORT_MAX"
}
reg_locked choose_ports
log "ports: mon v2 $CG_MON_PORT v1 $CG_MON_V1_PORT, dashboard x $CG_DASH_X_PORT${CG_DASH_Y_PORT:+ y $CG_DASH_Y_PORT}${CG_RGW_PORT:+, radosgw $CG_RGW_PORT}, messenger $CG_MSGR_PORT_MIN-$CG_MSGR_PORT_MAX"

if [ "$REQ_TLS" = 1 ]; then SCHEME=https; else SCHEME=http; fi
CG_CEPH_RELEASE=$CGD_RELEASE
CG_CEPH_DIR=$DIR
CG_CEPH_CONF=$CONF
CG_DASH_TLS=$REQ_TLS
CG_DASH_CA_CERT=""; [ "$REQ_TLS" = 0 ] || CG_DASH_CA_CERT="$DIR/tls/ca.crt"
CG_DASH_URL="$SCHEME://$CGD_ADDR:$CG_DASH_X_PORT"
CG_DASH_STANDBY_URL=""; [ "$REQ_STANDBY" = 0 ] || CG_DASH_STANDBY_URL="$SCHEME://$CGD_ADDR:$CG_DASH_Y_PORT"
CG_DASH_URLS="$CG_DASH_URL${CG_DASH_STANDBY_URL:+ $CG_DASH_STANDBY_URL}"
CG_DASH_STANDBY_BEHAVIOUR=$REQ_BEHAVIOUR
CG_DASH_STANDBY_CODE=$REQ_CODE
CG_JWT_TTL=${REQ_JWT_TTL:-28800}
CG_CEPH_DATA=$REQ_DATA
CG_RGW_URL=""; [ "$REQ_DATA" = 0 ] || CG_RGW_URL="http://$CGD_ADDR:$CG_RGW_PORT"
CG_DATA_POOL=""; CG_DATA_IMAGE=""; CG_RGW_USER=""; CG_RGW_ACCESS_KEY=""; CG_RGW_SECRET_KEY=""

# ------------------------------------------------------------------ users and passwords
gen_password() { openssl rand -base64 18 | tr '+/' '-_'; }   # 24 characters [A-Za-z0-9_-]
CG_ADMIN_USER=${REQ_CG_ADMIN_USER:-admin}
CG_ADMIN_PASSWORD=${REQ_CG_ADMIN_PASSWORD:-$(gen_password)}
CG_VIEWER_USER=${REQ_CG_VIEWER_USER:-viewer}
CG_VIEWER_PASSWORD=${REQ_CG_VIEWER_PASSWORD:-$(gen_password)}
CG_POOLMGR_USER=${REQ_CG_POOLMGR_USER:-poolmgr}
CG_POOLMGR_PASSWORD=${REQ_CG_POOLMGR_PASSWORD:-$(gen_password)}
CG_SERVICE_USER=${REQ_CG_SERVICE_USER:-clustergate}
CG_SERVICE_PASSWORD=${REQ_CG_SERVICE_PASSWORD:-$(gen_password)}
CG_SERVICE_PASSWORD_FILE="$DIR/upstream.pass"

# ------------------------------------------------------------------ ceph.conf, keys, monmap
if command -v uuidgen >/dev/null 2>&1; then FSID=$(uuidgen); else FSID=$(cat /proc/sys/kernel/random/uuid); fi
MON_ADDRS="[v2:$CGD_ADDR:$CG_MON_PORT,v1:$CGD_ADDR:$CG_MON_V1_PORT]"
cat >"$CONF" <<EOF
# generated by clustergate deploy/ceph-dev/start-dashboard.sh -- private test cluster, loopback only
[global]
fsid = $FSID
mon host = $MON_ADDRS
mon initial members = a
public addr = $CGD_ADDR
public network = $CGD_ADDR/32
ms bind ipv4 = true
ms bind ipv6 = false
# the mgrs' messenger ports (each mgr binds a v2 and a v1 port in this window)
ms bind port min = $CG_MSGR_PORT_MIN
ms bind port max = $CG_MSGR_PORT_MAX
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
mon warn on insecure global id reclaim allowed = false
keyring = $DIR/keyring
run dir = $DIR/run
admin socket = $DIR/run/\$name.asok
pid file = $DIR/run/\$name.pid
log file = $DIR/log/\$name.log
crash dir = $DIR/crash
osd pool default size = 1
osd pool default min size = 1
mon allow pool delete = true
mon data avail warn = 1
mon data avail crit = 0
$([ "$REQ_DATA" = 0 ] || data_global)
# only the dashboard on first boot: the default "restful" module cannot load on Debian 12
# (python3-cryptography/PyO3 refuses ceph-mgr's sub-interpreters)
mgr initial modules = dashboard iostat
[mon]
mon data = $DIR/mon/\$cluster-\$id
# the cluster and audit logs (default: the shared /var/log/ceph/ceph.log and ceph.audit.log)
mon cluster log file = $DIR/log/ceph.\$channel.log
keyring = $DIR/mon/\$cluster-\$id/keyring
[mgr]
mgr data = $DIR/mgr/\$cluster-\$id
keyring = $DIR/mgr/\$cluster-\$id/keyring
EOF
[ "$REQ_DATA" = 0 ] || data_sections >>"$CONF"

log "creating keys and the monmap in $DIR"
(
  # absolute paths: inside a release's root the tools start in its /
  tool() { ${CGD_IN_ROOT[@]+"${CGD_IN_ROOT[@]}"} "$@"; }
  tool ceph-authtool --create-keyring "$DIR/mon.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  tool ceph-authtool --create-keyring "$DIR/keyring" --gen-key -n client.admin \
    --cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' --cap mgr 'allow *' >/dev/null
  tool ceph-authtool "$DIR/mon.keyring" --import-keyring "$DIR/keyring" >/dev/null
  if [ "$REQ_DATA" = 1 ]; then
    mkdir -p "$DIR/osd/ceph-0" "$DIR/rgw"
    tool ceph-authtool --create-keyring "$DIR/osd/ceph-0/keyring" --gen-key -n osd.0 \
      --cap mon 'allow profile osd' --cap mgr 'allow profile osd' --cap osd 'allow *' >/dev/null
    tool ceph-authtool --create-keyring "$DIR/rgw/keyring" --gen-key -n client.rgw.a \
      --cap mon 'allow rw' --cap mgr 'allow rw' --cap osd 'allow rwx' >/dev/null
    tool ceph-authtool "$DIR/mon.keyring" --import-keyring "$DIR/osd/ceph-0/keyring" >/dev/null
    tool ceph-authtool "$DIR/mon.keyring" --import-keyring "$DIR/rgw/keyring" >/dev/null
  fi
  for id in x ${CG_DASH_Y_PORT:+y}; do
    tool ceph-authtool --create-keyring "$DIR/mgr/ceph-$id/keyring" --gen-key -n "mgr.$id" \
      --cap mon 'allow profile mgr' --cap osd 'allow *' --cap mds 'allow *' >/dev/null
    tool ceph-authtool "$DIR/mon.keyring" --import-keyring "$DIR/mgr/ceph-$id/keyring" >/dev/null
  done
  tool monmaptool --create --addv a "$MON_ADDRS" --fsid "$FSID" "$DIR/monmap" >/dev/null
  tool ceph-mon -c "$CONF" --mkfs -i a --monmap "$DIR/monmap" --keyring "$DIR/mon.keyring" >"$DIR/log/mon.a.mkfs" 2>&1
)

if [ "$REQ_TLS" = 1 ]; then
  log "making a test CA and a server certificate (SAN IP:127.0.0.1, DNS:localhost)"
  (
    cd "$DIR/tls"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=clustergate ceph-dev test CA" \
      -keyout ca.key -out ca.crt \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr 2>/dev/null
    printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
      "extendedKeyUsage=serverAuth" "subjectAltName=IP:127.0.0.1,DNS:localhost" >server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile server.ext -out server.crt 2>/dev/null
    rm -f server.csr server.ext ca.srl
    chmod 644 ca.crt server.crt
  )
fi

# ------------------------------------------------------------------ mon
start_daemon mon.a
wait_for "ceph-mon quorum" cg_ceph mon stat

# ------------------------------------------------------------------ dashboard settings, before any mgr runs
# --force: the mon does not know the dashboard's options until a mgr has reported them.
# All in one ceph CLI process (it reads commands from stdin): ~0.4 s instead of ~0.4 s each.
log "configuring the dashboard"
cfg_lines=(
  "config set mgr mgr/dashboard/server_addr $CGD_ADDR --force"
  "config set mgr mgr/dashboard/ssl $([ "$REQ_TLS" = 1 ] && echo true || echo false) --force"
  "config set mgr mgr/dashboard/x/server_port $CG_DASH_X_PORT --force"
  "config set mgr mgr/dashboard/x/ssl_server_port $CG_DASH_X_PORT --force"
  "config set mgr mgr/dashboard/standby_behaviour $REQ_BEHAVIOUR --force"
)
if [ -n "$CG_DASH_Y_PORT" ]; then
  cfg_lines+=("config set mgr mgr/dashboard/y/server_port $CG_DASH_Y_PORT --force"
              "config set mgr mgr/dashboard/y/ssl_server_port $CG_DASH_Y_PORT --force")
fi
[ -z "$REQ_STATUS" ] || cfg_lines+=("config set mgr mgr/dashboard/standby_error_status_code $REQ_STATUS --force")
printf '%s\n' "${cfg_lines[@]}" "config dump" | cg_ceph >"$DIR/log/config.out" 2>"$DIR/log/config.err" ||
  die 1 "ceph config set failed"
if grep -q '^Error' "$DIR/log/config.err"; then die 1 "ceph config set failed: $(head -3 "$DIR/log/config.err")"; fi
got=$(grep -c 'mgr/dashboard/' "$DIR/log/config.out" || true)
[ "$got" = "${#cfg_lines[@]}" ] || die 1 "ceph config dump shows $got dashboard settings, expected ${#cfg_lines[@]}"
if [ "$REQ_TLS" = 1 ]; then
  cg_ceph config-key set mgr/dashboard/crt -i "$DIR/tls/server.crt" >/dev/null 2>&1 || die 1 "config-key set crt failed"
  cg_ceph config-key set mgr/dashboard/key -i "$DIR/tls/server.key" >/dev/null 2>&1 || die 1 "config-key set key failed"
fi
curl_setup

# ------------------------------------------------------------------ mgrs
start_daemon mgr.x
# while the mgr imports its modules (the longest part of a start)
[ "$REQ_DATA" = 0 ] || data_daemons
wait_for "mgr.x to become the active mgr" mgr_activated_since x 0
if [ -n "$CG_DASH_Y_PORT" ]; then
  # started only once x is active, so y is the standby; it boots while x creates the users
  start_daemon mgr.y
fi
wait_for "the dashboard of mgr.x at $CG_DASH_URL" answers_any "$CG_DASH_URL/"
log "dashboard of mgr.x answers at $CG_DASH_URL"

# ------------------------------------------------------------------ users
create_user() {  # user password role   (password through a temp file, deleted right after)
  local pwfile rc=0
  pwfile=$(mktemp "$DIR/.pw.XXXXXX")
  printf '%s' "$2" >"$pwfile"
  cg_ceph dashboard ac-user-create "$1" -i "$pwfile" "$3" --force-password >/dev/null 2>"$DIR/log/user.$1.err" || rc=$?
  rm -f "$pwfile"
  # (an existing user answers 0 "User already exists": a retry after a lost reply is fine,
  # its password and role are the ones we asked for)
  [ "$rc" != 0 ] || rm -f "$DIR/log/user.$1.err"
  return "$rc"
}
# In parallel: the dashboard serialises them itself (one lock around its user DB, bcrypt
# included), so this only saves the ceph CLI start-up time of three of them.
log "creating users $CG_SERVICE_USER, $CG_ADMIN_USER (administrator), $CG_VIEWER_USER (read-only), $CG_POOLMGR_USER (pool-manager)"
user_jobs=()
wait_for "user $CG_SERVICE_USER" create_user "$CG_SERVICE_USER" "$CG_SERVICE_PASSWORD" administrator & user_jobs+=($!)
wait_for "user $CG_ADMIN_USER" create_user "$CG_ADMIN_USER" "$CG_ADMIN_PASSWORD" administrator & user_jobs+=($!)
wait_for "user $CG_VIEWER_USER" create_user "$CG_VIEWER_USER" "$CG_VIEWER_PASSWORD" read-only & user_jobs+=($!)
wait_for "user $CG_POOLMGR_USER" create_user "$CG_POOLMGR_USER" "$CG_POOLMGR_PASSWORD" pool-manager & user_jobs+=($!)
users_rc=0
for j in "${user_jobs[@]}"; do wait "$j" || users_rc=1; done
[ "$users_rc" = 0 ] || die 1 "creating the dashboard users failed"
log "users created"
if [ -n "$REQ_JWT_TTL" ]; then
  cg_ceph dashboard set-jwt-token-ttl "$REQ_JWT_TTL" >/dev/null 2>&1 || die 1 "set-jwt-token-ttl failed"
fi

wait_for "POST $CG_DASH_URL/api/auth -> 201 for $CG_SERVICE_USER" \
  login_ok "$CG_DASH_URL" "$CG_SERVICE_USER" "$CG_SERVICE_PASSWORD"
log "login works on $CG_DASH_URL"
if [ -n "$CG_DASH_STANDBY_URL" ]; then
  wait_for "the standby mgr.y to answer $REQ_CODE at $CG_DASH_STANDBY_URL" answers "$CG_DASH_STANDBY_URL/" "$REQ_CODE"
  log "standby mgr.y answers $REQ_CODE at $CG_DASH_STANDBY_URL"
  mgr_is_active x || die 1 "mgr.x is no longer the active mgr"
fi

[ "$REQ_DATA" = 0 ] || data_contents

# ------------------------------------------------------------------ results
printf '%s' "$CG_SERVICE_PASSWORD" >"$CG_SERVICE_PASSWORD_FILE"
chmod 600 "$CG_SERVICE_PASSWORD_FILE"
env_refresh_pids
trap - EXIT
log "ready: $CG_DASH_URL (env: $DIR/dashboard.env; stop: deploy/ceph-dev/stop-dashboard.sh $DIR)"
printf '%s\n' "$CG_DASH_URL" >&3
