"""Synthetic corpora of any size from a real one, for measuring preparation at scale.

Pair i of the synthetic corpus is line i mod L of the source corpus (its L well-formed
lines, in order) with ` <copy>` appended to both its sentence columns, copy = i // L:

    Hi.<TAB>嗨。<TAB>CC-BY ...     ->    Hi. 0<TAB>嗨。 0<TAB>CC-BY ...   (copy 0)
                                         Hi. 1<TAB>嗨。 1<TAB>CC-BY ...   (copy 1) ...

So no pair of one copy equals, or shares a sentence with, a pair of another copy: nothing
deduplicates across copies and every copy has the source's groups, near-twins and lengths.
The output is written as a stream (the source lines, a few MB, are held; the output is
not) through a temporary file renamed at the end.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from seq2seq.data.corpus import read_pairs
from seq2seq.files import replace, temporary_beside

BUFFER_BYTES = 1 << 20


def source_lines(
    path: Path, member: str | None, src_column: int, tgt_column: int, num_columns: int
) -> list[list[str]]:
    """The columns of each well-formed line of the source corpus (as `read_pairs` reads
    it; malformed lines are left out), with the two sentence columns normalised."""
    columns = {"src_column": src_column, "tgt_column": tgt_column, "num_columns": num_columns}
    pairs, _ = read_pairs(path, member=member, **columns)
    lines = []
    for src, tgt in pairs:
        line = [""] * num_columns
        line[src_column], line[tgt_column] = src, tgt
        lines.append(line)
    return lines


def synthetic_lines(
    lines: list[list[str]], count: int, src_column: int, tgt_column: int
) -> Iterator[str]:
    """`count` lines of the synthetic corpus (module docstring), without line endings."""
    if not lines:
        raise ValueError("the source corpus has no well-formed line")
    for index in range(count):
        copy, line = divmod(index, len(lines))
        columns = list(lines[line])
        for column in (src_column, tgt_column):
            columns[column] = f"{columns[column]} {copy}"
        yield "\t".join(columns)


def write_synthetic(
    output: Path, lines: list[list[str]], count: int, src_column: int, tgt_column: int
) -> None:
    """Write `count` synthetic pairs to `output` (a plain tab-separated file)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    with temporary_beside(output) as temporary:
        with open(temporary, "w", encoding="utf-8", newline="\n", buffering=BUFFER_BYTES) as out:
            for text in synthetic_lines(lines, count, src_column, tgt_column):
                out.write(text + "\n")
        replace(temporary, output)
