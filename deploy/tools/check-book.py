#!/usr/bin/env python3
"""Builds the book (docs/, mdBook) and fails on anything a reader would trip over.

- mdbook must build it without a warning or an error (a page SUMMARY.md names that does not
  exist, an include that does not resolve);
- every link between pages must resolve: the page exists and so does the anchor, as mdBook
  renders its headings' ids (read from the rendered HTML, so the ids are mdBook's own);
- every link to a file of the repository (`../deploy/...`) must name one that exists; and
  README.md and CONTRIBUTING.md, whose links lead into the book, are held to the same.
Links to other sites are not fetched (CI has no internet), only their form is left alone.
Run by tests/run.sh's fast tier; `--no-build` checks an already rendered book.
"""
import html.parser
import os
import re
import subprocess
import sys
import urllib.parse

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DOCS = os.path.join(ROOT, "docs")
BOOK = os.path.join(ROOT, "target", "book")
MDBOOK = os.path.join(ROOT, ".tools", "bin", "mdbook")
# Markdown links: [text](target), not images' sources inside code spans or fences.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


class Ids(html.parser.HTMLParser):
    """The ids of one rendered page."""

    def __init__(self):
        super().__init__()
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)


def build():
    """Runs mdbook; returns its complaints (mdbook prints WARN and ERROR lines)."""
    result = subprocess.run(
        [MDBOOK, "build", DOCS], capture_output=True, text=True, check=False
    )
    lines = (result.stdout + result.stderr).splitlines()
    problems = [line for line in lines if "[WARN]" in line or "[ERROR]" in line]
    if result.returncode != 0 and not problems:
        problems = lines[-5:] or [f"mdbook exited {result.returncode}"]
    return problems


RENDERED_IDS = {}


def ids_of(page_html):
    """The ids of a rendered page, read once."""
    if page_html not in RENDERED_IDS:
        parser = Ids()
        with open(page_html, encoding="utf-8") as f:
            parser.feed(f.read())
        RENDERED_IDS[page_html] = parser.ids
    return RENDERED_IDS[page_html]


def outside_code(text):
    """The Markdown without its fenced blocks and code spans (links there are examples)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def check_markdown(path, in_book):
    """Problems of one Markdown file's links: `in_book` pages resolve .md links in the book."""
    rel = os.path.relpath(path, ROOT)
    here = os.path.dirname(path)
    problems = []
    with open(path, encoding="utf-8") as f:
        text = outside_code(f.read())
    for target in LINK.findall(text):
        scheme = urllib.parse.urlsplit(target).scheme
        if scheme in ("http", "https", "mailto"):
            continue
        file_part, _, anchor = target.partition("#")
        file_part = urllib.parse.unquote(file_part)
        if not file_part:
            resolved = path
        else:
            resolved = os.path.normpath(os.path.join(here, file_part))
        if not os.path.exists(resolved):
            problems.append(f"{rel}: link to {target}: no such file")
            continue
        if anchor and resolved.endswith(".md"):
            page = os.path.relpath(resolved, DOCS)
            if page.startswith(".."):
                continue  # a Markdown file outside the book: GitHub's anchors, not checked
            rendered = os.path.join(BOOK, page[:-3] + ".html")
            if os.path.basename(page) == "README.md":
                rendered = os.path.join(BOOK, os.path.dirname(page), "index.html")
            if not in_book and not os.path.exists(rendered):
                continue
            if anchor not in ids_of(rendered):
                problems.append(f"{rel}: link to {target}: no such anchor in {page}")
    return problems


def main():
    problems = [] if "--no-build" in sys.argv else build()
    for folder, _, names in os.walk(DOCS):
        for name in sorted(names):
            if name.endswith(".md"):
                problems += check_markdown(os.path.join(folder, name), True)
    for name in ("README.md", "CONTRIBUTING.md"):
        if os.path.exists(os.path.join(ROOT, name)):
            problems += check_markdown(os.path.join(ROOT, name), False)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"check-book: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
