#!/usr/bin/env bash
# Fails unless every pingora-core in the resolved dependency graph is the vendored, patched
# copy (vendor/pingora-core/CLUSTERGATE.md). A pingora release whose pingora-core no longer
# matches [patch.crates-io] would otherwise be taken from crates.io, silently dropping the patch.
set -euo pipefail
cd "$(dirname "$0")/../.."
host=$(rustc -vV | sed -n 's/^host: //p')
cargo metadata --locked --format-version 1 --filter-platform "$host" | python3 -c "$(cat <<'PY'
import json, os, sys
meta = json.load(sys.stdin)
vendored = os.path.realpath("vendor/pingora-core/Cargo.toml")
cores = [p for p in meta["packages"] if p["name"] == "pingora-core"]
elsewhere = [p for p in cores if os.path.realpath(p["manifest_path"]) != vendored]
for p in elsewhere:
    where = p.get("source") or p["manifest_path"]
    print("pingora-core %s resolves to %s, not vendor/pingora-core" % (p["version"], where), file=sys.stderr)
if not cores:
    print("no pingora-core in the dependency graph", file=sys.stderr)
if elsewhere or not cores:
    print("check-vendored: the pingora-core patch is not in force; see vendor/pingora-core/CLUSTERGATE.md", file=sys.stderr)
    sys.exit(1)
print("check-vendored: pingora-core %s is the vendored copy" % cores[0]["version"])
PY
)"
