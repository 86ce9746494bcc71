"""The dated entry every benchmark adds to BENCHMARKS.md.

An entry is a list of Markdown lines; `append_entry` puts it where the newest entry goes:
directly below the file's `# History` heading (BENCHMARKS.md lists its entries newest
first), or at the end of a file without that heading (a new file starts with `HEADER`).
Paths and the command line are shown relative to the current folder, or by their last three
parts, so that no machine's folder layout is committed.
"""

from __future__ import annotations

import os
import platform
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

HEADER = """# Benchmarks

Entries appended by the benchmark scripts (`make bench`, `make bench-peer`, `make
bench-data`), newest last. Tokens are subword pieces (target: pieces + EOS; source: pieces +
EOS). FLOPs are the analytic matrix-product counts of `seq2seq/flops.py` (a multiply-add = 2
FLOPs; training = 3 × forward); MFU is the achieved FLOP/s over the best matmul GFLOP/s
measured in the same entry.
"""

HISTORY_LINE = "\n# History\n"  # new entries go directly below this heading, newest first


def shown_path(path: str | Path) -> str:
    """A path as BENCHMARKS.md shows it: relative to the current folder when below it, else
    its last three parts, so that no machine's folder layout is committed."""
    text = str(path)
    if not text.startswith("/"):
        return text
    absolute = Path(text)
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(Path("…", *absolute.parts[-3:]))


def shown_command(argv: Sequence[str] | None = None) -> str:
    """`python <argv>` with every path shown by `shown_path` (default: this process's)."""
    return "python " + shlex.join(shown_path(arg) for arg in (sys.argv if argv is None else argv))


def cpu_model() -> str:
    """The `model name` line of /proc/cpuinfo (the processor name elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine_lines(threads: int, device: torch.device) -> list[str]:
    """CPU, cores, device, torch and Python versions, threads, the command line."""
    return [
        f"- CPU: {cpu_model()}, {os.cpu_count()} cores; device {device}",
        f"- torch {torch.__version__}, Python {platform.python_version()}, threads: {threads}",
        f"- command: `{shown_command()}`",
    ]


def append_entry(path: Path, lines: list[str]) -> None:
    """Add `lines` to `path` as its newest entry: directly below the `# History` heading,
    before the entries already there, or else at the end after a blank line (a file that
    does not exist yet starts with HEADER)."""
    text = path.read_text(encoding="utf-8") if path.is_file() else HEADER
    entry = "\n".join(lines).strip("\n") + "\n"
    before, heading, after = text.partition(HISTORY_LINE)
    if not heading:
        text = text.rstrip("\n") + "\n\n" + entry
    else:  # the heading, a blank line, the new entry, a blank line, the entries already there
        older = after.lstrip("\n")
        text = before + heading + "\n" + entry + ("\n" + older if older else "")
    path.write_text(text, encoding="utf-8")
