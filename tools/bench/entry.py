"""The dated entry every benchmark adds to the benchmark log, tools/bench/LOG.md.

An entry is a list of Markdown lines; `append_entry` puts it where the newest entry goes:
directly below the file's `# History` heading (the log lists its entries newest
first), or at the end of a file without that heading (a new file starts with `HEADER`).
Paths and the command line are shown relative to the current folder, or by their last three
parts, so that no machine's folder layout is committed. The file is written whole or not at
all (`seq2seq.output_folders.write_output_file`); a benchmark checks it before measuring
(`check_output_file`) and, should the write still fail, says so in one line with the entry
already printed (`save_entry`), so that no measurement is lost.
"""

from __future__ import annotations

import os
import platform
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from seq2seq.output_folders import OutputPlaceError, write_output_file

HEADER = """# Benchmarks

Entries appended by the benchmark scripts (`make bench`, `make bench-peer`, `make
bench-data`), newest last. Tokens are subword pieces (target: pieces + EOS; source: pieces +
EOS). FLOPs are the analytic matrix-product counts of `seq2seq/flops.py` (a multiply-add = 2
FLOPs; training = 3 × forward); MFU is the achieved FLOP/s over the best matmul GFLOP/s
measured in the same entry.
"""

HISTORY_LINE = "\n# History\n"  # new entries go directly below this heading, newest first


def shown_path(path: str | Path) -> str:
    """A path as the log shows it: relative to the current folder when below it, else
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


def save_entry(path: Path, lines: list[str], program: str) -> int:
    """Print the entry, then add it to `path` (`append_entry`); 0, or 2 after one line
    naming the file when it cannot be written (the entry stays on the screen)."""
    print("\n".join(lines))
    try:
        append_entry(path, lines)
    except OutputPlaceError as error:
        print(f"{program}: {error}; the entry is printed above", file=sys.stderr)
        return 2
    return 0


def append_entry(path: Path, lines: list[str]) -> None:
    """Add `lines` to `path` as its newest entry: directly below the `# History` heading,
    before the entries already there, or else at the end after a blank line (a file that
    does not exist yet starts with HEADER). OutputPlaceError (one line) when the file
    cannot be read or written; it is then as it was."""
    try:
        text = path.read_text(encoding="utf-8") if path.is_file() else HEADER
    except (OSError, UnicodeDecodeError) as error:
        raise OutputPlaceError(f"--out {path}: cannot be read ({error})") from error
    entry = "\n".join(lines).strip("\n") + "\n"
    before, heading, after = text.partition(HISTORY_LINE)
    if not heading:
        text = text.rstrip("\n") + "\n\n" + entry
    else:  # the heading, a blank line, the new entry, a blank line, the entries already there
        older = after.lstrip("\n")
        text = before + heading + "\n" + entry + ("\n" + older if older else "")
    write_output_file(path, text, "--out")
