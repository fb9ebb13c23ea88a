"""Rewrites the patches of one vendored crate from the crate itself (deploy/tools/vendor-patches.sh
--regenerate): split-vendor-patches.py PUBLISHED VENDORED PATCHES.

Every place where VENDORED differs from the PUBLISHED crate (a hunk of `diff -U3`) carries a
`clustergate change N` comment on one of its added lines; it goes to PATCHES/NNNN-*.patch with
that number. Patch N is written as the difference between the crate with changes 1..N-1 and
the crate with changes 1..N, so that the patches apply in order. Each patch keeps its header
(the lines before its first `--- `). CLUSTERGATE.md is the vendored copy's own, in no patch.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

MARKER = re.compile(r"clustergate change (\d+)")
HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")


def fail(message):
    sys.exit("split-vendor-patches: " + message)


def changed_files(published, vendored):
    files = []
    for root, _, names in os.walk(vendored):
        for name in names:
            rel = os.path.relpath(os.path.join(root, name), vendored)
            if rel == "CLUSTERGATE.md":
                continue
            if not os.path.exists(os.path.join(published, rel)):
                fail("%s is not in the published crate; write the patch of a new file by hand"
                     % rel)
            files.append(rel)
    for root, _, names in os.walk(published):
        for name in names:
            rel = os.path.relpath(os.path.join(root, name), published)
            if not os.path.exists(os.path.join(vendored, rel)):
                fail("%s is not in the vendored crate; write the patch of a removal by hand"
                     % rel)
    return sorted(files)


def hunks_by_change(published, vendored):
    """{file: [(old start, old length, new lines, change number)]}"""
    hunks = {}
    for rel in changed_files(published, vendored):
        diff = subprocess.run(
            ["diff", "-U3", os.path.join(published, rel), os.path.join(vendored, rel)],
            capture_output=True, text=True, check=False,
        ).stdout
        current = None
        for line in diff.splitlines(keepends=True)[2:]:
            header = HUNK.match(line)
            if header:
                current = [int(header.group(1)), int(header.group(2) or 1), [], set()]
                hunks.setdefault(rel, []).append(current)
            elif line.startswith("\\"):
                fail("%s does not end with a newline" % rel)
            else:
                if line[0] in " +":
                    current[2].append(line[1:])
                if line[0] == "+":
                    current[3].update(int(n) for n in MARKER.findall(line))
        for start, _, _, changes in hunks.get(rel, []):
            if len(changes) != 1:
                found = "markers of changes %s" % sorted(changes) if changes else "no marker"
                fail("%s, the change near line %d of the published file, carries %s; every "
                     "changed place needs the comment of exactly one change (`clustergate "
                     "change N`), and two changes' places more than 6 lines between them"
                     % (rel, start, found))
    return {
        rel: [(start, length, new, changes.pop()) for start, length, new, changes in file_hunks]
        for rel, file_hunks in hunks.items()
    }


def with_changes(published, hunks, upto, into):
    """A copy of the published crate with the changes numbered up to `upto`."""
    shutil.copytree(published, into)
    for rel, file_hunks in hunks.items():
        with open(os.path.join(into, rel)) as f:
            lines = f.readlines()
        for start, length, new, change in sorted(file_hunks, key=lambda h: -h[0]):
            if change <= upto:
                first = start - 1 if length else start
                lines[first:first + length] = new
        with open(os.path.join(into, rel), "w") as f:
            f.writelines(lines)
    return into


def main():
    published, vendored, patches = sys.argv[1:]
    existing = {}
    for name in sorted(os.listdir(patches)):
        match = re.fullmatch(r"(\d{4})-[a-z0-9-]+\.patch", name)
        if match:
            existing[int(match.group(1))] = os.path.join(patches, name)
    hunks = hunks_by_change(published, vendored)
    marked = {change for file_hunks in hunks.values() for *_, change in file_hunks}
    if marked - existing.keys():
        fail("%s: changes %s are marked but have no patch; create NNNN-short-name.patch with "
             "a header (what and why, in a line or two) first"
             % (vendored, sorted(marked - existing.keys())))
    if existing.keys() - marked:
        fail("%s: patches of changes %s have no marked place left; delete them or mark their code"
             % (vendored, sorted(existing.keys() - marked)))
    work = tempfile.mkdtemp()
    try:
        before = with_changes(published, hunks, 0, os.path.join(work, "0"))
        for change in sorted(existing):
            after = with_changes(published, hunks, change, os.path.join(work, str(change)))
            with open(existing[change]) as f:
                text = f.read()
            header = text[: text.index("\n--- ")] if "\n--- " in text else text
            body = [header.rstrip("\n") + "\n\n"]
            for rel in sorted(hunks):
                body.append(subprocess.run(
                    ["diff", "-u", "--label", "a/" + rel, "--label", "b/" + rel,
                     os.path.join(before, rel), os.path.join(after, rel)],
                    capture_output=True, text=True, check=False,
                ).stdout)
            with open(existing[change], "w") as f:
                f.write("".join(body))
            before = after
    finally:
        shutil.rmtree(work)
    print("split-vendor-patches: wrote %d patches for %s" % (len(existing), vendored))


main()
