#!/usr/bin/env bash
# Renders the book's pictures: docs/diagrams/NAME.dot (Graphviz, the text they are kept in)
# into docs/diagrams/NAME.svg, which are checked in.
#   deploy/tools/render-diagrams.sh           renders them all
#   deploy/tools/render-diagrams.sh --check   fails when a checked-in SVG is not its source's
#                                             rendering (run by tests/run.sh's fast tier)
set -euo pipefail
cd "$(dirname "$0")/../../docs/diagrams"
check=false
[[ "${1:-}" != "--check" ]] || check=true
stale=()
for source in *.dot; do
  svg=${source%.dot}.svg
  if $check; then
    if ! dot -Tsvg "$source" | cmp -s - "$svg"; then
      stale+=("docs/diagrams/$svg")
    fi
  else
    dot -Tsvg "$source" -o "$svg"
  fi
done
if ((${#stale[@]} > 0)); then
  echo "render-diagrams: not the rendering of their source: ${stale[*]}; run deploy/tools/render-diagrams.sh" >&2
  exit 1
fi
