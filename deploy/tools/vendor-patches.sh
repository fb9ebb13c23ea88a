#!/usr/bin/env bash
# vendor/<name> is a published crate (vendor/patches/published-crates.txt) with the patches
# in vendor/patches/<name>/ applied in file-name order, plus its CLUSTERGATE.md (why each
# change). This script keeps the two in step (vendor/README.md says when to use which mode):
#   deploy/tools/vendor-patches.sh --check        fails, naming every difference, unless each
#                                                 vendor/<name> is exactly crate + patches
#                                                 (tests/run.sh runs it)
#   deploy/tools/vendor-patches.sh --apply        rebuilds each vendor/<name> from crate +
#                                                 patches, keeping its CLUSTERGATE.md
#   deploy/tools/vendor-patches.sh --regenerate   rewrites each patch from vendor/<name>: a
#                                                 changed place goes to the patch of the
#                                                 `clustergate change N` comment it carries
#                                                 (then checks as --check does)
# The .crate files come from cargo's registry cache; one that is missing there is downloaded
# by cargo itself (a throw-away manifest that depends on exactly that version), so the script
# runs offline once they are cached.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD

usage() {
  echo "usage: deploy/tools/vendor-patches.sh --check | --apply | --regenerate" >&2
  exit 2
}
[[ $# -eq 1 ]] || usage
case "$1" in
  --check | --apply | --regenerate) mode=${1#--} ;;
  *) usage ;;
esac

if ! command -v patch >/dev/null 2>&1; then
  echo "vendor-patches: patch is not installed (deploy/install-deps.sh --test installs it)" >&2
  exit 1
fi

work=$(mktemp -d /tmp/clustergate-vendor-patches.XXXXXX)
keep_work=false
cleanup() {
  if [[ $keep_work == false ]]; then rm -rf "$work"; fi
}
trap cleanup EXIT

names=()
versions=()
sums=()
while read -r name version sum; do
  [[ -z $name || $name == \#* ]] && continue
  names+=("$name")
  versions+=("$version")
  sums+=("$sum")
done <vendor/patches/published-crates.txt

registry_cache="${CARGO_HOME:-$HOME/.cargo}/registry/cache"

# The cached .crate of name-version whose sha256 is the pinned one; nothing if there is none.
cached_crate() {
  local file=$1 sum=$2 candidate
  for candidate in "$registry_cache"/*/"$file"; do
    if [[ -f $candidate ]] && [[ $(sha256sum "$candidate" | cut -d' ' -f1) == "$sum" ]]; then
      echo "$candidate"
      return
    fi
  done
}

# Lets cargo download the crates it has not cached: the project's Cargo.lock pins everything
# else, so only those are downloaded (or nothing, with CARGO_NET_OFFLINE=true).
fetch_crates() {
  local manifest=$work/fetch i host
  mkdir -p "$manifest/src"
  : >"$manifest/src/lib.rs"
  {
    printf '[package]\nname = "vendor-patches-fetch"\nversion = "0.0.0"\nedition = "2021"\n'
    printf 'publish = false\n\n[dependencies]\n'
    for i in "${!names[@]}"; do
      printf '%s = { version = "=%s", default-features = false }\n' "${names[i]}" "${versions[i]}"
    done
  } >"$manifest/Cargo.toml"
  cp Cargo.lock "$manifest/"
  host=$(rustc -vV | sed -n 's/^host: //p')
  (cd "$manifest" && cargo fetch --quiet --target "$host")
}

for i in "${!names[@]}"; do
  if [[ -z $(cached_crate "${names[i]}-${versions[i]}.crate" "${sums[i]}") ]]; then
    fetch_crates
    break
  fi
done

# The published crates, unpacked into $work/published/<name>.
mkdir -p "$work/published"
for i in "${!names[@]}"; do
  name=${names[i]}
  file="$name-${versions[i]}.crate"
  crate=$(cached_crate "$file" "${sums[i]}")
  if [[ -z $crate ]]; then
    echo "vendor-patches: no $file with sha256 ${sums[i]} in $registry_cache" >&2
    for other in "$registry_cache"/*/"$file"; do
      [[ -f $other ]] && echo "  $other has sha256 $(sha256sum "$other" | cut -d' ' -f1)" >&2
    done
    echo "  (vendor/patches/published-crates.txt pins each crate's checksum)" >&2
    exit 1
  fi
  tar -xzf "$crate" -C "$work/published"
  mv "$work/published/$name-${versions[i]}" "$work/published/$name"
done

if [[ $mode == regenerate ]]; then
  for name in "${names[@]}"; do
    python3 deploy/tools/split-vendor-patches.py "$work/published/$name" "vendor/$name" \
      "vendor/patches/$name"
  done
  mode=check
fi

# Every crate is patched before vendor/ is compared or replaced, so that --apply changes
# nothing when a patch does not apply.
for i in "${!names[@]}"; do
  name=${names[i]}
  file="$name-${versions[i]}.crate"
  tree=$work/$name
  cp -R "$work/published/$name" "$tree"
  for change in vendor/patches/"$name"/*.patch; do
    [[ -f $change ]] || continue
    rm -rf "$tree.before"
    cp -R "$tree" "$tree.before"
    if ! patch --quiet --forward --fuzz=0 --no-backup-if-mismatch -p1 -d "$tree" \
      -i "$repo/$change" >"$work/patch.out" 2>&1; then
      echo "vendor-patches: $change does not apply to $file:" >&2
      sed 's/^/  /' "$work/patch.out" >&2
      if [[ $mode == apply ]]; then
        keep_work=true
        echo "  $tree.before: $file with the earlier patches; $tree: that and this" \
          "patch's hunks that applied, *.rej the others (vendor/README.md: a new release)" >&2
      fi
      exit 1
    fi
  done
  rm -rf "$tree.before"
done

failed=false
for i in "${!names[@]}"; do
  name=${names[i]}
  file="$name-${versions[i]}.crate"
  tree=$work/$name
  if [[ $mode == check ]]; then
    if ! diff -ru -x CLUSTERGATE.md "$tree" "vendor/$name" >"$work/diff.out"; then
      echo "vendor-patches: vendor/$name is not $file with its patches applied:" >&2
      sed "s|$tree|$file + patches|" "$work/diff.out" | head -n 100 >&2
      failed=true
    else
      count=$(find "vendor/patches/$name" -name '*.patch' | wc -l)
      echo "vendor-patches: vendor/$name is $file with its $count patches"
    fi
  else
    if [[ -f vendor/$name/CLUSTERGATE.md ]]; then
      cp "vendor/$name/CLUSTERGATE.md" "$tree/"
    else
      echo "vendor-patches: vendor/$name has no CLUSTERGATE.md yet; write one (why each change)" >&2
    fi
    rm -rf "vendor/$name"
    cp -R "$tree" "vendor/$name"
    echo "vendor-patches: rebuilt vendor/$name from $file and vendor/patches/$name/*.patch"
  fi
done
[[ $failed == false ]]
