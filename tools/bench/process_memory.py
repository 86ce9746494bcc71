"""A command run to its end (or stopped at a log line) with the peak memory of its process tree.

Memory is sampled every `SAMPLE_S` seconds over the process and all its children (e.g. the
encoding workers of a preparation): the sum of their resident set sizes (RSS; pages shared
between a parent and its forked workers are counted in each, so an upper bound) and of their
proportional set sizes (PSS; a shared page is divided among its sharers). Linux only: it
reads /proc/<pid>/task/<tid>/children and /proc/<pid>/smaps_rollup.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

SAMPLE_S = 0.1
TIMEOUT_S = 3600  # per process: a stuck one is killed


@dataclass
class Measured:
    """One process: its wall time, peak memory (bytes) and output lines with their
    arrival times (seconds after the launch)."""

    seconds: float = 0.0
    peak_rss: int = 0
    peak_pss: int = 0
    lines: list[tuple[float, str]] = field(default_factory=list)
    returncode: int | None = None


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (from /proc/<pid>/task/<tid>/children)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                queue += [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue
    return found


def tree_memory(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in bytes, summed over `pid` and its descendants (smaps_rollup)."""
    rss = pss = 0
    for process in descendants(pid):
        try:
            text = Path(f"/proc/{process}/smaps_rollup").read_text()
        except OSError:  # it ended meanwhile
            continue
        for line in text.splitlines():
            name, _, value = line.partition(":")
            if name in ("Rss", "Pss"):
                kilobytes = int(value.split()[0]) * 1024
                rss += kilobytes if name == "Rss" else 0
                pss += kilobytes if name == "Pss" else 0
    return rss, pss


def run_measured(
    command: list[str], log_path: Path, stop_when: re.Pattern | None = None, cwd: Path | None = None
) -> Measured:
    """Run `command` in `cwd` to its end (or SIGTERM it once a line matches `stop_when`),
    sampling its tree's memory; stdout and stderr go to `log_path`, and each line is kept
    with its arrival time."""
    measured = Measured()
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},  # each line when written: its time
    )
    reader = threading.Thread(
        target=_read_output, args=(process, measured, started, log_path, stop_when), daemon=True
    )
    reader.start()
    _sample_until_done(process, measured, started)
    measured.seconds = time.perf_counter() - started
    reader.join()
    measured.returncode = process.returncode
    return measured


def _read_output(
    process: subprocess.Popen,
    measured: Measured,
    started: float,
    log_path: Path,
    stop_when: re.Pattern | None,
) -> None:
    """Copy the process's lines to `log_path`, timing each; SIGTERM at `stop_when`."""
    with open(log_path, "w", encoding="utf-8") as log:
        for line in process.stdout:
            measured.lines.append((time.perf_counter() - started, line.rstrip("\n")))
            log.write(line)
            if stop_when is not None and stop_when.search(line):
                process.send_signal(signal.SIGTERM)


def _sample_until_done(process: subprocess.Popen, measured: Measured, started: float) -> None:
    """Keep the peak RSS and PSS of the process tree until it ends (killed after TIMEOUT_S)."""
    while process.poll() is None:
        rss, pss = tree_memory(process.pid)
        measured.peak_rss = max(measured.peak_rss, rss)
        measured.peak_pss = max(measured.peak_pss, pss)
        time.sleep(SAMPLE_S)
        if time.perf_counter() - started > TIMEOUT_S:
            process.kill()
