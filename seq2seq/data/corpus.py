"""Read sentence pairs from a tab-separated corpus file (plain, or a member of a zip).

Each line is decoded on its own, so one bad line costs one pair, not the file. A line with
undecodable bytes, the wrong number of columns or an empty side is skipped and counted;
when too many are skipped the file is probably not the corpus we expect and we stop.
Kept sentences are normalised (Unicode NFKC, whitespace collapsed and stripped) and the
Chinese side may be converted from traditional to simplified characters with OpenCC.
"""

from __future__ import annotations

import io
import logging
import unicodedata
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

Pair = tuple[str, str]
SHOWN_LINE_NUMBERS = 5


class CorpusError(ValueError):
    """The corpus file cannot be used (for example it is mostly malformed)."""


@dataclass
class CorpusStats:
    """What reading a corpus file found; line numbers are 1-based."""

    source: str  # file name, with `!member` for a zip member
    lines_read: int = 0
    malformed_lines: list[int] = field(default_factory=list)
    converted_to_simplified: int = 0  # Chinese sentences changed by OpenCC t2s

    @property
    def malformed(self) -> int:
        return len(self.malformed_lines)

    @property
    def malformed_share(self) -> float:
        return self.malformed / self.lines_read if self.lines_read else 0.0


def normalise(text: str) -> str:
    """Unicode NFKC, every run of whitespace turned into one space, ends stripped."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def read_pairs(
    path: Path | str,
    *,
    member: str | None = None,
    src_column: int,
    tgt_column: int,
    num_columns: int,
    convert_src: Callable[[str], str] | None = None,
    convert_tgt: Callable[[str], str] | None = None,
    max_malformed_share: float = 0.5,
) -> tuple[list[Pair], CorpusStats]:
    """Read normalised `(src, tgt)` pairs from column `src_column` / `tgt_column` of each line.

    `convert_src` / `convert_tgt` run after normalisation on one side (for example
    `traditional_to_simplified()`). Raises CorpusError when the share of malformed lines
    exceeds `max_malformed_share` or when no pair is left.
    """
    path = Path(path)
    stats = CorpusStats(source=f"{path}!{member}" if member else str(path))
    pairs = []
    for line_number, raw_line in enumerate(_raw_lines(path, member), start=1):
        stats.lines_read += 1
        pair = _parse_line(raw_line, src_column, tgt_column, num_columns)
        if pair is None:
            stats.malformed_lines.append(line_number)
            continue
        pairs.append(pair)
    pairs, stats.converted_to_simplified = _convert(pairs, convert_src, convert_tgt)
    _check_malformed(stats, max_malformed_share, kept=len(pairs))
    return pairs, stats


def traditional_to_simplified() -> Callable[[str], str]:
    """OpenCC's traditional -> simplified Chinese converter (`t2s`)."""
    import opencc  # imported here: only the Chinese configs need it

    return opencc.OpenCC("t2s").convert


def _raw_lines(path: Path, member: str | None) -> Iterator[bytes]:
    """The lines of the file (or zip member) as bytes, without their line ending."""
    if not path.is_file():
        raise CorpusError(f"corpus file {path} does not exist")
    if zipfile.is_zipfile(path):
        data = _read_member(path, member)
    else:
        data = path.read_bytes()
    for line in io.BytesIO(data):
        yield line.rstrip(b"\r\n")


def _read_member(path: Path, member: str | None) -> bytes:
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        if member is None and len(names) == 1:
            member = names[0]
        if member not in names:
            raise CorpusError(
                f"{path} holds no member {member!r} (it holds {', '.join(names[:10])})"
            )
        return archive.read(member)


def _parse_line(raw_line: bytes, src_column: int, tgt_column: int, num_columns: int) -> Pair | None:
    """The normalised pair of one line, or None when the line is malformed."""
    try:
        line = raw_line.decode("utf-8")
    except UnicodeDecodeError:
        return None
    columns = line.split("\t")
    if len(columns) != num_columns:
        return None
    src, tgt = normalise(columns[src_column]), normalise(columns[tgt_column])
    if not src or not tgt:
        return None
    return src, tgt


def _convert(
    pairs: list[Pair],
    convert_src: Callable[[str], str] | None,
    convert_tgt: Callable[[str], str] | None,
) -> tuple[list[Pair], int]:
    """Apply the per-side converters; return the pairs and how many sentences changed."""
    if convert_src is None and convert_tgt is None:
        return pairs, 0
    converted, changed = [], 0
    for src, tgt in pairs:
        new_src = convert_src(src) if convert_src else src
        new_tgt = convert_tgt(tgt) if convert_tgt else tgt
        changed += (new_src != src) + (new_tgt != tgt)
        converted.append((new_src, new_tgt))
    return converted, changed


def _check_malformed(stats: CorpusStats, max_share: float, kept: int) -> None:
    if stats.malformed:
        shown = ", ".join(map(str, stats.malformed_lines[:SHOWN_LINE_NUMBERS]))
        more = ", ..." if stats.malformed > SHOWN_LINE_NUMBERS else ""
        log.warning(
            "%s: skipped %d malformed line(s) of %d (wrong number of columns, empty side or "
            "not UTF-8), at line(s) %s%s",
            stats.source,
            stats.malformed,
            stats.lines_read,
            shown,
            more,
        )
    if stats.malformed_share > max_share:
        raise CorpusError(
            f"{stats.source}: {stats.malformed} of {stats.lines_read} lines are malformed "
            f"(more than data.max_malformed_share={max_share}); this looks like the wrong file"
        )
    if kept == 0:
        raise CorpusError(f"{stats.source}: no sentence pair found; this looks like the wrong file")
