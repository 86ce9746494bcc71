"""Read sentence pairs from a tab-separated corpus file (plain, or a member of a zip).

The file is read as a stream, line by line, and each line is decoded on its own, so one
bad line costs one pair, not the file. A UTF-8 byte-order mark at the start of the file is
dropped. A line with undecodable bytes, the wrong number of columns or an empty side is
malformed, and so is a line longer than `max_line_bytes` (`data.source.max_line_bytes`),
which is read by chunks and dropped as it streams by, never held whole; a line holding a control
character (a C0 control other than tab, DEL, or a C1 control: U+0000-U+0008,
U+000A-U+001F, U+007F-U+009F, which includes NUL, a carriage return inside the line and
NEL) is skipped too, as its text cannot be trusted; both are counted, separately, with
their line numbers (the over-long ones also on their own). When more than
`max_malformed_share` of the lines are skipped, for either reason, the file is probably
not the corpus we expect and we stop.
Kept sentences are normalised (Unicode NFKC, whitespace collapsed and stripped) and the
Chinese side may be converted from traditional to simplified characters with OpenCC.
A zip member larger (uncompressed) than `max_member_bytes` is refused before it is read.
"""

from __future__ import annotations

import io
import logging
import re
import unicodedata
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seq2seq.data.settings import DEFAULT_MAX_LINE_BYTES, DEFAULT_MAX_MEMBER_BYTES
from seq2seq.text_encoding import TextEncodingError, check_stream

log = logging.getLogger(__name__)

Pair = tuple[str, str]
SHOWN_LINE_NUMBERS = 5
UTF8_BOM = b"\xef\xbb\xbf"
BOM_CHARACTER = "\ufeff"
# C0 controls but tab, DEL and the C1 controls: a line holding one is skipped.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
CHUNK_BYTES = 1 << 16  # the rest of an over-long line is read and dropped by this much


class CorpusError(ValueError):
    """The corpus file cannot be used (for example it is mostly malformed)."""


@dataclass
class CorpusStats:
    """What reading a corpus file found; line numbers are 1-based."""

    source: str  # file name, with `!member` for a zip member
    lines_read: int = 0
    malformed_lines: list[int] = field(default_factory=list)
    long_lines: list[int] = field(default_factory=list)  # over max_line_bytes; also malformed
    control_char_lines: list[int] = field(default_factory=list)  # skipped: a control character
    converted_to_simplified: int = 0  # Chinese sentences changed by OpenCC t2s

    @property
    def malformed(self) -> int:
        return len(self.malformed_lines)

    @property
    def control_chars(self) -> int:
        return len(self.control_char_lines)

    @property
    def skipped(self) -> int:
        """Lines not kept: malformed or holding a control character."""
        return self.malformed + self.control_chars

    @property
    def malformed_share(self) -> float:
        """Share of the lines read that were skipped (malformed or with control characters)."""
        return self.skipped / self.lines_read if self.lines_read else 0.0


def normalise(text: str) -> str:
    """Unicode NFKC, U+FEFF removed, every run of whitespace one space, ends stripped.

    U+FEFF is a byte-order mark (a file that had two, or a BOM from a concatenated file)
    or the deprecated zero-width no-break space; either way it carries no text.
    """
    return " ".join(unicodedata.normalize("NFKC", text).replace(BOM_CHARACTER, "").split())


def read_pairs(
    path: Path | str, *, member: str | None = None, **options: Any
) -> tuple[list[Pair], CorpusStats]:
    """Read normalised `(src, tgt)` pairs from column `src_column` / `tgt_column` of each line.

    The keywords are those of `iter_pairs`: `src_column`, `tgt_column` and `num_columns`
    (required), `convert_src` / `convert_tgt` (run after normalisation on one side, for
    example `traditional_to_simplified()`), `max_malformed_share`, `max_member_bytes` and
    `max_line_bytes` (a longer line, its b"\\n" not counted, is malformed). Raises
    CorpusError when the share of skipped lines exceeds `max_malformed_share`, when no pair
    is left, or when the zip member is larger than `max_member_bytes`
    (`data.source.max_member_bytes`) uncompressed. Holds every pair in memory; `iter_pairs`
    streams them.
    """
    stats = corpus_stats(path, member)
    pairs = list(iter_pairs(path, stats, member=member, **options))
    return pairs, stats


def corpus_stats(path: Path | str, member: str | None = None) -> CorpusStats:
    """Empty statistics for reading `path` (or its zip `member`) with `iter_pairs`."""
    return CorpusStats(source=f"{path}!{member}" if member else str(path))


def iter_pairs(
    path: Path | str,
    stats: CorpusStats,
    *,
    member: str | None = None,
    src_column: int,
    tgt_column: int,
    num_columns: int,
    convert_src: Callable[[str], str] | None = None,
    convert_tgt: Callable[[str], str] | None = None,
    max_malformed_share: float = 0.5,
    max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> Iterator[Pair]:
    """`read_pairs` as a stream: one pair at a time, `stats` (from `corpus_stats`) filled as
    the lines go by. The checks of `read_pairs` run once the last line is read, so the
    CorpusError of a mostly malformed file comes at the end of the stream."""
    path = Path(path)
    kept = 0
    lines = _raw_lines(path, member, max_member_bytes, max_line_bytes)
    for line_number, raw_line in enumerate(lines, start=1):
        stats.lines_read += 1
        if raw_line is None:  # longer than max_line_bytes: already dropped
            stats.long_lines.append(line_number)
            stats.malformed_lines.append(line_number)
            continue
        try:
            pair = _parse_line(raw_line, src_column, tgt_column, num_columns)
        except _ControlCharacterError:
            stats.control_char_lines.append(line_number)
            continue
        if pair is None:
            stats.malformed_lines.append(line_number)
            continue
        pair, changed = _convert(pair, convert_src, convert_tgt)
        stats.converted_to_simplified += changed
        kept += 1
        yield pair
    warn_skipped(stats, max_line_bytes)
    check_malformed(stats, max_malformed_share, kept=kept)


def traditional_to_simplified() -> Callable[[str], str]:
    """OpenCC's traditional -> simplified Chinese converter (`t2s`)."""
    import opencc  # imported here: only the Chinese configs need it

    return opencc.OpenCC("t2s").convert


class _ControlCharacterError(ValueError):
    """A line holds a control character (see CONTROL_CHARACTERS)."""


def _raw_lines(
    path: Path, member: str | None, max_member_bytes: int, max_line_bytes: int
) -> Iterator[bytes | None]:
    """The lines of the file (or zip member) as bytes, without their line ending or a BOM;
    None for a line longer than `max_line_bytes`.

    Streams: only one line, of at most `max_line_bytes`, is held in memory at a time.
    """
    if not path.is_file():
        raise CorpusError(f"corpus file {path} does not exist")
    if zipfile.is_zipfile(path):
        with (
            zipfile.ZipFile(path) as archive,
            _open_member(archive, path, member, max_member_bytes) as member_stream,
            io.BufferedReader(member_stream, CHUNK_BYTES) as stream,  # a fast readline(limit)
        ):
            yield from lines_of(stream, max_line_bytes, f"{path}!{member_stream.name}")
    else:
        with open(path, "rb") as stream:
            yield from lines_of(stream, max_line_bytes, str(path))


def lines_of(stream, max_line_bytes: int, name: str) -> Iterator[bytes | None]:
    """Lines of a binary stream split at b"\\n", endings stripped, a leading UTF-8 BOM dropped.

    The stream's first bytes are checked first (`seq2seq.text_encoding`): UTF-16 or UTF-32
    text is a CorpusError naming the file `name`, its encoding and how to convert it,
    before a line is read or counted.

    A line of more than `max_line_bytes` bytes before its b"\\n" comes as None: at most
    `max_line_bytes` + 1 of its bytes are read at once, the rest is read and dropped by chunks.
    """
    try:
        check_stream(stream, name)
    except TextEncodingError as error:
        raise CorpusError(str(error)) from error
    limit = max_line_bytes + 1
    line_number = 0
    while line := stream.readline(limit):
        line_number += 1
        if len(line) == limit and not line.endswith(b"\n"):
            _drop_rest_of_line(stream)
            yield None
            continue
        if line_number == 1 and line.startswith(UTF8_BOM):
            line = line[len(UTF8_BOM) :]
        yield line.rstrip(b"\r\n")


def _drop_rest_of_line(stream) -> None:
    """Read up to the next b"\\n" (or the end), CHUNK_BYTES at a time, keeping nothing."""
    while (chunk := stream.readline(CHUNK_BYTES)) and not chunk.endswith(b"\n"):
        pass


def _open_member(archive: zipfile.ZipFile, path: Path, member: str | None, max_bytes: int):
    """Open the member (the only one when `member` is None) after checking its size."""
    names = archive.namelist()
    if member is None and len(names) == 1:
        member = names[0]
    if member not in names:
        raise CorpusError(f"{path} holds no member {member!r} (it holds {', '.join(names[:10])})")
    size = archive.getinfo(member).file_size
    if size > max_bytes:
        raise CorpusError(
            f"{path}!{member} is {size:,} bytes uncompressed, more than "
            f"data.source.max_member_bytes={max_bytes:,}; refused before reading it (raise "
            "data.source.max_member_bytes if this file is really the corpus)"
        )
    return archive.open(member)


def _parse_line(raw_line: bytes, src_column: int, tgt_column: int, num_columns: int) -> Pair | None:
    """The normalised pair of one line, or None when the line is malformed.

    Raises _ControlCharacterError when the (decodable) line holds a control character.
    """
    try:
        line = raw_line.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if CONTROL_CHARACTERS.search(line):
        raise _ControlCharacterError(line)
    columns = line.split("\t")
    if len(columns) != num_columns:
        return None
    src, tgt = normalise(columns[src_column]), normalise(columns[tgt_column])
    if not src or not tgt:
        return None
    return src, tgt


def _convert(
    pair: Pair,
    convert_src: Callable[[str], str] | None,
    convert_tgt: Callable[[str], str] | None,
) -> tuple[Pair, int]:
    """Apply the per-side converters to one pair; also return how many sentences changed."""
    src, tgt = pair
    new_src = convert_src(src) if convert_src else src
    new_tgt = convert_tgt(tgt) if convert_tgt else tgt
    return (new_src, new_tgt), (new_src != src) + (new_tgt != tgt)


def warn_skipped(stats: CorpusStats, max_line_bytes: int) -> None:
    """One warning per kind of skipped line found, with the first line numbers."""
    if stats.malformed:
        log.warning(
            "%s: skipped %d malformed line(s) of %d (wrong number of columns, empty side, "
            "not UTF-8 or too long), at line(s) %s",
            stats.source,
            stats.malformed,
            stats.lines_read,
            _shown(stats.malformed_lines),
        )
    if stats.long_lines:
        log.warning(
            "%s: %d of the malformed line(s) are longer than data.source.max_line_bytes=%s "
            "bytes (dropped as they were read, never held whole), at line(s) %s",
            stats.source,
            len(stats.long_lines),
            f"{max_line_bytes:,}",
            _shown(stats.long_lines),
        )
    if stats.control_chars:
        log.warning(
            "%s: skipped %d line(s) of %d holding a control character (NUL, DEL, a C0 or C1 "
            "control other than tab), at line(s) %s",
            stats.source,
            stats.control_chars,
            stats.lines_read,
            _shown(stats.control_char_lines),
        )


CONTROL_SIDE = object()  # a side holding a control character (a row to skip, counted apart)
LONG_SIDE = object()  # a side longer than max_line_bytes (a malformed row, counted as long)
# A row that is no pair but a mark between documents (text_pair's blank lines): passed over,
# neither read as a pair nor skipped, its row number kept for the next rows.
BOUNDARY_ROW: Any = object()


def kept_pairs(
    rows: Iterator[tuple[Any, Any]],
    stats: CorpusStats,
    convert: dict[str, Callable[[str], str]],
    max_line_bytes: int,
    max_malformed_share: float,
) -> Iterator[Pair]:
    """The pairs of `rows` whose two sides are sentences, converted by `convert`
    (`convert_src`, `convert_tgt`: traditional → simplified Chinese), `stats` filled as
    the rows go by (row numbers from 1). A side is a normalised sentence, or None (not text,
    or empty), LONG_SIDE or CONTROL_SIDE: a row with a CONTROL_SIDE is skipped as holding
    a control character, one with None or LONG_SIDE as malformed; BOUNDARY_ROW is passed over.
    Once the last row is read: the warning of what was skipped, and CorpusError for too many
    (`check_malformed`)."""
    kept = 0
    for number, sides in enumerate(rows, start=1):
        if sides is BOUNDARY_ROW:
            continue
        stats.lines_read += 1
        if any(side is CONTROL_SIDE for side in sides):
            stats.control_char_lines.append(number)
            continue
        if any(side is None or side is LONG_SIDE for side in sides):
            if any(side is LONG_SIDE for side in sides):
                stats.long_lines.append(number)
            stats.malformed_lines.append(number)
            continue
        src, tgt = sides
        new_src = convert["convert_src"](src) if "convert_src" in convert else src
        new_tgt = convert["convert_tgt"](tgt) if "convert_tgt" in convert else tgt
        stats.converted_to_simplified += (new_src != src) + (new_tgt != tgt)
        kept += 1
        yield new_src, new_tgt
    warn_skipped(stats, max_line_bytes)
    check_malformed(stats, max_malformed_share, kept=kept)


def check_malformed(stats: CorpusStats, max_share: float, kept: int) -> None:
    """CorpusError when too many lines were skipped or no pair was kept."""
    if stats.malformed_share > max_share:
        raise CorpusError(
            f"{stats.source}: {stats.skipped} of {stats.lines_read} lines are malformed or hold "
            f"control characters (more than data.source.max_malformed_share={max_share}); this "
            "looks like the wrong file"
        )
    if kept == 0:
        raise CorpusError(f"{stats.source}: no sentence pair found; this looks like the wrong file")


def _shown(line_numbers: list[int]) -> str:
    """The first few line numbers, comma separated, with ", ..." when there are more."""
    shown = ", ".join(map(str, line_numbers[:SHOWN_LINE_NUMBERS]))
    return shown + (", ..." if len(line_numbers) > SHOWN_LINE_NUMBERS else "")
