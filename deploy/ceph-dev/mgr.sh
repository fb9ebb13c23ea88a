#!/usr/bin/env bash
# mgr.sh -- control the ceph-mgr daemons of an instance started by start-dashboard.sh, for
# failover tests. DIR may be left out (then $CG_CEPH_DIR or /tmp/clustergate-ceph).
#
#   mgr.sh [DIR] status              one line per mgr: NAME STATE ROLE URL PID
#                                    (STATE running|stopped, ROLE active|standby|down)
#   mgr.sh [DIR] active              name of the active mgr (x or y); exit 1 if none is available
#   mgr.sh [DIR] active-url          dashboard URL of the active mgr; exit 1 if none
#   mgr.sh [DIR] url NAME            dashboard URL of mgr NAME
#   mgr.sh [DIR] fail [NAME] [--no-wait]
#                                    "ceph mgr fail NAME" (default: the active mgr), then waits
#                                    until a mgr is active -- another one if one is running --
#                                    and POST /api/auth answers 201 on it; prints its name
#   mgr.sh [DIR] stop NAME|all       stop mgr(s) by recorded pid (SIGTERM, SIGKILL after
#                                    CG_CEPH_STOP_TIMEOUT s), then "ceph mgr fail" them so the
#                                    mon knows at once (a standby takes over immediately)
#   mgr.sh [DIR] start NAME|all      start stopped mgr(s) again (same ids, keys and dashboard
#                                    ports; x first), then wait until a mgr is active with a
#                                    working login and every other running mgr answers as standby
#   mgr.sh [DIR] restart NAME|all    stop, then start
#   mgr.sh [DIR] wait-active [NAME]  wait until NAME (default: any mgr) is active and login works
#   mgr.sh [DIR] wait-standby NAME   wait until mgr NAME answers with the standby status
#   aliases: stop-all, start-all, restart-all, stop-x, start-y, restart-x, ...
#
# Waits are bounded by CG_CEPH_TIMEOUT (default 180 s). Exit codes: 0 ok, 1 failed or timed
# out, 2 usage.
set -euo pipefail
CGD_PROG='mgr.sh'
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$(dirname "$(realpath "$0")")/lib.sh"

usage() { usage_header; }
is_command() {
  case "$1" in
    status|active|active-url|url|fail|stop|start|restart|wait-active|wait-standby) return 0 ;;
    stop-*|start-*|restart-*) return 0 ;;
    *) return 1 ;;
  esac
}
case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  "") usage >&2; exit 2 ;;
esac
if is_command "$1"; then
  DIR=$(resolve_dir "${CG_CEPH_DIR:-/tmp/clustergate-ceph}")
else
  DIR=$(resolve_dir "$1"); shift
fi
[ $# -ge 1 ] || { usage >&2; exit 2; }
CMD=$1; shift
if [[ $CMD =~ ^(stop|start|restart)-(.+)$ ]]; then CMD=${BASH_REMATCH[1]}; set -- "${BASH_REMATCH[2]}" "$@"; fi

if [ ! -f "$DIR/$CGD_MARKER" ] || ! env_load; then die 1 "$DIR holds no instance started by start-dashboard.sh"; fi
release_load
curl_setup

ALL_MGRS=(x); [ -z "${CG_DASH_STANDBY_URL:-}" ] || ALL_MGRS+=(y)
NAMES=()
names_arg() {  # NAME|all -> sets NAMES to the mgr names (no subshell: die must end the script)
  case "${1:-}" in
    all) NAMES=("${ALL_MGRS[@]}") ;;
    x) NAMES=(x) ;;
    y) [ -n "${CG_DASH_STANDBY_URL:-}" ] || die 2 "this instance has no mgr y (start it with CG_CEPH_STANDBY=1)"; NAMES=(y) ;;
    *) die 2 "expected x, y or all, got '${1:-}'" ;;
  esac
}
running() { pid_is_ours "$(pids_get "mgr.$1" || true)" "mgr.$1"; }
# active_login_ok [NAME [EXCEPT]]: mgr NAME (default: any but EXCEPT) serves the active
# dashboard, POST /api/auth answers 201 there, and the mon says it is the active mgr
active_login_ok() {
  local n url cands=()
  if [ -n "${1:-}" ]; then cands=("$1"); else cands=("${ALL_MGRS[@]}"); fi
  for n in "${cands[@]}"; do
    [ "$n" != "${2:-}" ] || continue
    url=$(mgr_url "$n")
    dash_active "$url" && login_ok "$url" "$CG_SERVICE_USER" "$CG_SERVICE_PASSWORD" &&
      [ "$(mgr_active)" = "$n" ] && return 0
  done
  return 1
}
active_other_than() { active_login_ok "" "$1"; }
wait_standby() { wait_for "mgr.$1 to answer $CG_DASH_STANDBY_CODE as standby at $(mgr_url "$1")" \
  answers "$(mgr_url "$1")/" "$CG_DASH_STANDBY_CODE"; }
settle() {  # wait until a mgr is active with a working login and the other running ones are standbys
  local a n
  wait_for "an active mgr with a working login" active_login_ok
  a=$(mgr_active)
  for n in "${ALL_MGRS[@]}"; do
    if [ "$n" != "$a" ] && running "$n"; then wait_standby "$n"; fi
  done
  log "active mgr: $a ($(mgr_url "$a"))"
}
stop_mgrs() {
  local n
  for n in "$@"; do
    stop_daemon "mgr.$n" "$(pids_get "mgr.$n" || true)" || die 1 "could not stop mgr.$n"
    pids_set "mgr.$n" ""
  done
  env_refresh_pids
  for n in "$@"; do cg_ceph mgr fail "$n" >/dev/null 2>&1 || true; done
}
start_mgrs() {
  local n m others off
  for n in "$@"; do
    if running "$n"; then log "mgr.$n is already running (pid $(pids_get "mgr.$n"))"; continue; fi
    [ -f "$DIR/mgr/ceph-$n/keyring" ] || die 1 "no keyring for mgr.$n in $DIR"
    others=0
    for m in "${ALL_MGRS[@]}"; do if [ "$m" != "$n" ] && running "$m"; then others=1; fi; done
    off=$(log_size "mgr.$n")
    start_daemon "mgr.$n"
    # with no other mgr running this one becomes the active one: let it get there before
    # starting the next, so that "start all" gives x active and y standby, as at first start
    if [ "$others" = 0 ]; then wait_for "mgr.$n to become active" mgr_activated_since "$n" "$off"; fi
  done
  env_refresh_pids
  settle
}

case "$CMD" in
  status)
    a=$(mgr_active 2>/dev/null || true)
    for n in "${ALL_MGRS[@]}"; do
      state=stopped; role=down
      if running "$n"; then state=running; if [ "$n" = "$a" ]; then role=active; else role=standby; fi; fi
      p=$(pids_get "mgr.$n" || true)
      printf '%s %s %s %s %s\n' "$n" "$state" "$role" "$(mgr_url "$n")" "${p:--}"
    done
    ;;
  active) mgr_active || die 1 "no mgr is active" ; echo ;;
  active-url) a=$(mgr_active) || die 1 "no mgr is active"; mgr_url "$a"; echo ;;
  url) case "${1:-}" in x|y) names_arg "$1"; mgr_url "$1"; echo ;; *) die 2 "url: expected x or y" ;; esac ;;
  wait-active)
    if [ -n "${1:-}" ]; then names_arg "$1"; fi
    wait_for "mgr ${1:-(any)} active with a working login" active_login_ok "${1:-}" || exit 1
    mgr_active; echo
    ;;
  wait-standby) names_arg "${1:-}"; for n in "${NAMES[@]}"; do wait_standby "$n" || exit 1; done ;;
  fail)
    lock_dir
    target=""; nowait=0
    for a in "$@"; do
      case "$a" in --no-wait) nowait=1 ;; x|y) names_arg "$a"; target=${NAMES[0]} ;; *) die 2 "fail: expected x, y or --no-wait, got '$a'" ;; esac
    done
    was_active=$(mgr_active 2>/dev/null || true)
    if [ -z "$target" ]; then target=$was_active; [ -n "$target" ] || die 1 "no mgr is active"; fi
    other=0
    for n in "${ALL_MGRS[@]}"; do if [ "$n" != "$target" ] && running "$n"; then other=1; fi; done
    t0=${EPOCHREALTIME//[!0-9]/}
    cg_ceph mgr fail "$target" >/dev/null 2>&1 || die 1 "ceph mgr fail $target failed"
    log "failed mgr.$target"
    [ "$nowait" = 0 ] || exit 0
    if [ "$target" = "$was_active" ] && [ "$other" = 1 ]; then
      wait_for "another mgr to take over from $target" active_other_than "$target" || exit 1
    else
      sleep 1   # a failed lone or standby mgr respawns; do not catch the old state
      wait_for "an active mgr with a working login" active_login_ok || exit 1
    fi
    a=$(mgr_active)
    d=$(( (${EPOCHREALTIME//[!0-9]/} - t0) / 100000 ))
    log "mgr.$a is active at $(mgr_url "$a"), login works, $((d / 10)).$((d % 10)) s after the fail"
    echo "$a"
    ;;
  stop) names_arg "${1:-}"; lock_dir; stop_mgrs "${NAMES[@]}" ;;
  start) names_arg "${1:-}"; lock_dir; start_mgrs "${NAMES[@]}" ;;
  restart) names_arg "${1:-}"; lock_dir; stop_mgrs "${NAMES[@]}"; start_mgrs "${NAMES[@]}" ;;
  *) usage >&2; exit 2 ;;
esac
