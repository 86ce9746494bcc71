"""Reading a run's `metrics.jsonl` back: one figure, step by step.

Training appends one JSON object per logged step (`seq2seq.training.progress.MetricsFile`):
`{"step": 100, "train/loss": 2.31, "train/tokens_per_sec": 9400.0, ...}`. A run that was
stopped and resumed logs some steps twice; the later line is the one the resumed run
went on from, so it wins. A line that is not a JSON object with an integer `step` and a
number under the tag (a killed run's half-written last line, a null loss, bytes that are
not text) is skipped and named, with its number, in `Series.skipped`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from seq2seq.training.progress import MetricsFile

SHOWN_SKIPS = 5  # skipped lines named in `skipped_summary`; the others are counted
LINE_LIMIT = 64 * 1024  # bytes: a logged step is a few hundred


@dataclass
class Series:
    """One tag of a metrics file: step → value, and the lines that could not be read."""

    path: Path
    values: dict[int, float] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # "line 11 (not valid JSON: ...)"

    def skipped_summary(self) -> str:
        """`skipped 2 unreadable lines: line 4 (...), line 9 (...)`, the first few named."""
        count = len(self.skipped)
        named = ", ".join(self.skipped[:SHOWN_SKIPS])
        more = f" and {count - SHOWN_SKIPS} more" if count > SHOWN_SKIPS else ""
        return f"skipped {count} unreadable line{'s' if count > 1 else ''}: {named}{more}"


def read_series(run_dir: Path, tag: str) -> Series:
    """Step → `tag` from `run_dir/metrics.jsonl` (the later of a repeated step), with the
    lines skipped. OSError when the file cannot be read."""
    path = Path(run_dir) / MetricsFile.NAME
    series = Series(path)
    with path.open("rb") as stream:
        for number, line in enumerate(bounded_lines(stream), 1):
            if not line.strip():
                continue
            try:
                step, value = parse_line(line, tag)
            except ValueError as error:
                series.skipped.append(f"line {number} ({error})")
                continue
            series.values[step] = value
    return series


def bounded_lines(stream: BinaryIO) -> Iterator[bytes]:
    """The lines of a binary stream, each read at most `LINE_LIMIT + 1` bytes at a time: a
    longer line (no line is near it) is yielded cut, and fails to parse, instead of being
    held whole in memory; the rest of it is skipped."""
    while line := stream.readline(LINE_LIMIT + 1):
        if len(line) > LINE_LIMIT and not line.endswith(b"\n"):
            while (rest := stream.readline(LINE_LIMIT)) and not rest.endswith(b"\n"):
                pass
        yield line


def parse_line(line: bytes, tag: str) -> tuple[int, float]:
    """(step, value of `tag`) of one line; ValueError saying what is wrong with it."""
    try:
        row = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"not valid JSON: {error.msg}") from None
    except RecursionError:
        raise ValueError("not valid JSON: nested too deep") from None
    if not isinstance(row, dict):
        raise ValueError(f"not a JSON object: {type(row).__name__}")
    step, value = row.get("step"), row.get(tag)
    if isinstance(step, bool) or not isinstance(step, int):
        raise ValueError(f"step must be an integer, got {step!r}")
    if tag not in row:
        raise ValueError(f"no {tag}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{tag} must be a number, got {value!r}")
    return step, float(value)
