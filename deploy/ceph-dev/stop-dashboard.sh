#!/usr/bin/env bash
# stop-dashboard.sh -- stop the Ceph test cluster that start-dashboard.sh started in DIR.
#
#   deploy/ceph-dev/stop-dashboard.sh [DIR] [--purge]    DIR default: $CG_CEPH_DIR or /tmp/clustergate-ceph
#
# Stops exactly the pids recorded in DIR/pids -- the last started first: radosgw and OSD (with
# data), mgrs, then the mon -- and only while /proc/PID/cmdline still reads
# "PROGRAM -f WHO -c DIR/ceph.conf" (lib.sh's daemon_argv): SIGTERM, then SIGKILL
# after CG_CEPH_STOP_TIMEOUT seconds (default 15). Releases the instance's port reservations.
# For a release in a root (18.2, 20.2) nothing is mounted on the host (each daemon's mounts
# are in its own mount namespace and end with it); the empty mount point of DIR in the release's root is removed.
# --purge (or CG_CEPH_PURGE=1) then deletes DIR, but only if it carries start-dashboard.sh's
# marker file. Exit codes: 0 ok (also when nothing was running), 1 a daemon would not die,
# 2 usage, 4 --purge refused (no marker).
set -euo pipefail
CGD_PROG='stop-dashboard.sh'
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$(dirname "$(realpath "$0")")/lib.sh"

PURGE=0
case "${CG_CEPH_PURGE:-}" in 1|true|yes|on) PURGE=1 ;; esac
arg_dir=""
for a in "$@"; do
  case "$a" in
    --purge) PURGE=1 ;;
    -h|--help) usage_header; exit 0 ;;
    -*) die 2 "unknown option '$a' (usage: stop-dashboard.sh [DIR] [--purge])" ;;
    *) [ -z "$arg_dir" ] || die 2 "more than one DIR given"; arg_dir=$a ;;
  esac
done
DIR=$(resolve_dir "${arg_dir:-${CG_CEPH_DIR:-/tmp/clustergate-ceph}}")

if [ ! -d "$DIR" ]; then
  log "$DIR does not exist; nothing to stop"
  exit 0
fi
lock_dir

rc=0
if [ -f "$DIR/pids" ]; then
  while read -r name pid; do
    stop_daemon "$name" "$pid" || rc=1
  done < <(tac "$DIR/pids")
  if [ "$rc" = 0 ]; then mv -f "$DIR/pids" "$DIR/pids.stopped"; fi
else
  log "no $DIR/pids; nothing to stop"
fi
if [ -e "$DIR/$CGD_MARKER" ] && [ "$rc" = 0 ]; then reg_release; fi
# a release in a root: the daemons' mounts lived in their own mount namespaces and ended with them;
# what is left is the empty mount point of DIR inside the release's root
release_load
if [ "$rc" = 0 ] && [ "$CGD_RELEASE" != "$CGD_HOST_RELEASE" ]; then "${CGD_IN_ROOT[0]}" unbind "$CGD_RELEASE" "$DIR"; fi

if [ "$PURGE" = 1 ]; then
  [ "$rc" = 0 ] || die 1 "not purging $DIR: a daemon is still running"
  [ -e "$DIR/$CGD_MARKER" ] || die 4 "not purging $DIR: it has no $CGD_MARKER (not made by start-dashboard.sh)"
  rm -rf -- "$DIR"
  log "removed $DIR"
fi
exit "$rc"
