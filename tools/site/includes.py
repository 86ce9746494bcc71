"""The repository's top-level result files shown inside the site's results pages.

BENCHMARKS.md, COMPARISON.md and RELIABILITY.md live at the top of the repository (scripts
append to them) and are read there on GitHub; the results pages include them whole, with a
line of their own:

    <!-- include: COMPARISON.md -->

`include_files(markdown, page)` replaces each such line by the file's text, its relative
links rewritten for the page: a link to a file below docs/ points to it from the page's
folder, an anchor stays as it is, and a link to another file of the repository (a script,
a profile) becomes its path as code, since the site holds only docs/. Nothing is copied.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

INCLUDE = re.compile(r"^<!--\s*include:\s*(?P<path>[\w./-]+)\s*-->\s*$", re.MULTILINE)
LINK = re.compile(r"(?P<bang>!?)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")
REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS = "docs"


def include_files(markdown: str, page: str, repo: Path = REPO_ROOT) -> str:
    """`markdown` of the page at `page` (a path below docs/, `results/comparison.md`) with
    each include line replaced by the file it names (a path from the repository's top)."""

    def included(match: re.Match[str]) -> str:
        source = match["path"]
        path = repo / source
        if not path.is_file():
            raise FileNotFoundError(f"docs/{page} includes {source}, which does not exist")
        return relinked(path.read_text(encoding="utf-8"), source, page)

    return INCLUDE.sub(included, markdown)


def relinked(text: str, source: str, page: str) -> str:
    """The links of `text` (the file `source`, from the repository's top) made right for
    the page `page` (below docs/)."""
    source_dir, page_dir = posixpath.dirname(source), posixpath.join(DOCS, posixpath.dirname(page))

    def link(match: re.Match[str]) -> str:
        target = match["target"]
        if target.startswith("#") or re.match(r"^[a-z][a-z0-9+.-]*:", target):
            return match[0]
        path, _, anchor = target.partition("#")
        in_repo = posixpath.normpath(posixpath.join(source_dir, path))
        if in_repo == DOCS or in_repo.startswith(DOCS + "/"):
            moved = posixpath.relpath(in_repo, page_dir) + (f"#{anchor}" if anchor else "")
            return f"{match['bang']}[{match['text']}]({moved})"
        text = match["text"]
        return f"`{in_repo}`" if text.strip("`") == in_repo else f"{text} (`{in_repo}`)"

    return LINK.sub(link, text)
