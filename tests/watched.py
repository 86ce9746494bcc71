"""A command run under watch: killed when it outlives a time limit or its memory grows past
a bound, so that an attack that would hang or swell fails its test instead of stalling
the suite (the attacks on runaway walks and expanding files)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Watched:
    """How a watched command ended: its exit status (None: killed by the watch), its output,
    the largest resident memory seen (MB) and why it was killed ("" when it was not)."""

    returncode: int | None
    stdout: str
    stderr: str
    peak_mb: float
    killed: str


def resident_mb(pid: int) -> float:
    """The resident memory of process `pid` in MB (0 when it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def run_watched(
    arguments: list[str], *, timeout: float, max_mb: float, cwd: Path | None = None
) -> Watched:
    """Run `python arguments...` (a module or script of the project), polling its memory;
    killed (with its process group) past `timeout` seconds or `max_mb` MB resident."""
    environment = {**os.environ, "PYTHONPATH": str(REPO), "HYDRA_FULL_ERROR": "0"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen([sys.executable, *arguments], stdout=out, stderr=err,
                                   cwd=cwd, env=environment, start_new_session=True)  # fmt: skip
        peak, killed, started = 0.0, "", time.monotonic()
        while process.poll() is None:
            peak = max(peak, resident_mb(process.pid))
            if peak > max_mb:
                killed = f"memory over {max_mb} MB"
            elif time.monotonic() - started > timeout:
                killed = f"still running after {timeout} s"
            if killed:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                break
            time.sleep(0.05)
        out.seek(0), err.seek(0)
        return Watched(None if killed else process.returncode,
                       out.read().decode("utf-8", "replace"),
                       err.read().decode("utf-8", "replace"), peak, killed)  # fmt: skip


def within_time(function, *arguments, seconds: float = 10):
    """`function(*arguments)` in a thread, failing the test when it has not returned within
    `seconds`; what it raised is raised again here."""
    outcome: dict = {}

    def call():
        try:
            outcome["value"] = function(*arguments)
        except BaseException as error:  # noqa: BLE001 - raised again below
            outcome["error"] = error

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"{function.__name__} still running after {seconds} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
