# shellcheck shell=bash
# shellcheck disable=SC2034  # variables read by the sourcing scripts or by name (env_write)
# lib.sh -- shared helpers of start-dashboard.sh, stop-dashboard.sh and mgr.sh.
# Sourced, never run. Everything here works on the instance directory in $DIR.

CGD_MARKER=.clustergate-ceph-dev    # written into DIR by start-dashboard.sh; stop --purge needs it
CGD_ADDR=127.0.0.1
CGD_ACCEPT='application/vnd.ceph.api.v1.0+json'
CGD_PROG=${CGD_PROG:-${0##*/}}
CGD_T0=${EPOCHREALTIME//[!0-9]/}
CGD_TIMEOUT=${CG_CEPH_TIMEOUT:-180}            # seconds, per wait phase
CGD_STOP_TIMEOUT=${CG_CEPH_STOP_TIMEOUT:-15}   # seconds between SIGTERM and SIGKILL
CGD_REGISTRY=${CG_CEPH_PORT_REGISTRY:-/tmp/clustergate-ceph-ports-$(id -u)}   # shared by all instances of this user
# CG_CEPH_ARGS would be read by the ceph tools; keep every instance hermetic
unset CEPH_ARGS

# the keys of DIR/dashboard.env, in file order
CGD_ENV_KEYS=(
  CG_CEPH_RELEASE CG_CEPH_DIR CG_CEPH_CONF
  CG_DASH_URL CG_DASH_STANDBY_URL CG_DASH_URLS
  CG_DASH_TLS CG_DASH_CA_CERT
  CG_ADMIN_USER CG_ADMIN_PASSWORD
  CG_VIEWER_USER CG_VIEWER_PASSWORD
  CG_POOLMGR_USER CG_POOLMGR_PASSWORD
  CG_SERVICE_USER CG_SERVICE_PASSWORD CG_SERVICE_PASSWORD_FILE
  CG_MON_PORT CG_MON_V1_PORT CG_MSGR_PORT_MIN CG_MSGR_PORT_MAX
  CG_DASH_X_PORT CG_DASH_Y_PORT
  CG_DASH_STANDBY_BEHAVIOUR CG_DASH_STANDBY_CODE CG_JWT_TTL
  CG_MON_PID CG_MGR_X_PID CG_MGR_Y_PID
  CG_CEPH_DATA CG_OSD_PID CG_RGW_PID CG_RGW_PORT CG_RGW_URL
  CG_DATA_POOL CG_DATA_IMAGE CG_RGW_USER CG_RGW_ACCESS_KEY CG_RGW_SECRET_KEY
)

# ------------------------------------------------------------------ messages
usage_header() {  # prints the comment block at the top of the running script
  awk 'NR == 1 { next } /^# shellcheck/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
}
elapsed() {  # seconds since the script started, one decimal
  local now=${EPOCHREALTIME//[!0-9]/} d
  d=$(( (now - CGD_T0) / 100000 ))
  printf '%d.%d' $((d / 10)) $((d % 10))
}
log() { printf '[%s %6ss] %s\n' "$CGD_PROG" "$(elapsed)" "$*" >&2; }
die() {  # exit-code message...
  local rc=$1; shift
  printf '%s: %s\n' "$CGD_PROG" "$*" >&2
  exit "$rc"
}

# ------------------------------------------------------------------ the instance directory
resolve_dir() {  # path -> absolute, normalised; refuses "" and "/"
  local d
  [ -n "$1" ] || die 2 "empty state directory"
  d=$(realpath -m -- "$1") || die 2 "cannot resolve '$1'"
  [ "$d" != / ] || die 2 "refusing to use / as state directory"
  printf '%s' "$d"
}

# Serialises the scripts that work on one DIR (two test processes calling start-dashboard.sh
# at once, or mgr.sh while start-dashboard.sh runs). The lock is held on fd 9 opened on the
# directory itself (so it needs no extra file); daemons are started with fd 9 closed.
lock_dir() {
  local i
  for i in 1 2 3; do
    exec 9<"$DIR" || die 2 "cannot open $DIR"
    flock -w "$CGD_TIMEOUT" 9 || die 1 "timed out after ${CGD_TIMEOUT}s waiting for the lock on $DIR"
    # the directory may have been purged (and recreated) while we waited
    if [ "$DIR" -ef "/proc/self/fd/9" ]; then return 0; fi
    exec 9<&-
    [ "$i" = 3 ] || mkdir -p "$DIR" 2>/dev/null || true
  done
  die 1 "$DIR keeps being replaced; giving up"
}

# ------------------------------------------------------------------ the Ceph release
# The releases and how each is installed: deploy/ceph-releases. The host's release runs from
# the host's own packages; the others run inside their Debian root (release-root.sh), every
# ceph command prefixed with CGD_IN_ROOT. DIR/release names the release of an instance from
# its first daemon on (stop-dashboard.sh and mgr.sh read it).
CGD_RELEASES_FILE="$(dirname "$(realpath "${BASH_SOURCE[0]}")")/../ceph-releases"
release_field() {  # RELEASE FIELD -> that field of RELEASE's line in deploy/ceph-releases
  local column
  case "$2" in suite) column=2 ;; root_extra) column=3 ;; test_cluster) column=4 ;; tls) column=5 ;;
    *) die 2 "release_field: no field '$2'" ;; esac
  awk -v r="$1" -v c="$column" '!/^#/ && $1 == r { print $c; exit }' "$CGD_RELEASES_FILE"
}
CGD_RELEASES=$(awk '!/^#/ && NF { printf "%s%s", sep, $1; sep = " " }' "$CGD_RELEASES_FILE")
CGD_HOST_RELEASE=$(awk '!/^#/ && $2 == "host" { print $1; exit }' "$CGD_RELEASES_FILE")
CGD_RELEASE=$CGD_HOST_RELEASE
CGD_IN_ROOT=()
release_setup() {  # RELEASE -> sets CGD_RELEASE and CGD_IN_ROOT (DIR must be set)
  case " $CGD_RELEASES " in *" $1 "*) ;; *) die 2 "unknown Ceph release '$1' (one of: $CGD_RELEASES)" ;; esac
  CGD_RELEASE=$1
  if [ "$1" = "$CGD_HOST_RELEASE" ]; then CGD_IN_ROOT=()
  else CGD_IN_ROOT=("$(dirname "$(realpath "${BASH_SOURCE[0]}")")/release-root.sh" run "$1" --bind "$DIR" --); fi
}
release_load() {  # the release of the instance in DIR (the host's for one without DIR/release)
  local r=$CGD_HOST_RELEASE
  [ ! -f "$DIR/release" ] || r=$(cat "$DIR/release")
  release_setup "$r"
}

# ------------------------------------------------------------------ processes
# The daemons, by NAME: mon.a, mgr.x, mgr.y, and with data osd.0 and rgw.a. Each runs as
# "PROGRAM -f WHO -c DIR/ceph.conf": ceph-<type> -i <id after the type>, except the
# radosgw, which takes no -i (it would run as client.admin): radosgw -n client.rgw.a.
daemon_argv() {  # NAME -> sets DAEMON_ARGV to PROGRAM -f WHO...
  case "$1" in
    rgw.*) DAEMON_ARGV=(radosgw -f -n "client.$1") ;;
    *) DAEMON_ARGV=("ceph-${1%%.*}" -f -i "${1#*.}") ;;
  esac
}

# pid_is_ours PID NAME [DIR]: true if PID is the daemon NAME started by these scripts with
# DIR/ceph.conf, i.e. /proc/PID/cmdline is "PROGRAM -f WHO -c DIR/ceph.conf", or ends so
# while its launchers (setsid, and in a release's root release-root.sh, unshare, sh and chroot)
# still exec their way to it.
pid_is_ours() {
  local pid=$1 name=$2 dir=${3:-$DIR}
  local -a argv=() DAEMON_ARGV=()
  [[ $pid =~ ^[1-9][0-9]*$ ]] || return 1
  { mapfile -d '' -t argv <"/proc/$pid/cmdline"; } 2>/dev/null || return 1
  [ "${#argv[@]}" -ge 6 ] || return 1
  argv=("${argv[@]: -6}")
  daemon_argv "$name"
  [ "${argv[0]##*/}" = "${DAEMON_ARGV[0]}" ] && [ "${argv[1]}" = -f ] &&
    [ "${argv[2]}" = "${DAEMON_ARGV[2]}" ] && [ "${argv[3]}" = "${DAEMON_ARGV[3]}" ] &&
    [ "${argv[4]}" = -c ] && [ "${argv[5]:-}" = "$dir/ceph.conf" ]
}

proc_start() {  # pid -> start time (clock ticks since boot), empty if gone or a zombie
  local st rest
  st=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  rest=${st##*) }
  # shellcheck disable=SC2086  # split the fields on purpose
  set -- $rest
  case "$1" in Z|X|x) return 0 ;; esac
  printf '%s' "${20}"
}

# stop_daemon NAME PID: SIGTERM, SIGKILL after CGD_STOP_TIMEOUT s, wait until it has exited.
# Only if PID is still that daemon of DIR. Returns 0 when it is gone (or was not ours).
stop_daemon() {
  local name=$1 pid=$2 start i
  if ! pid_is_ours "$pid" "$name"; then
    log "$name pid $pid is not running (or not ours any more); skipped"
    return 0
  fi
  start=$(proc_start "$pid")
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < CGD_STOP_TIMEOUT * 10; i++)); do
    [ "$(proc_start "$pid")" = "$start" ] || { log "stopped $name (pid $pid)"; return 0; }
    sleep 0.1
  done
  log "$name pid $pid ignored SIGTERM for ${CGD_STOP_TIMEOUT}s; sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    [ "$(proc_start "$pid")" = "$start" ] || { log "killed $name (pid $pid)"; return 0; }
    sleep 0.1
  done
  log "$name pid $pid did not go away"
  return 1
}

# DIR/pids: one "NAME PID" line per running daemon, in the order they were started
pids_get() { [ -f "$DIR/pids" ] && awk -v n="$1" '$1 == n { p = $2 } END { if (p) print p }' "$DIR/pids"; }
pids_set() {  # name pid (pid empty: remove)
  local tmp="$DIR/.pids.tmp"
  { [ -f "$DIR/pids" ] && awk -v n="$1" '$1 != n' "$DIR/pids"; [ -z "$2" ] || echo "$1 $2"; } >"$tmp"
  mv -f "$tmp" "$DIR/pids"
}

# start_daemon NAME: runs PROGRAM -f WHO -c DIR/ceph.conf in its own session (setsid,
# so it outlives the caller), output appended to DIR/log/NAME.stdout, and records its pid.
# Every inherited descriptor above 2 is closed first: a daemon holding the caller's stdout pipe
# (or one of our lock descriptors) would make the caller wait for it forever.
start_daemon() {
  local name=$1 pid DAEMON_ARGV=()
  daemon_argv "$name"
  (
    for fd in /proc/"$BASHPID"/fd/*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ] 2>/dev/null; then exec {fd}>&- 2>/dev/null || true; fi
    done
    exec setsid ${CGD_IN_ROOT[@]+"${CGD_IN_ROOT[@]}"} "${DAEMON_ARGV[@]}" -c "$DIR/ceph.conf" \
      </dev/null >>"$DIR/log/$name.stdout" 2>&1
  ) &
  pid=$!
  pids_set "$name" "$pid"
  log "started $name (pid $pid)"
}

# ------------------------------------------------------------------ waiting
wait_for() {  # description command...   (bounded by CGD_TIMEOUT)
  local what=$1 deadline=$((SECONDS + CGD_TIMEOUT))
  shift
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      printf '%s: timed out after %ss waiting for: %s\n' "$CGD_PROG" "$CGD_TIMEOUT" "$what" >&2
      return 1
    fi
    sleep 0.5
  done
}

# ------------------------------------------------------------------ ceph CLI and HTTP
cg_ceph() { timeout 60 ${CGD_IN_ROOT[@]+"${CGD_IN_ROOT[@]}"} ceph -c "$DIR/ceph.conf" --connect-timeout 15 "$@"; }

mgr_stat() {  # -> "EPOCH AVAILABLE(true|false) ACTIVE_NAME NUM_STANDBY"
  local js
  js=$(cg_ceph mgr stat -f json 2>/dev/null) || return 1
  printf '%s' "$js" | tr -d ' \n' | sed -n \
    's/.*"epoch":\([0-9]*\).*"available":\([a-z]*\).*"active_name":"\([^"]*\)".*"num_standby":\([0-9]*\).*/\1 \2 \3 \4/p'
}
mgr_active() {  # -> name of the active mgr if it is available (modules up), else fails
  local -a f
  read -r -a f <<<"$(mgr_stat)" && [ "${f[1]:-}" = true ] && [ -n "${f[2]:-}" ] && printf '%s' "${f[2]}"
}
mgr_is_active() { [ "$(mgr_active 2>/dev/null)" = "$1" ]; }
mgr_is_active_name() {  # name -> the mon has made NAME the active mgr (maybe still starting)
  local -a f
  read -r -a f <<<"$(mgr_stat)" && [ "${f[2]:-}" = "$1" ]
}

CGD_CURL_TLS=()
curl_setup() {  # call after DIR and TLS are known
  if [ -f "$DIR/tls/ca.crt" ]; then CGD_CURL_TLS=(--cacert "$DIR/tls/ca.crt"); else CGD_CURL_TLS=(); fi
}
http_code() {  # url [curl args...] -> HTTP status, 000 if no answer
  local url=$1; shift
  curl -s --noproxy '*' -o /dev/null -w '%{http_code}' --max-time 10 ${CGD_CURL_TLS[@]+"${CGD_CURL_TLS[@]}"} \
    "$@" "$url" 2>/dev/null || true
}
json_str() { local s=$1; s=${s//\\/\\\\}; s=${s//\"/\\\"}; printf '"%s"' "$s"; }
login_code() {  # base-url user password -> status of POST /api/auth (password never on a command line)
  http_code "$1/api/auth" -X POST -H "Accept: $CGD_ACCEPT" -H 'Content-Type: application/json' \
    --data-binary @- <<<"{\"username\": $(json_str "$2"), \"password\": $(json_str "$3")}"
}
login_ok() { [ "$(login_code "$@")" = 201 ]; }
answers() {  # url code... -> true if GET url answers one of the codes
  local got url=$1; shift
  got=$(http_code "$url")
  for c in "$@"; do [ "$got" = "$c" ] && return 0; done
  return 1
}
answers_any() { [ "$(http_code "$1")" != 000 ]; }

# Cheap probes for the wait loops. A ceph CLI call costs ~0.4 s of CPU, and polling with it
# twice a second slows the mgr it waits for on a 2-core machine; curl and grep cost nothing.
# The CLI is asked only to confirm once a cheap probe says yes.
dash_active() {  # url -> an active dashboard serves it (401 without a token; a standby gives 303 or its error status)
  [ "$(http_code "$1/api/health/minimal" -H "Accept: $CGD_ACCEPT")" = 401 ]
}
log_size() { stat -c %s "$DIR/log/$1.log" 2>/dev/null || echo 0; }
mgr_activated_since() {  # id offset -> mgr.ID logged its activation after byte OFFSET of its log, and the mon agrees
  [ -f "$DIR/log/mgr.$1.log" ] &&
    tail -c +"$(($2 + 1))" "$DIR/log/mgr.$1.log" | grep -q 'I am now activating' &&
    mgr_is_active_name "$1"
}

# ------------------------------------------------------------------ DIR/dashboard.env
shell_quote() {  # value -> as-is when plain, else single-quoted (POSIX sh compatible)
  if [[ $1 =~ ^[A-Za-z0-9_./:@%+,=-]*$ ]]; then printf '%s' "$1"
  else printf "'%s'" "${1//\'/\'\\\'\'}"; fi
}
env_write() {  # writes every CGD_ENV_KEYS variable of the current shell to DIR/dashboard.env (0600)
  local k tmp="$DIR/.dashboard.env.tmp"
  (
    umask 077
    {
      echo "# written by deploy/ceph-dev ($CGD_PROG) -- source it: . $DIR/dashboard.env"
      for k in "${CGD_ENV_KEYS[@]}"; do printf '%s=%s\n' "$k" "$(shell_quote "${!k-}")"; done
    } >"$tmp"
  )
  chmod 600 "$tmp"
  mv -f "$tmp" "$DIR/dashboard.env"
}
env_load() {  # sources DIR/dashboard.env (our own file, mode 600 in a mode-700 directory)
  [ -f "$DIR/dashboard.env" ] || return 1
  # shellcheck disable=SC1091
  . "$DIR/dashboard.env"
}
mgr_url() {  # name -> dashboard URL of that mgr (needs env_load)
  case "$1" in
    x) printf '%s' "$CG_DASH_URL" ;;
    y) [ -n "${CG_DASH_STANDBY_URL:-}" ] && printf '%s' "$CG_DASH_STANDBY_URL" ;;
    *) return 1 ;;
  esac
}
env_refresh_pids() {  # re-reads DIR/pids into the CG_*_PID keys and rewrites dashboard.env
  CG_MON_PID=$(pids_get mon.a || true)
  CG_MGR_X_PID=$(pids_get mgr.x || true)
  CG_MGR_Y_PID=$(pids_get mgr.y || true)
  CG_OSD_PID=$(pids_get osd.0 || true)
  CG_RGW_PID=$(pids_get rgw.a || true)
  env_write
}

# ------------------------------------------------------------------ port registry
# Ports are chosen free at run time. A port that is free now can still be taken by another
# instance that chose it a moment ago and has not bound it yet, or while an instance's mgrs are
# stopped for a test; so every instance records what it chose in a small shared registry
# (CGD_REGISTRY, one "DIR EPOCH PORT|LO-HI..." line per instance, guarded by flock), and the
# chooser skips those as well as every port in /proc/net/tcp{,6}. A line is dropped when its DIR
# is stopped or purged, or when it is older than 15 minutes and none of its daemons is alive.
reg_locked() {  # command... -> runs it holding the registry lock (fd 8)
  local rc=0
  exec 8>>"$CGD_REGISTRY.lock" || die 1 "cannot open $CGD_REGISTRY.lock"
  flock -w 60 8 || { exec 8>&-; die 1 "timed out waiting for $CGD_REGISTRY.lock"; }
  "$@" || rc=$?
  exec 8>&-
  return "$rc"
}
reg_live_lines() {  # prints the registry lines that are still valid
  local now line d e name pid alive
  now=$(date +%s)
  [ -f "$CGD_REGISTRY" ] || return 0
  while read -r line; do
    read -r d e _ <<<"$line"
    if [ -z "$d" ] || [ ! -e "$d/$CGD_MARKER" ]; then continue; fi
    if [ $((now - ${e:-0})) -lt 900 ]; then echo "$line"; continue; fi
    alive=0
    if [ -f "$d/pids" ]; then
      while read -r name pid; do pid_is_ours "$pid" "$name" "$d" && alive=1; done <"$d/pids"
    fi
    [ "$alive" = 0 ] || echo "$line"
  done <"$CGD_REGISTRY"
}
reg_rewrite() {  # [extra line] -> rewrites the registry without stale lines and without DIR's
  local tmp="$CGD_REGISTRY.tmp.$$"
  { reg_live_lines | awk -v d="$DIR" '$1 != d'; [ -z "${1:-}" ] || echo "$1"; } >"$tmp"
  mv -f "$tmp" "$CGD_REGISTRY"
}
reg_release() { reg_locked reg_rewrite ""; }

declare -A CGD_BUSY=()
busy_scan() {  # fills CGD_BUSY with every local TCP port in use and every registered port
  local line p lo hi
  local -a hex=()
  CGD_BUSY=()
  # one bulk read: bash's "read" goes byte by byte, which costs seconds on a /proc/net/tcp
  # with thousands of TIME-WAIT entries
  mapfile -t hex < <(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
    awk '{ n = split($2, a, ":"); if (n == 2 && a[2] ~ /^[0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f]$/) print a[2] }' |
    sort -u)
  for p in "${hex[@]}"; do CGD_BUSY[$((16#$p))]=1; done
  while read -r line; do
    # shellcheck disable=SC2086  # split the line on purpose
    set -- $line
    shift 2
    for p in "$@"; do
      if [[ $p =~ ^([0-9]+)-([0-9]+)$ ]]; then
        lo=${BASH_REMATCH[1]}; hi=${BASH_REMATCH[2]}
        for ((; lo <= hi; lo++)); do CGD_BUSY[$lo]=1; done
      else
        CGD_BUSY[$p]=1
      fi
    done
  done < <(reg_live_lines | awk -v d="$DIR" '$1 != d')
}
# pick_port LO HI: sets REPLY to a random port in [LO, HI] that is not in CGD_BUSY and marks it.
# (Results go through REPLY, not $(...): a subshell would lose the CGD_BUSY marks.)
pick_port() {
  local p i
  for ((i = 0; i < 5000; i++)); do
    p=$(( $1 + (RANDOM * 32768 + RANDOM) % ($2 - $1 + 1) ))
    if [ -z "${CGD_BUSY[$p]:-}" ]; then CGD_BUSY[$p]=1; REPLY=$p; return 0; fi
  done
  return 1
}
# pick_window LO HI WIDTH: sets REPLY to the first of WIDTH consecutive ports in [LO, HI],
# none of them in CGD_BUSY, and marks them.
pick_window() {
  local s j i ok
  for ((i = 0; i < 5000; i++)); do
    s=$(( $1 + (RANDOM * 32768 + RANDOM) % ($2 - $3 + 2 - $1) ))
    ok=1
    for ((j = s; j < s + $3; j++)); do [ -z "${CGD_BUSY[$j]:-}" ] || { ok=0; break; }; done
    if [ "$ok" = 1 ]; then
      for ((j = s; j < s + $3; j++)); do CGD_BUSY[$j]=1; done
      REPLY=$s; return 0
    fi
  done
  return 1
}
