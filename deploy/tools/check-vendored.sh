#!/usr/bin/env bash
# Fails unless every pingora-core and pingora-proxy in the resolved dependency graph is the
# vendored, patched copy (vendor/<crate>/CLUSTERGATE.md). A pingora release whose crates no
# longer match [patch.crates-io] would otherwise be taken from crates.io, silently dropping
# a patch.
set -euo pipefail
cd "$(dirname "$0")/../.."
host=$(rustc -vV | sed -n 's/^host: //p')
cargo metadata --locked --format-version 1 --filter-platform "$host" | python3 -c "$(cat <<'PY'
import json, os, sys
meta = json.load(sys.stdin)
failed = False
for crate in ("pingora-core", "pingora-proxy"):
    vendored = os.path.realpath("vendor/%s/Cargo.toml" % crate)
    found = [p for p in meta["packages"] if p["name"] == crate]
    elsewhere = [p for p in found if os.path.realpath(p["manifest_path"]) != vendored]
    for p in elsewhere:
        where = p.get("source") or p["manifest_path"]
        print("%s %s resolves to %s, not vendor/%s" % (crate, p["version"], where, crate), file=sys.stderr)
    if not found:
        print("no %s in the dependency graph" % crate, file=sys.stderr)
    if elsewhere or not found:
        print("check-vendored: the %s patch is not in force; see vendor/%s/CLUSTERGATE.md" % (crate, crate), file=sys.stderr)
        failed = True
    else:
        print("check-vendored: %s %s is the vendored copy" % (crate, found[0]["version"]))
sys.exit(1 if failed else 0)
PY
)"
