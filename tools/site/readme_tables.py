"""The READMEs' tables of encoders, decoders, attention scores and regions, from the registry.

README.md (and README.zh-CN.md, when it has the same region) holds them between

    <!-- generated: components -->
    <!-- /generated -->

`tables()` writes them from `seq2seq.registry`: one table per group, a row per registered
component in registration order, with its one-line summary (the first paragraph of its
class's docstring, the same words as the components reference) and, for a score or a
region, its options (the fields of its options dataclass, as `attention.score.<field>`).
A first paragraph longer than a line that cites its source (`... (Martins & Astudillo
2016): the Euclidean projection ...`) is cut after the citation. A docs page it names
(`docs/attention-taxonomy.md`) becomes a link, as in the components reference.

`write_readmes(repo)` fills the region of each README that has one (`make docs`);
`stale_readmes(repo)` names those whose region differs from the code's tables
(tests/test_docs_reference.py).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from seq2seq import registry
from tools.site.reference import first_paragraph, linked_doc_pages, table

README_NAMES = ("README.md", "README.zh-CN.md")
REGION = re.compile(
    r"^(?P<open><!--\s*generated:\s*components\s*-->)\n"
    r"(?P<body>.*?)^(?P<close><!--\s*/generated\s*-->)$",
    re.MULTILINE | re.DOTALL,
)
# The groups of the tables, with the head of their first column and whether they have options.
GROUP_HEADS = {
    "encoder": ("encoder", False),
    "decoder": ("decoder", False),
    "score": ("score: how a query meets each key", True),
    "region": ("region: how scores become weights", True),
}
LONG_SUMMARY = 110  # characters: a summary longer than this is cut after its citation


class MissingRegion(ValueError):
    """A README that must hold the generated tables has no region for them."""


def summary(component: registry.Component) -> str:
    """The component's one-line summary: its class docstring's first paragraph, cut after
    the citation that ends its first clause when it is longer than a line."""
    text = first_paragraph(component.builder)
    if len(text) > LONG_SUMMARY and "): " in text:
        text = text.split("): ")[0] + ")"
    return text


def options(component: registry.Component) -> str:
    """Its option keys (`attention.region.window`, ...), "" for none."""
    if component.options is None:
        return ""
    prefix = f"attention.{component.group}."
    return ", ".join(f"`{prefix}{field.name}`" for field in dataclasses.fields(component.options))


def tables() -> str:
    """The markdown of the four tables, separated by blank lines, ending with a newline."""
    lines: list[str] = []
    for group, (head, with_options) in GROUP_HEADS.items():
        header = [head, "what it is"] + (["its options"] if with_options else [])
        rows = [
            [f"`{c.name}`", linked_doc_pages(summary(c), "")]
            + ([options(c)] if with_options else [])
            for c in registry.components(group)
        ]
        lines += [*table(header, rows), ""]
    return "\n".join(lines).rstrip() + "\n"


def fill(text: str, generated: str | None = None) -> str:
    """`text` (a README) with its components region holding `generated` (default: the
    code's `tables()`); MissingRegion when it has no such region."""
    if REGION.search(text) is None:
        raise MissingRegion(
            "no <!-- generated: components --> ... <!-- /generated --> region in the README"
        )
    body = tables() if generated is None else generated
    return REGION.sub(lambda match: f"{match['open']}\n{body}{match['close']}", text, count=1)


def region_body(text: str) -> str | None:
    """What a README's components region holds now, or None when it has none."""
    match = REGION.search(text)
    return None if match is None else match["body"]


def readmes(repo: Path) -> list[Path]:
    """README.md, which must hold the region, and README.zh-CN.md when it holds one too."""
    found = [repo / README_NAMES[0]]
    for name in README_NAMES[1:]:
        path = repo / name
        if path.is_file() and region_body(path.read_text(encoding="utf-8")) is not None:
            found.append(path)
    return found


def write_readmes(repo: Path) -> list[Path]:
    """Fill the components region of each README (see `readmes`); returns those changed."""
    generated, changed = tables(), []
    for path in readmes(repo):
        text = path.read_text(encoding="utf-8")
        new = fill(text, generated)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def stale_readmes(repo: Path) -> list[str]:
    """The READMEs (names from `repo`) whose components region is missing (README.md) or
    differs from the code's tables."""
    generated = tables()
    return [
        path.relative_to(repo).as_posix()
        for path in readmes(repo)
        if region_body(path.read_text(encoding="utf-8")) != generated
    ]
