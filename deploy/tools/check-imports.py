#!/usr/bin/env python3
"""Fails when the crate's imports do not run one way.

Reads every `crate::` path in src/ (use lines and paths written inline, tests included:
a test that needs a module above its own lives with that module), and checks, between the
modules at the root of src/ (a folder counts as one) and between files: no cycle; and the
roof (the assembly in `app/`, the request path in `proxy`, the error mapping in
`error_answers`) is imported only from above it; and the residents of each home of a kind of
thing we get more of (`HOMES`: the credential sources, the Ceph releases, ...) import no other
resident, through `crate::` or `super::`, so adding one never means reading the others.
And docs/architecture.md, the one map of the tree, is held to it: its table of the import
tree's levels is the one `--levels` prints, and its map names every module and no path that
is gone. Run by tests/run.sh; `--graph` prints the module graph.
"""
import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src")
# Who may import each roof module (besides itself).
ROOF = {
    "app": {"lib", "main"},
    "proxy": {"app", "lib"},
    "error_answers": {"lib"},
}
# Folders whose files are residents of one kind, each standing alone (mod.rs, the home's
# shared part, and the names listed as shared may be imported by all of them).
HOMES = {
    # src/releases/v<X>_<Y>.rs: one Ceph release each (tests.rs holds them to the lists)
    ("releases",): ("release", {"tests"}),
    # src/auth/source/<source>.rs: one credential source each (mod.rs: the trait, the builder)
    ("auth", "source"): ("credential source", set()),
    # src/state/memory/<store>.rs and src/state/redis/<store>.rs: one store each, beside the
    # backend's shared parts (its connection, Sentinel, sealing, the tests' support; feed.rs
    # is the revocation store's subscription, the second half of revocations.rs)
    ("state", "memory"): ("memory store", set()),
    ("state", "redis"): (
        "Redis store",
        {"connection", "sentinel", "sealed", "feed", "test_support", "tests"},
    ),
}
SUPER_PATH = re.compile(r"\bsuper::([a-z_][a-z0-9_]*)")
CRATE_PATH = re.compile(r"\bcrate::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)")
USE_GROUP = re.compile(r"\buse\s+crate::\{([^;]*)\};", re.S)


def module_files():
    """{module path tuple: file} for every .rs file under src/."""
    files = {}
    for root, _, names in os.walk(SRC):
        for name in names:
            if not name.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(root, name), SRC)[:-3].split(os.sep)
            if rel[-1] == "mod" or rel == ["lib"]:
                rel = rel[:-1]
            files[tuple(rel)] = os.path.join(root, name)
    return files


def targets(text):
    """The module paths a file names through `crate::`."""
    found = [m.split("::") for m in CRATE_PATH.findall(text)]
    for group in USE_GROUP.findall(text):
        for item in re.split(r"[,\s]+", re.sub(r"\{[^}]*\}", "", group)):
            if item and item[0].islower():
                found.append(item.split("::"))
    return found


def resolve(path, files):
    """The longest prefix of `path` that is a module file."""
    for end in range(len(path), 0, -1):
        if tuple(path[:end]) in files:
            return tuple(path[:end])
    return None


def cycle(graph):
    """One cycle of `graph` ({node: set of nodes}) as a list, or None."""
    state = {}
    stack = []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def resident_problems(files, texts):
    """Residents of a home that import another resident of the same home."""
    problems = []
    for home, (kind, shared) in HOMES.items():
        residents = {m for m in files if m[:-1] == home and m[-1] not in shared}
        for module in sorted(residents):
            named = {resolve(t, files) for t in targets(texts[module])}
            named |= {home + (name,) for name in SUPER_PATH.findall(texts[module])}
            for other in sorted(named & residents - {module}):
                problems.append("%s imports %s: a %s imports no other (%s)"
                                % ("::".join(module), "::".join(other), kind, "::".join(home)))
    missing = [home for home in HOMES if home not in files]
    problems += ["the home %s does not exist (HOMES is out of date)" % "::".join(h) for h in missing]
    return problems


def top(module):
    """The top-level module of `module` (a path of names); the crate root's files are `lib`."""
    return module[0] if module else "lib"


ARCHITECTURE = os.path.join(os.path.dirname(SRC), "docs", "architecture.md")
LEVELS_START = "<!-- levels: written by deploy/tools/check-imports.py --levels; checked by it -->"
LEVELS_END = "<!-- end of levels -->"


def levels_table(top_graph):
    """The modules by level, as the table docs/architecture.md shows: level 0 imports no
    other module, level n imports only modules below n (the graph has no cycle)."""
    level = {}

    def of(node, depth=0):
        if node not in level:
            if depth > len(top_graph):
                raise RuntimeError("a cycle")
            level[node] = 1 + max((of(d, depth + 1) for d in top_graph.get(node, ())), default=-1)
        return level[node]

    for node in top_graph:
        of(node)
    rows = ["| level | modules (each imports only modules of lower levels) |", "| --- | --- |"]
    for n in range(max(level.values()) + 1):
        names = sorted(m for m, lv in level.items() if lv == n and m not in ("lib", "main"))
        rows.append("| %d | %s |" % (n, ", ".join("`%s`" % m for m in names)))
    return "\n".join([LEVELS_START] + rows + [LEVELS_END])


def architecture_problems(top_graph):
    """docs/architecture.md against the tree: its levels table is the current one, and its
    map names every module at the root of src/ (as `src/<name>`) and no path that is gone."""
    with open(ARCHITECTURE, encoding="utf-8") as f:
        page = f.read()
    problems = []
    if levels_table(top_graph) not in page:
        problems.append("docs/architecture.md: the levels of the import tree are not the code's: "
                        "replace its levels table with the output of deploy/tools/check-imports.py --levels")
    for module in sorted(set(top_graph) - {"lib", "main"}):
        if not re.search(r"src/%s(\.rs|/)" % module, page):
            problems.append("docs/architecture.md: module `%s` is not on the map: add a line for src/%s" % (module, module))
    for path in sorted(set(re.findall(r"\bsrc/[a-z_/]+(?:\.rs|/)", page))):
        if not os.path.exists(os.path.join(os.path.dirname(SRC), path)):
            problems.append("docs/architecture.md: %s does not exist: correct the map" % path)
    return problems


def main():
    files = module_files()
    texts = {}
    for module, path in files.items():
        with open(path, encoding="utf-8") as f:
            texts[module] = f.read()
    file_graph = {}
    for module in files:
        deps = {resolve(t, files) for t in targets(texts[module])} - {None, module}
        file_graph[module] = deps
    top_graph = {}
    for module, deps in file_graph.items():
        top_graph.setdefault(top(module), set()).update(
            top(d) for d in deps if top(d) != top(module)
        )
    if "--levels" in sys.argv:
        print(levels_table(top_graph))
        return
    if "--graph" in sys.argv:
        for node in sorted(top_graph):
            print(node, "->", " ".join(sorted(top_graph[node])))
    problems = []
    for name, graph in (("modules", top_graph), ("files", file_graph)):
        found = cycle(graph)
        if found:
            shown = [n if isinstance(n, str) else "::".join(n) or "lib" for n in found]
            problems.append("a cycle of %s: %s" % (name, " -> ".join(shown)))
    for node, deps in sorted(top_graph.items()):
        for roof, allowed in ROOF.items():
            if roof in deps and node not in allowed:
                problems.append("%s imports %s, which only %s may" % (node, roof, ", ".join(sorted(allowed))))
    problems += resident_problems(files, texts)
    problems += architecture_problems(top_graph)
    for problem in problems:
        print("check-imports: " + problem, file=sys.stderr)
    if problems:
        sys.exit(1)
    print("check-imports: %d files, %d modules, imports run one way" % (len(files), len(top_graph)))


main()
