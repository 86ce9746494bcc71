"""The child processes of `make bench-peer`: a peer's training stopped by SIGINT some minutes
after its training loop started, a time-to-quality training that ends itself at its budget,
and a decoding process that writes its results as JSON."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.bench.peer.peer_options import PeerOptions
from tools.bench.peer.shared_settings import START_TIMEOUT_S, say, thread_env


def interrupted_run(
    command: list[str], console: Path, started: tuple[Path, str], options: PeerOptions, label: str
) -> int:
    """Run a peer's training `minutes` from the moment its log `started[0]` holds the line
    `started[1]` (its training loop began), then SIGINT it (it saves its weights and
    returns); its exit code. Killed if it outlives that by 10 minutes."""
    with console.open("w", encoding="utf-8") as stream:
        process = subprocess.Popen(
            command, stdout=stream, stderr=subprocess.STDOUT, env=thread_env(options.threads)
        )
        try:
            _wait_for_line(process, *started, label)
            _run_for(process, options.minutes * 60, label)
            process.send_signal(signal.SIGINT)  # the peer saves its weights and returns
            process.wait(timeout=600)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    return process.returncode


def _wait_for_line(process: subprocess.Popen, log_path: Path, marker: str, label: str) -> None:
    """Wait until `marker` is in the log (the training loop started)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{label} stopped before training (exit {process.returncode})")
        if log_path.is_file() and marker in log_path.read_text(encoding="utf-8"):
            return
        time.sleep(0.2)
    raise SystemExit(f"{label} did not start training within {START_TIMEOUT_S} s")


def _run_for(process: subprocess.Popen, seconds: float, label: str) -> None:
    """Let the process run `seconds`; SystemExit when it ends on its own before."""
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return
    raise SystemExit(f"{label}'s training ended early (exit {process.returncode})")


def clock_arguments(options: PeerOptions, saves: Path) -> list[str]:
    """A driver's arguments of a time-to-quality training (`quality_clock.SaveClock`): save
    every `quality_every` training minutes, end after `quality_minutes`, record in `saves`
    (emptied first: a save belongs to this run)."""
    saves.unlink(missing_ok=True)
    every_s, budget_s = 60 * options.quality_every, 60 * options.quality_minutes
    return ["--save-every", repr(every_s), "--budget", repr(budget_s), "--saves", str(saves)]


def run_to_end(command: list[str], console: Path, options: PeerOptions, label: str) -> None:
    """A training that ends itself (time to quality), its output in `console`; SystemExit
    when it fails or outlives its start-up, twice its budget and 10 minutes."""
    limit = START_TIMEOUT_S + 2 * 60 * options.quality_minutes + 600
    console.parent.mkdir(parents=True, exist_ok=True)
    with console.open("w", encoding="utf-8") as stream:
        try:
            done = subprocess.run(
                command, stdout=stream, stderr=subprocess.STDOUT, timeout=limit,
                env=thread_env(options.threads), cwd=options.root,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            message = f"{label}: training still running after {limit:.0f} s; see {console}"
            raise SystemExit(message) from None
    if done.returncode != 0:
        raise SystemExit(f"{label}: training failed (exit {done.returncode}); see {console}")


def run_decoding(command: list[str], out: Path, options: PeerOptions, what: str) -> Any:
    """One decoding process; its JSON results."""
    say(f"{what} decodes")
    done = subprocess.run(
        command, capture_output=True, text=True, env=thread_env(options.threads), cwd=options.root
    )
    out.with_suffix(".log").write_text(done.stdout + done.stderr, encoding="utf-8")
    if done.returncode != 0:
        raise SystemExit(f"{what}: decoding failed:\n{done.stderr[-3000:]}")
    return json.loads(out.read_text(encoding="utf-8"))


@dataclass
class TrainedPeer:
    """A peer after its training: its figures, and the command that decodes with its weights
    into `decode_result` (JSON)."""

    training: dict[str, Any]
    decode_command: list[str]
    decode_result: Path


@dataclass
class QualityRun:
    """A time-to-quality training after its end: its saves (`quality_clock`, JSON lines),
    and the command that translates the quality sources with each into `score_result`."""

    saves: Path
    score_command: list[str]
    score_result: Path
