"""Preemption and exact resume, at process level.

A training process (`python -m seq2seq.cli.train` on the tiny toy task) is stopped by a signal
at some step: kill -9 (nothing saved; the last validation checkpoint remains), SIGTERM or
SIGUSR1 (a scheduler's preemption: `last.pt` is saved at the next step boundary, exit code
143) or SIGINT (Ctrl-C: saved at the next step boundary, then KeyboardInterrupt). The same
command plus `trainer.resume=<run folder>` continues the run, and from the resume point on
the losses logged in `metrics.jsonl` must equal an uninterrupted run's, step by step and
exactly (one thread, the same kernels, the same data order, optimiser and random state).
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import TINY_TOY, compose_config

from seq2seq.checkpoint import CheckpointError, load_checkpoint, load_resumable, save_checkpoint
from seq2seq.runs.assemble import train_and_test

PREEMPTED_EXIT = 143  # documented in seq2seq/train.py and the README
MAX_STEPS = 30
VALID_EVERY = 10
COMMON = TINY_TOY + [
    f"trainer.max_steps={MAX_STEPS}",
    f"trainer.valid_every={VALID_EVERY}",
    "trainer.valid_max_sentences=8",
    "trainer.test_search.beam_size=1",
]


def _overrides(run_dir: Path, data_root: Path, extra: list[str]) -> list[str]:
    return COMMON + [f"data.root={data_root}", f"hydra.run.dir={run_dir}", *extra]


def _command(run_dir: Path, data_root: Path, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "seq2seq.cli.train", *_overrides(run_dir, data_root, extra)]


def _environment() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def logged_losses(run_dir: Path) -> dict[int, float]:
    """Step -> loss from `metrics.jsonl`; a step logged twice (before a kill and again after
    the resume) keeps its later value."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return {}
    losses: dict[int, float] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            losses[row["step"]] = row["train/loss"]
    return losses


def _last_logged_step(run_dir: Path) -> int:
    try:
        lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
        return max((json.loads(line)["step"] for line in lines if line.endswith("}")), default=0)
    except (FileNotFoundError, ValueError):
        return 0


def interrupt(command: list[str], run_dir: Path, sig: int, at_step: int) -> tuple[int, int, str]:
    """Start `command`, send `sig` once `metrics.jsonl` shows `at_step` (and, for kill -9, a
    checkpoint exists); returns (exit code, last step logged before the signal, the output)."""
    log_path = run_dir.parent / f"{run_dir.name}.{sig}.{at_step}.log"
    with open(log_path, "w") as output:
        process = subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, env=_environment()
        )
        deadline = time.monotonic() + 120
        try:
            while time.monotonic() < deadline and process.poll() is None:
                ready = _last_logged_step(run_dir) >= at_step
                if sig == signal.SIGKILL:
                    ready = ready and (run_dir / "checkpoints" / "last.pt").is_file()
                if ready:
                    break
                time.sleep(0.005)
            assert process.poll() is None, "the run ended before it could be interrupted"
            signalled_at = _last_logged_step(run_dir)
            process.send_signal(sig)
            code = process.wait(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    return code, signalled_at, log_path.read_text(encoding="utf-8")


def resume(command: list[str], run_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        command + [f"trainer.resume={run_dir}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_environment(),
        timeout=300,
    )


def _reference(tmp_path: Path, data_root: Path, extra: list[str]) -> dict[int, float]:
    """An uninterrupted run, in this process (the same code and kernels, one thread)."""
    run_dir = tmp_path / "reference"
    cfg = compose_config(_overrides(run_dir, data_root, extra))
    train_and_test(cfg, run_dir, outputs_root=tmp_path)
    losses = logged_losses(run_dir)
    assert sorted(losses) == list(range(1, MAX_STEPS + 1))
    return losses


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def reference(tmp_path_factory, data_root) -> dict[int, float]:
    return _reference(tmp_path_factory.mktemp("ref"), data_root, [])


@pytest.fixture(scope="module")
def reference_accumulate(tmp_path_factory, data_root) -> dict[int, float]:
    return _reference(tmp_path_factory.mktemp("ref_acc"), data_root, ["trainer.accumulate=2"])


def _saved_step(run_dir: Path) -> int:
    return load_checkpoint(run_dir / "checkpoints" / "last.pt")["progress"]["step"]


@pytest.mark.attack("resume")
def test_every_stop_signal_then_resume_gives_the_uninterrupted_losses(
    tmp_path, data_root, reference_accumulate
):
    """One run (`trainer.accumulate=2`) stopped four times: SIGTERM and SIGUSR1 (each saves
    at the next step boundary and exits with 143), Ctrl-C (saves the same way, then
    KeyboardInterrupt), kill -9 (nothing saved: the last validation checkpoint stays).
    Each stop is followed by a resume, and the losses equal the uninterrupted run's: the
    saved position points at the first batch of the update that was not applied."""
    run_dir = tmp_path / "run"
    command = _command(run_dir, data_root, ["trainer.accumulate=2"])
    resumed = command + [f"trainer.resume={run_dir}"]
    stops = ((signal.SIGTERM, 4), (signal.SIGUSR1, 9), (signal.SIGINT, 14))
    for sig, at_step in stops:
        code, signalled_at, output = interrupt(
            command if sig == signal.SIGTERM else resumed, run_dir, sig, at_step
        )
        expected = (-signal.SIGINT, 130) if sig == signal.SIGINT else (PREEMPTED_EXIT,)
        assert code in expected, output[-3000:]
        saved = _saved_step(run_dir)
        # Saved at the first boundary after the signal: no step lost, none half-done.
        assert signalled_at <= saved <= signalled_at + 2
        assert saved == _last_logged_step(run_dir)
        assert f"step {saved}" in output and "trainer.resume=" in output
        if sig != signal.SIGINT:
            assert "Traceback" not in output
    code, killed_at, _ = interrupt(resumed, run_dir, signal.SIGKILL, 2 * VALID_EVERY + 2)
    assert code == -signal.SIGKILL and killed_at < MAX_STEPS
    assert _saved_step(run_dir) == 2 * VALID_EVERY < _last_logged_step(run_dir)
    # The killed process's lock on the run folder does not block the resume.
    finished = resume(command, run_dir)
    assert finished.returncode == 0, finished.stdout[-3000:]
    assert logged_losses(run_dir) == reference_accumulate


def _tiny_payload(step: int) -> dict:
    return {
        "format": 1,
        "model": {"w": torch.full((3,), float(step))},
        "config": {},
        "tokenizers": {},
        "progress": {"step": step},
    }


@pytest.mark.attack("resume")
def test_a_corrupt_last_checkpoint_falls_back_to_the_previous_one(tmp_path, caplog):
    path = tmp_path / "checkpoints" / "last.pt"
    save_checkpoint(path, _tiny_payload(10), keep_previous=True)
    save_checkpoint(path, _tiny_payload(20), keep_previous=True)
    assert load_checkpoint(path)["progress"]["step"] == 20
    path.write_bytes(path.read_bytes()[:100])  # torn by a crash or a full disk
    with caplog.at_level(logging.WARNING):
        payload, used = load_resumable(path)
    assert payload["progress"]["step"] == 10 and used.name == "last.prev.pt"
    assert "last.pt" in caplog.text and "last.prev.pt" in caplog.text
    used.write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="last.pt"):
        load_resumable(path)


@pytest.mark.attack("resume")
def test_resume_last_with_a_corrupt_newest_checkpoint_continues_from_the_previous(tmp_path, caplog):
    overrides = TINY_TOY + [f"data.root={tmp_path / 'data'}", "trainer.valid_every=2",
                            "trainer.test_search.beam_size=1", "logging.tensorboard=false"]  # fmt: skip
    run_dir = tmp_path / "outputs" / "first"
    train_and_test(
        compose_config(overrides + ["trainer.max_steps=4"]), run_dir, tmp_path / "outputs"
    )
    last = run_dir / "checkpoints" / "last.pt"
    last.write_bytes(last.read_bytes()[:1000])
    cfg = compose_config(overrides + ["trainer.max_steps=6", "trainer.resume=last"])
    with caplog.at_level(logging.WARNING):
        results = train_and_test(cfg, tmp_path / "outputs" / "second", tmp_path / "outputs")
    assert "last.prev.pt" in caplog.text
    assert results["steps"] == 6 and _saved_step(run_dir) == 6


@pytest.mark.faults
@pytest.mark.attack("resume")
def test_random_kill_and_resume_trials(tmp_path, data_root, reference, fault_figures):
    """20 trials: a random signal among KILL, TERM, INT and USR1 at a random step, then a
    resume; every trial must end with the uninterrupted run's losses."""
    chooser = random.Random(20261201)  # reproducible trials; the seed is in the failure text
    signals = [signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGUSR1]
    failures = []
    for trial in range(20):
        sig = chooser.choice(signals)
        first = VALID_EVERY + 1 if sig == signal.SIGKILL else 1
        at_step = chooser.randint(first, MAX_STEPS - 8)
        run_dir = tmp_path / f"trial{trial}"
        command = _command(run_dir, data_root, [])
        code, stopped_at, _ = interrupt(command, run_dir, sig, at_step)
        finished = resume(command, run_dir)
        identical = finished.returncode == 0 and logged_losses(run_dir) == reference
        fault_figures.add("kill_resume_trials", 1)
        fault_figures.add("kill_resume_identical", 1 if identical else 0)
        if not identical:
            failures.append(
                (trial, signal.Signals(sig).name, stopped_at, code, finished.stdout[-500:])
            )
    assert not failures, failures


@pytest.mark.faults
@pytest.mark.attack("resume")
def test_sigterm_to_torchrun_then_resume_gives_the_uninterrupted_losses(tmp_path, data_root):
    """Two gloo ranks: torchrun forwards SIGTERM to both, they stop at the same step
    boundary, rank 0 saves every rank's random state, and the resumed run (same number of
    ranks) logs the uninterrupted run's losses."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]

    def command(run_dir: Path) -> list[str]:
        return [*launcher, "-m", "seq2seq.cli.train", *_overrides(run_dir, data_root, [])]

    straight = subprocess.run(
        command(tmp_path / "straight"), capture_output=True, env=_environment()
    )
    assert straight.returncode == 0, straight.stderr[-3000:]
    run_dir = tmp_path / "run"
    _, signalled_at, output = interrupt(command(run_dir), run_dir, signal.SIGTERM, 5)
    assert signalled_at <= _saved_step(run_dir) == _last_logged_step(run_dir), output[-3000:]
    assert len(load_checkpoint(run_dir / "checkpoints" / "last.pt")["rank_rng"]) == 2
    finished = resume(command(run_dir), run_dir)
    assert finished.returncode == 0, finished.stdout[-3000:]
    assert logged_losses(run_dir) == logged_losses(tmp_path / "straight")
