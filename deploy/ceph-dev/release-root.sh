#!/usr/bin/env bash
# release-root.sh -- the Debian root file systems that run Ceph releases other than the host's
# own, each from the Debian suite deploy/ceph-releases names (18.2 from trixie, 20.2 from
# forky), each built once with debootstrap and Debian's packages only, kept in $CG_CEPH_ROOT_CACHE (default
# /var/cache/clustergate-ceph-dev/<suite>) and reused.
#
#   release-root.sh build RELEASE       build the root if it is not ready; prints its path
#   release-root.sh path RELEASE        prints the root's path; exit 1 if it is not ready
#   release-root.sh data RELEASE        builds the root if needed, then installs what a cluster
#                                       with data needs (ceph-osd radosgw) into it when absent;
#                                       prints its path
#   release-root.sh run RELEASE [--bind DIR]... -- COMMAND [ARG]...
#                                       runs COMMAND inside the root (exec: same pid), with
#                                       /proc, /sys, /dev and every DIR mounted at the same
#                                       path, in a mount namespace of its own
#   release-root.sh unbind RELEASE DIR  removes the (empty) mount point that "run --bind DIR"
#                                       left in the root
#
# Nothing is ever mounted on the host: "run" makes a private mount namespace (unshare -m),
# mounts there and execs chroot, so the mounts end with the last process that uses them and
# there is nothing to unmount. Needs root (debootstrap, unshare, chroot).
#
# Building installs debootstrap on the host if it is missing (like start-dashboard.sh installs
# 16.2's packages), then debootstrap --variant=minbase, then ceph-mon ceph-mgr
# ceph-mgr-dashboard ceph-common ceph-base inside, checks that `ceph --version` is the release
# asked for (Debian may move a suite on), and only then moves the finished root into place;
# a failed build leaves nothing behind. Concurrent builds of one release wait for each other.
# The time it took is printed. Log: DIR.log next to the root.
#
# "data" adds ceph-osd and radosgw to a ready root (cached roots predate them) with the
# root's own apt, in a private mount namespace with /proc mounted for the packages' scripts;
# the marker .clustergate-data says it is done, so it runs once. The base packages are left
# alone: a root built before "data" existed is not built again.
#
# Exit codes: 0 ok, 1 build or run failed, 2 usage, 3 not ready (path) / cannot install.
set -euo pipefail
CGD_PROG='release-root.sh'
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$(dirname "$(realpath "$0")")/lib.sh"

CACHE=${CG_CEPH_ROOT_CACHE:-/var/cache/clustergate-ceph-dev}
# what every root gets: monmaptool is in ceph-base (trixie's ceph-mon no longer pulls it in)
ROOT_PACKAGES=(ceph-mon ceph-mgr ceph-mgr-dashboard ceph-common ceph-base uuid-runtime)
release_packages() {  # RELEASE -> ROOT_PACKAGES plus what that release's dashboard needs
  local extra more=()                 # (deploy/ceph-releases: ROOT_EXTRA)
  extra=$(release_field "$1" root_extra)
  [ -z "$extra" ] || [ "$extra" = - ] || IFS=, read -ra more <<<"$extra"
  ROOT_PACKAGES+=("${more[@]}")
}

# what a cluster with data adds (start-dashboard.sh --data): a memstore OSD and a radosgw
DATA_PACKAGES=(ceph-osd radosgw)

release_suite() {  # RELEASE -> Debian suite that packages it (deploy/ceph-releases: SUITE)
  local suite
  suite=$(release_field "$1" suite)
  case "$suite" in
    ''|host) die 2 "no root for Ceph release '$1' (deploy/ceph-releases: $CGD_HOST_RELEASE runs on the host)" ;;
    *) printf '%s' "$suite" ;;
  esac
}

host_mirror() {  # the URI the host's apt uses for its own "<codename>/main"
  local codename
  # shellcheck source=/dev/null  # the host's, read for its codename only
  codename=$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")
  apt-cache policy 2>/dev/null |
    awk -v s="$codename/main" '$2 ~ /^https?:\/\// && $3 == s { print $2; exit }'
}

in_root() { chroot "$ROOT" "$@"; }   # during the build only (no mounts needed beyond /proc)

# Ceph 18.2's mgr_util.py imports bcrypt in every mgr module's Python sub-interpreter, and
# trixie's python3-bcrypt 4.x is a PyO3 extension that refuses sub-interpreters: no mgr module
# (the dashboard included) would load. Debian 12's python3-bcrypt 3.2.2 is the last cffi-based
# one and works with trixie's cffi backend: install it from bookworm, pinned so that nothing
# else comes from there, and hold it. (20.2 calls bcrypt in a separate process.)
bcrypt_fix() {
  local version mirror
  grep -q '^import bcrypt' "$ROOT/usr/share/ceph/mgr/mgr_util.py" 2>/dev/null || return 0
  version=$(in_root python3 -c 'import bcrypt; print(bcrypt.__version__)' 2>/dev/null || echo 0)
  [ "${version%%.*}" -ge 4 ] 2>/dev/null || return 0
  mirror=$1
  log "python3-bcrypt $version is PyO3 (refuses ceph-mgr's sub-interpreters): installing bookworm's 3.2.2"
  echo "deb $mirror bookworm main" >"$ROOT/etc/apt/sources.list.d/bookworm-bcrypt.list"
  printf 'Package: *\nPin: release n=bookworm\nPin-Priority: 100\n' >"$ROOT/etc/apt/preferences.d/bookworm-bcrypt"
  {
    in_root apt-get update
    in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      --allow-downgrades python3-bcrypt/bookworm
    in_root apt-mark hold python3-bcrypt
  } >>"$BUILD_LOG" 2>&1
  version=$(in_root python3 -c 'import bcrypt; print(bcrypt.__version__)' 2>/dev/null || echo 0)
  [ "${version%%.*}" -lt 4 ] || die 1 "python3-bcrypt in the $SUITE root is still $version"
}

install_debootstrap() {
  command -v debootstrap >/dev/null 2>&1 && return 0
  is_true_env "${CG_CEPH_NO_INSTALL:-}" && die 3 "debootstrap is missing and CG_CEPH_NO_INSTALL is set"
  log "installing debootstrap on the host"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends \
    debootstrap >>"$BUILD_LOG" 2>&1 || {
    apt-get update >>"$BUILD_LOG" 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends \
      debootstrap >>"$BUILD_LOG" 2>&1 || die 3 "installing debootstrap failed (log: $BUILD_LOG)"
  }
}
is_true_env() { case "${1:-}" in 1|true|yes|on) return 0 ;; *) return 1 ;; esac; }

# The marker names the packages the root was built with: a root built with another list is
# built again.
ready() {
  [ -x "$ROOT/usr/bin/ceph-mgr" ] && grep -qxF "packages: ${ROOT_PACKAGES[*]}" "$ROOT/.clustergate-ready" 2>/dev/null
}
root_in_use() {  # a process runs with ROOT as its root directory
  local p
  for p in /proc/[0-9]*/root; do [ "$(readlink "$p" 2>/dev/null)" = "$ROOT" ] && return 0; done
  return 1
}

# Builds into ROOT.partial with /proc mounted there for the packages' scripts; the mount and
# the partial tree go away whatever happens, and only a checked root is renamed to ROOT.
PARTIAL=""
cleanup_partial() {
  [ -n "$PARTIAL" ] || return 0
  if mountpoint -q "$PARTIAL/proc"; then umount "$PARTIAL/proc" || umount -l "$PARTIAL/proc"; fi
  rm -rf -- "$PARTIAL"
}
build() {
  local mirror script version t0=$SECONDS partial="$ROOT.partial"
  PARTIAL=$partial
  trap cleanup_partial EXIT
  cleanup_partial
  if [ -e "$ROOT" ]; then   # an unfinished or outdated root
    root_in_use && die 1 "$ROOT must be built again but processes run in it; stop them first"
    log "removing the unfinished or outdated root $ROOT"
    rm -rf -- "$ROOT"
  fi
  : >"$BUILD_LOG"
  install_debootstrap
  mirror=${CG_CEPH_MIRROR:-$(host_mirror)}
  mirror=${mirror:-http://deb.debian.org/debian}
  script=/usr/share/debootstrap/scripts/$SUITE
  [ -e "$script" ] || script=/usr/share/debootstrap/scripts/sid   # forky on Debian 12's debootstrap
  log "building the Ceph $RELEASE root: debootstrap $SUITE from $mirror (log: $BUILD_LOG)"
  debootstrap --variant=minbase "$SUITE" "$partial" "$mirror" "$script" >>"$BUILD_LOG" 2>&1 ||
    { tail -20 "$BUILD_LOG" >&2; die 1 "debootstrap $SUITE failed"; }
  log "debootstrap done ($((SECONDS - t0)) s)"
  ROOT=$partial
  mount -t proc proc "$ROOT/proc"
  printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"   # never start services
  chmod 755 "$ROOT/usr/sbin/policy-rc.d"
  # testing's (forky's) Release file is valid for a week only; a mirror frozen at a snapshot
  # (as this machine's is) serves an expired one, which apt would refuse
  printf 'Acquire::Check-Valid-Until "false";\n' >"$ROOT/etc/apt/apt.conf.d/99clustergate-snapshot-mirror"
  log "installing ${ROOT_PACKAGES[*]}"
  in_root apt-get update >>"$BUILD_LOG" 2>&1
  in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    "${ROOT_PACKAGES[@]}" >>"$BUILD_LOG" 2>&1 ||
    { tail -20 "$BUILD_LOG" >&2; die 1 "installing Ceph in the $SUITE root failed"; }
  bcrypt_fix "$mirror"
  in_root apt-get clean >>"$BUILD_LOG" 2>&1
  version=$(in_root ceph --version 2>/dev/null || true)
  case "$version" in
    "ceph version $RELEASE."*) ;;
    *) die 1 "$SUITE installed '$version', not Ceph $RELEASE (has Debian moved the suite on?)" ;;
  esac
  printf '%s\npackages: %s\n' "$version" "${ROOT_PACKAGES[*]}" >"$ROOT/.clustergate-ready"
  umount "$ROOT/proc"
  ROOT=${partial%.partial}
  mv -- "$partial" "$ROOT"
  PARTIAL=""
  trap - EXIT
  log "Ceph $RELEASE root ready in $ROOT after $((SECONDS - t0)) s: $version"
}

data_ready() { grep -qxF "packages: ${DATA_PACKAGES[*]}" "$ROOT/.clustergate-data" 2>/dev/null; }

# Installs DATA_PACKAGES into the ready ROOT (under the build lock).
add_data() {
  local t0=$SECONDS
  log "installing ${DATA_PACKAGES[*]} into the Ceph $RELEASE root $ROOT (log: $BUILD_LOG)"
  # shellcheck disable=SC2016  # expanded by the inner shell
  unshare --mount --propagation private -- /bin/sh -euc '
    root=$1; shift
    mount -t proc proc "$root/proc"
    chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" ||
      { chroot "$root" apt-get update && chroot "$root" env DEBIAN_FRONTEND=noninteractive \
          apt-get install -y --no-install-recommends "$@"; }
    chroot "$root" apt-get clean
  ' release-root "$ROOT" "${DATA_PACKAGES[@]}" >>"$BUILD_LOG" 2>&1 ||
    { tail -20 "$BUILD_LOG" >&2; die 1 "installing ${DATA_PACKAGES[*]} in the $SUITE root failed"; }
  if [ ! -x "$ROOT/usr/bin/ceph-osd" ] || [ ! -x "$ROOT/usr/bin/radosgw" ]; then
    die 1 "the $SUITE root has no ceph-osd or radosgw after installing them"
  fi
  printf 'packages: %s\n' "${DATA_PACKAGES[*]}" >"$ROOT/.clustergate-data"
  log "${DATA_PACKAGES[*]} installed in the Ceph $RELEASE root after $((SECONDS - t0)) s"
}

# run: the private namespace, its mounts, then exec chroot. The mount points of --bind
# directories are created in the root (empty directories, removed by stop-dashboard.sh).
run_in_root() {
  local -a binds=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --bind) [ $# -ge 2 ] || die 2 "--bind needs a directory"; binds+=("$(resolve_dir "$2")"); shift 2 ;;
      --) shift; break ;;
      *) die 2 "run: expected --bind DIR or --, got '$1'" ;;
    esac
  done
  [ $# -ge 1 ] || die 2 "run: no command"
  ready || die 3 "the Ceph $RELEASE root $ROOT is not built (release-root.sh build $RELEASE)"
  local b
  for b in "${binds[@]}"; do mkdir -p "$ROOT$b"; done
  # shellcheck disable=SC2016  # expanded by the inner shell
  exec unshare --mount --propagation private -- /bin/sh -euc '
    root=$1; nbinds=$2; shift 2
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"
    mount --rbind /dev "$root/dev"
    while [ "$nbinds" -gt 0 ]; do mount --bind "$1" "$root$1"; shift; nbinds=$((nbinds - 1)); done
    exec chroot "$root" "$@"
  ' release-root "$ROOT" "${#binds[@]}" "${binds[@]}" "$@"
}

[ $# -ge 2 ] || { usage_header >&2; exit 2; }
CMD=$1 RELEASE=$2
shift 2
SUITE=$(release_suite "$RELEASE")
release_packages "$RELEASE"
ROOT=$CACHE/$SUITE
BUILD_LOG=$CACHE/$SUITE.log
[ "$(id -u)" = 0 ] || die 2 "Ceph $RELEASE runs in a chroot: run as root"
case "$CMD" in
  build)
    mkdir -p "$CACHE"
    exec 7>"$CACHE/$SUITE.lock"
    flock -w 1800 7 || die 1 "timed out waiting for another build of $ROOT"
    if ready; then log "Ceph $RELEASE root ready in $ROOT: $(head -1 "$ROOT/.clustergate-ready")"; else build; fi
    exec 7>&-
    printf '%s\n' "$ROOT"
    ;;
  data)
    mkdir -p "$CACHE"
    exec 7>"$CACHE/$SUITE.lock"
    flock -w 1800 7 || die 1 "timed out waiting for another build of $ROOT"
    if ! ready; then build; fi
    if data_ready; then log "${DATA_PACKAGES[*]} already in $ROOT"; else add_data; fi
    exec 7>&-
    printf '%s\n' "$ROOT"
    ;;
  path) ready || die 3 "the Ceph $RELEASE root $ROOT is not built"; printf '%s\n' "$ROOT" ;;
  run) run_in_root "$@" ;;
  unbind)
    [ $# = 1 ] || die 2 "unbind: expected one DIR"
    target=$ROOT$(resolve_dir "$1")
    # only an empty directory that is not a mount point (rmdir refuses anything else)
    if [ -d "$target" ] && ! mountpoint -q "$target"; then rmdir -- "$target" 2>/dev/null || true; fi
    ;;
  *) die 2 "unknown command '$CMD' (build, data, path, run or unbind)" ;;
esac
