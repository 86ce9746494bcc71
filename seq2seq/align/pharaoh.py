"""Word links in the Pharaoh format: one line per sentence pair, links `i-j`.

`i` is a source word and `j` a target word, both counted from 0, links separated by
spaces: `0-0 1-2 2-1`; an empty line is a pair without links. Gold files also mark how
certain a link is (Och & Ney 2003): a *sure* link (`i-j`, also written `i-j-S`) is
one every annotator agrees on, a *possible* link (`i-j-P`, or `ipj` as some gold sets
write it) one that is acceptable but not required (function words, idioms). By definition every sure link is also possible, S ⊆ P. Some gold sets
count words from 1; `one_based=True` reads them. A file read as 0-based in which no link
uses word 0 on either side is most likely 1-based, and it is read with a warning: shifted
by one word, its links still fit their sentences unless one names a sentence's last word.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from seq2seq.bounded_files import read_bounded
from seq2seq.text_encoding import decoded_text

Link = tuple[int, int]  # (source word, target word), both from 0

LINK_PATTERN = re.compile(r"(\d+)-(\d+)(?:-([SsPp]))?|(\d+)([Pp])(\d+)")
EXPECTED = "expected i-j, i-j-S, i-j-P or ipj"
# A Pharaoh file holds a line of links per sentence pair: about 60 bytes a pair, so 2 GiB is
# some 30 million pairs, beyond the largest corpus the project prepares.
LINKS_LIMIT = 2 << 30
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Links:
    """The links of one sentence pair: `sure` S and `possible` P, with S ⊆ P always (a
    sure link given only as sure is added to `possible`). A model's alignment has only
    sure links: `Links.of(pairs)`."""

    sure: frozenset[Link] = field(default_factory=frozenset)
    possible: frozenset[Link] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sure", frozenset(self.sure))
        object.__setattr__(self, "possible", frozenset(self.possible) | self.sure)

    @classmethod
    def of(cls, links: Iterable[Link]) -> Links:
        """An alignment whose links are all sure (what an aligner proposes)."""
        return cls(sure=frozenset(links))


def parse_links(line: str, *, one_based: bool = False, where: str = "line 1") -> Links:
    """The links of one Pharaoh line; ValueError naming `where` and the bad token."""
    sure: set[Link] = set()
    possible: set[Link] = set()
    for token in line.split():
        link, is_sure = _parse_token(token, one_based, where)
        (sure if is_sure else possible).add(link)
    return Links(frozenset(sure), frozenset(possible))


def _parse_token(token: str, one_based: bool, where: str) -> tuple[Link, bool]:
    match = LINK_PATTERN.fullmatch(token)
    if match is None:
        raise ValueError(f"{where}: malformed link {token!r} ({EXPECTED})")
    dashed_source, dashed_target, mark, source, _, target = match.groups()
    if dashed_source is not None:
        source, target, is_sure = dashed_source, dashed_target, mark in (None, "S", "s")
    else:
        is_sure = False  # ipj
    link = (int(source), int(target))
    if one_based:
        if 0 in link:
            raise ValueError(f"{where}: link {token!r} has index 0 in a file read as 1-based")
        link = (link[0] - 1, link[1] - 1)
    return link, is_sure


def parse_lines(lines: Sequence[str], name: str, *, one_based: bool = False) -> list[Links]:
    """The links of every line of the file `name`; errors say `name line N: ...`. A warning
    when the file is read as 0-based and no link uses word 0 (`warn_if_one_based`)."""
    found = [
        parse_links(line, one_based=one_based, where=f"{name} line {number}")
        for number, line in enumerate(lines, 1)
    ]
    if not one_based:
        warn_if_one_based(found, name)
    return found


def warn_if_one_based(alignments: Sequence[Links], name: str) -> None:
    """Log a warning naming the file `name` when it has links but none uses word 0 on
    either side on any line: the sign of a 1-based file read as 0-based."""
    links = [link for links in alignments for link in links.possible]
    if links and all(0 not in link for link in links):
        log.warning(
            "%s: no link uses word 0 on any line: is the file 1-based? It is read as "
            "0-based (one_based=True, or --one-based, reads it from 1)", name
        )


def read_links(
    path: str | Path, *, one_based: bool = False, limit: int = LINKS_LIMIT
) -> list[Links]:
    """The links of a Pharaoh file (UTF-8), one `Links` per line; a UTF-16 or UTF-32 file is
    a ValueError naming its encoding (`seq2seq.text_encoding.TextEncodingError`). The file
    is read within `limit` bytes, its size checked first, and only when it is a regular
    file (`seq2seq.bounded_files.read_bounded`: a 10 GB sparse file or a FIFO is a
    ValueError at once, not a read that fills memory or never returns)."""
    text = decoded_text(read_bounded(path, limit=limit), str(path))
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the line end of the last line
    return parse_lines([line.rstrip("\r") for line in lines], str(path), one_based=one_based)


def format_links(links: Links) -> str:
    """One Pharaoh line, links sorted by source then target word: sure links as `i-j`,
    links that are only possible as `i-j-P`."""
    tokens = [
        f"{source}-{target}" if (source, target) in links.sure else f"{source}-{target}-P"
        for source, target in sorted(links.possible)
    ]
    return " ".join(tokens)


def write_links(stream: TextIO, alignments: Iterable[Links]) -> None:
    """One Pharaoh line per sentence pair."""
    for links in alignments:
        stream.write(format_links(links) + "\n")


def check_links_fit(links: Links, source_words: int, target_words: int, where: str) -> None:
    """ValueError when a link names a word beyond its sentence (often a 1-based file
    read as 0-based)."""
    for source, target in sorted(links.possible):
        if source >= source_words or target >= target_words:
            raise ValueError(
                f"{where}: link {source}-{target} lies outside the pair ({source_words} "
                f"source words, {target_words} target words): is the file 1-based?"
            )
