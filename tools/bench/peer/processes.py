"""The processes of `make bench-peer`: each framework's training and decoding, one shape at a
time, ours first and JoeyNMT directly after, on the same exported data.

Ours stops itself after `trainer.max_minutes`; JoeyNMT is sent SIGINT the same minutes after
its `EPOCH 1` line (data loading and model building excluded) and saves its weights. The
throughput of each comes from its own log (`throughput_logs`).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from seq2seq.config.build import plain
from seq2seq.metrics import corpus_scores
from tools.bench.peer import driver
from tools.bench.peer.joey_config import joey_config
from tools.bench.peer.ours import our_config, our_overrides
from tools.bench.peer.shared_settings import SHAPES, START_TIMEOUT_S, say, thread_env
from tools.bench.peer.throughput_logs import (
    joey_intervals,
    joey_parameters,
    joey_updates,
    median_after_warmup,
    our_intervals,
)

JOEY_START_LINE = "EPOCH 1"
POSITIVE = ("minutes", "threads", "sentences", "log_every", "decode_reps", "matmul_reps")


@dataclass
class PeerOptions:
    """What `make bench-peer` runs: its command line, checked by `check_options`."""

    shapes: list[str]
    minutes: float
    threads: int
    sentences: int
    log_every: int
    warmup_updates: int
    decode_reps: int
    matmul_reps: int
    peer_venv: Path
    work_dir: Path  # absolute: the processes run elsewhere
    out: Path
    root: Path  # the repository our processes run in (its data/ holds the corpus)


def check_options(options: PeerOptions) -> PeerOptions:
    """SystemExit naming the option when a count is not positive or a shape unknown."""
    for name in POSITIVE:
        if getattr(options, name) <= 0:
            raise SystemExit(f"--{name.replace('_', '-')} must be > 0")
    unknown = [shape for shape in options.shapes if shape not in SHAPES]
    if unknown:
        raise SystemExit(f"--shapes: {unknown} not among {list(SHAPES)}")
    options.warmup_updates = max(options.warmup_updates, 0)
    return options


def run_ours_training(shape: str, options: PeerOptions) -> tuple[dict[str, Any], Path]:
    """Our training of `shape` in a fresh process; its throughput, updates, checkpoint."""
    run_dir = options.work_dir / shape / "ours"
    overrides = our_overrides(options.minutes, options.threads, options.log_every)
    command = [sys.executable, "-m", "tools.bench.peer.ours", "train", shape, str(run_dir)]
    command.append(json.dumps(overrides))
    say(f"{shape}: ours trains for {options.minutes:g} min")
    done = subprocess.run(
        command, capture_output=True, text=True, env=thread_env(options.threads), cwd=options.root
    )
    (run_dir / "stderr.log").write_text(done.stderr, encoding="utf-8")
    if done.returncode != 0:
        raise SystemExit(f"our training of {shape} failed:\n{done.stderr[-3000:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    intervals = our_intervals(run_dir)
    result = {**summary, **median_after_warmup(intervals, options.warmup_updates)}
    return result, run_dir / "checkpoints" / "last.pt"


def write_joey_config(shape: str, options: PeerOptions, data_dir: Path) -> Path:
    """The JoeyNMT config of `shape` (from our resolved preset) in its run folder."""
    folder = options.work_dir / shape / "joeynmt"
    folder.mkdir(parents=True, exist_ok=True)
    config = joey_config(plain(our_config(shape)), data_dir, folder / "model", options.log_every)
    config_path = folder / "config.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return config_path


def run_joey_training(
    shape: str, options: PeerOptions, python: Path, data_dir: Path
) -> tuple[dict[str, Any], Path, Path]:
    """JoeyNMT's training of `shape` for `minutes` from its first epoch, then SIGINT;
    its throughput, updates, checkpoint and config file."""
    config_path = write_joey_config(shape, options, data_dir)
    folder = config_path.parent
    log_path = folder / "model" / "train.log"
    say(f"{shape}: JoeyNMT trains for {options.minutes:g} min")
    command = [str(python), driver.__file__, "train", str(config_path)]
    command += ["--threads", str(options.threads)]
    returncode = interrupted_run(command, folder / "console.log", log_path, options)
    text = log_path.read_text(encoding="utf-8")
    if returncode != 0:
        raise SystemExit(f"JoeyNMT's training of {shape} failed; see {folder / 'console.log'}")
    intervals = joey_intervals(text)
    result = {
        "updates": joey_updates(text, intervals),
        "parameters": joey_parameters(text),
        **median_after_warmup(intervals, options.warmup_updates),
    }
    return result, folder / "model" / "latest.ckpt", config_path


def interrupted_run(command: list[str], console: Path, log_path: Path, options: PeerOptions) -> int:
    """Run JoeyNMT's training `minutes` from its first epoch, then SIGINT it (it saves its
    weights and returns); its exit code. Killed if it outlives that by 10 minutes."""
    with console.open("w", encoding="utf-8") as stream:
        process = subprocess.Popen(
            command, stdout=stream, stderr=subprocess.STDOUT, env=thread_env(options.threads)
        )
        try:
            _wait_for_line(process, log_path, JOEY_START_LINE)
            _run_for(process, options.minutes * 60)
            process.send_signal(signal.SIGINT)  # JoeyNMT saves its weights and returns
            process.wait(timeout=600)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    return process.returncode


def _wait_for_line(process: subprocess.Popen, log_path: Path, marker: str) -> None:
    """Wait until `marker` is in the log (the training loop started)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"JoeyNMT stopped before training (exit {process.returncode})")
        if log_path.is_file() and marker in log_path.read_text(encoding="utf-8"):
            return
        time.sleep(0.2)
    raise SystemExit(f"JoeyNMT did not start training within {START_TIMEOUT_S} s")


def _run_for(process: subprocess.Popen, seconds: float) -> None:
    """Let the process run `seconds`; SystemExit when it ends on its own before."""
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return
    raise SystemExit(f"JoeyNMT's training ended early (exit {process.returncode})")


def run_decoding(command: list[str], out: Path, options: PeerOptions, what: str) -> dict:
    """One decoding process; its JSON results."""
    say(f"{what} decodes")
    done = subprocess.run(
        command, capture_output=True, text=True, env=thread_env(options.threads), cwd=options.root
    )
    out.with_suffix(".log").write_text(done.stdout + done.stderr, encoding="utf-8")
    if done.returncode != 0:
        raise SystemExit(f"{what}: decoding failed:\n{done.stderr[-3000:]}")
    return json.loads(out.read_text(encoding="utf-8"))


def add_bleu(results: dict[str, Any], references: list[str], lang: str) -> None:
    """BLEU of each search's outputs by our scorer (the same for both sides)."""
    for beam in driver.SEARCHES:
        side = results[str(beam)]
        side["bleu"] = corpus_scores(side["hypotheses"], references, lang)["bleu"]


def decode_both(
    shape: str, options: PeerOptions, python: Path, data_dir: Path, checkpoints: tuple
) -> dict[str, dict]:
    """Both trained models decode the exported test sources; BLEU added to each."""
    ours_ckpt, joey_ckpt, joey_cfg = checkpoints
    reps, threads = str(options.decode_reps), str(options.threads)
    folder = options.work_dir / shape
    test_src = data_dir / f"test.{export_language(data_dir, 'src')}"
    ours_out, joey_out = folder / "ours" / "decoding.json", folder / "joeynmt" / "decoding.json"
    ours = run_decoding(
        [sys.executable, "-m", "tools.bench.peer.ours", "decode", str(ours_ckpt),
         "--sources", str(test_src), "--threads", threads, "--reps", reps,
         "--result", str(ours_out)],
        ours_out, options, f"{shape}: ours",
    )  # fmt: skip
    joey = run_decoding(
        [str(python), driver.__file__, "decode", str(joey_cfg), "--checkpoint", str(joey_ckpt),
         "--threads", threads, "--reps", reps, "--result", str(joey_out)],
        joey_out, options, f"{shape}: JoeyNMT",
    )  # fmt: skip
    tgt = export_language(data_dir, "tgt")
    references = (data_dir / f"reference.{tgt}").read_text(encoding="utf-8").splitlines()
    for results in (ours, joey):
        add_bleu(results, references, tgt)
    return {"ours": ours, "joey": joey}


def measure_shape(
    shape: str, options: PeerOptions, python: Path, data_dir: Path
) -> tuple[dict[str, dict], dict[str, dict]]:
    """Train ours, then JoeyNMT; then decode with both. (training, decoding) rows."""
    ours_train, ours_ckpt = run_ours_training(shape, options)
    joey_train, joey_ckpt, joey_cfg = run_joey_training(shape, options, python, data_dir)
    decoding = decode_both(shape, options, python, data_dir, (ours_ckpt, joey_ckpt, joey_cfg))
    joey_train["parameters"] = joey_train.get("parameters") or decoding["joey"].get("parameters")
    return {"ours": ours_train, "joey": joey_train}, decoding


def export_language(data_dir: Path, side: str) -> str:
    """The source or target language code of the export (from languages.json)."""
    return json.loads((data_dir / "languages.json").read_text(encoding="utf-8"))[side]
