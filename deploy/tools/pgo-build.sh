#!/usr/bin/env bash
# Profile-guided build of the release binary, for packagers and the measured builds.
#
#   deploy/tools/pgo-build.sh     -> target/pgo/release/clustergate (and the profile it used,
#                                    target/pgo/clustergate.profdata)
#
# 1. builds an instrumented release binary (-Cprofile-generate) in target/pgo-instrumented;
# 2. trains it on the benchmark's own workload: bench/run.sh in its short mode with that
#    binary as every clustergate contender (proxied requests over plain HTTP and TLS, token
#    checks, logins, the login flood, the Redis-backed gateway), everything on 127.0.0.1;
# 3. merges the raw profiles with llvm-profdata of rustc's own LLVM major (Debian's llvm-22
#    for rustc 1.95: an older one cannot read the raw profiles, a newer one writes an index
#    rustc cannot read);
# 4. builds the optimised binary with -Cprofile-use in target/pgo.
# About three release builds' time (20-30 minutes on 2 cores) plus 6 minutes of training.
#
# The profile is not checked in and plain `cargo build --release` does not use it: see
# docs/benchmarks.md ("Profile-guided optimisation") for the measurement and the reasons.
set -euo pipefail

ROOT=$(cd "$(dirname "$(realpath "$0")")/../.." && pwd)
cd "$ROOT"
log() { printf 'pgo-build: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

llvm_major=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
[ -n "$llvm_major" ] || die "cannot read rustc's LLVM version (rustc -vV)"
PROFDATA=${LLVM_PROFDATA:-llvm-profdata-$llvm_major}
if ! command -v "$PROFDATA" >/dev/null; then
  die "$PROFDATA is missing: apt-get install llvm-$llvm_major (or set LLVM_PROFDATA to the llvm-profdata of LLVM $llvm_major)"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/clustergate-pgo.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/raw" target/pgo

log "1/4 instrumented build (target/pgo-instrumented)"
RUSTFLAGS="-Cprofile-generate=$WORK/raw" \
  cargo build --release --locked --quiet --target-dir target/pgo-instrumented
# The floor is a contender of the training run, not trained: the plain build serves.
cargo build --release --locked --quiet --example pingora-floor

log "2/4 training: bench/run.sh, short mode, the instrumented binary as clustergate"
BENCH_QUICK=1 BENCH_NO_BUILD=1 BENCH_CALLGRIND=0 BENCH_SKIP_CEPH=1 \
  BENCH_CLUSTERGATE_BIN="$ROOT/target/pgo-instrumented/release/clustergate" \
  BENCH_RESULTS_DIR="$WORK/results" bench/run.sh >"$WORK/training.log" 2>&1 ||
  die "the training run failed: $(tail -5 "$WORK/training.log")"
compgen -G "$WORK/raw/*.profraw" >/dev/null ||
  die "the training wrote no profile (did the gateway exit cleanly on SIGTERM?)"

log "3/4 merging the profiles"
"$PROFDATA" merge -o target/pgo/clustergate.profdata "$WORK"/raw/*.profraw

log "4/4 optimised build (target/pgo)"
RUSTFLAGS="-Cprofile-use=$ROOT/target/pgo/clustergate.profdata" \
  cargo build --release --locked --quiet --target-dir target/pgo
log "done: target/pgo/release/clustergate"
