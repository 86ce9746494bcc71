"""The outputs a page shows, produced by running the page: they cannot drift from the code.

A block marked `<!-- run output="NAME" -->` keeps its output under NAME; a region of the
same page between

    <!-- output: NAME -->            (optionally: lines="8" match="valid|test BLEU")
    <!-- /output -->

is filled by `make docs` with a ```text block of that output: its last `lines` lines (8 by
default) among those that match the regular expression `match` (every line by default),
without the `[time][logger][LEVEL] - ` prefix of a log line, the working folder's path
written as `.`. A region with `size="full"` shows the output of the block run as the page
shows it (a training of minutes), never at toy size: only `python -m tools.site
--as-shown` or `--first-run` fill it. `fill_page(page, outputs)` returns the new text;
`output_names(page)` and `region_names(page)` let a test check that each region has a
block whose output fills it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tools.site.doc_blocks import ATTRIBUTE, read_blocks

REGION = re.compile(
    r"^(?P<open><!--\s*output:\s*(?P<name>[\w.-]+)(?P<attributes>[^>]*?)-->)\n"
    r"(?P<body>.*?)^(?P<close><!--\s*/output\s*-->)$",
    re.MULTILINE | re.DOTALL,
)
DEFAULT_LINES = 8
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
LOG_PREFIX = re.compile(r"^\[[^\]]*\]\[[^\]]*\]\[[A-Z]+\] - ", re.MULTILINE)  # Hydra's log lines
SIZES = ("toy", "full")


@dataclass(frozen=True)
class Shown:
    """How a region shows an output: how many of its last lines, matching what."""

    lines: int = DEFAULT_LINES
    match: str = ""
    size: str = "toy"  # "full": filled only by a run as shown

    @classmethod
    def parse(cls, attributes: str) -> Shown:
        found = {m["name"]: m["value"] for m in ATTRIBUTE.finditer(attributes)}
        unknown = set(found) - {"lines", "match", "size"}
        if unknown:
            raise ValueError(
                f"an output region takes lines=, match= and size=, not {sorted(unknown)}"
            )
        size = found.get("size", "toy")
        if size not in SIZES:
            raise ValueError(f"an output region's size= is one of {SIZES}, not {size!r}")
        return cls(int(found.get("lines", DEFAULT_LINES)), found.get("match", ""), size)

    def excerpt(self, output: str, folder: Path | None = None) -> str:
        """The lines of `output` to show, without colours or log prefixes, the working
        folder as `.`."""
        text = LOG_PREFIX.sub("", ANSI.sub("", output))
        if folder is not None:
            text = text.replace(str(folder), ".")
        kept = [line.rstrip() for line in text.splitlines() if "\r" not in line and line.strip()]
        if self.match:
            kept = [line for line in kept if re.search(self.match, line)]
        return "\n".join(kept[-self.lines :])


def region_names(page: Path, as_shown: bool = True) -> list[str]:
    """The names of the output regions of a page, in order; with `as_shown` False, only
    those that a run at toy size fills (not `size="full"`)."""
    return [
        match["name"]
        for match in REGION.finditer(page.read_text(encoding="utf-8"))
        if as_shown or Shown.parse(match["attributes"]).size != "full"
    ]


def output_names(page: Path) -> list[str]:
    """The names under which the page's runnable blocks keep their output."""
    return [block.output for block in read_blocks(page) if block.output]


def fill_page(
    text: str, outputs: dict[str, str], folder: Path | None = None, as_shown: bool = False
) -> str:
    """`text` with each output region holding its output's excerpt; a region whose output
    is not in `outputs`, or a `size="full"` one when the outputs are not `as_shown`, is
    left as it is."""

    def filled(match: re.Match[str]) -> str:
        name, shown = match["name"], Shown.parse(match["attributes"])
        if name not in outputs or (shown.size == "full" and not as_shown):
            return match[0]
        excerpt = shown.excerpt(outputs[name], folder)
        return f"{match['open']}\n```text\n{excerpt}\n```\n{match['close']}"

    return REGION.sub(filled, text)
