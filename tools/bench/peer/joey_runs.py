"""JoeyNMT's training and decoding processes for one shape, on the exported data.

Its training is sent SIGINT `minutes` after its `EPOCH 1` line (data loading and model
building excluded) and saves its weights; its throughput comes from its train.log. A
time-to-quality run saves by the driver's clock and ends itself (`run_joey_quality`).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from seq2seq.config.build import plain
from tools.bench.peer import driver
from tools.bench.peer.joey_config import joey_config
from tools.bench.peer.ours import our_config
from tools.bench.peer.peer_options import PeerOptions
from tools.bench.peer.shared_settings import say
from tools.bench.peer.throughput_logs import (
    joey_intervals,
    joey_parameters,
    joey_updates,
    median_after_warmup,
)
from tools.bench.peer.timed_process import (
    QualityRun,
    TrainedPeer,
    clock_arguments,
    interrupted_run,
    run_to_end,
)

JOEY_START_LINE = "EPOCH 1"


def write_joey_config(
    shape: str, options: PeerOptions, data_dir: Path, folder: Path, quality: bool = False
) -> Path:
    """The JoeyNMT config of `shape` (from our resolved preset) in its run folder `folder`
    (`quality`: of a time-to-quality run)."""
    folder.mkdir(parents=True, exist_ok=True)
    ours = plain(our_config(shape))
    config = joey_config(ours, data_dir, folder / "model", options.log_every, quality)
    config_path = folder / "config.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return config_path


def run_joey_training(shape: str, options: PeerOptions, data_dir: Path) -> TrainedPeer:
    """JoeyNMT's training of `shape` for `minutes` from its first epoch, then SIGINT;
    its throughput, updates, parameters, and the command that decodes with its weights."""
    config_path = write_joey_config(shape, options, data_dir, options.work_dir / shape / "joeynmt")
    folder = config_path.parent
    log_path = folder / "model" / "train.log"
    python = str(options.peer_python("joeynmt"))
    say(f"{shape}: JoeyNMT trains for {options.minutes:g} min")
    command = [python, driver.__file__, "train", str(config_path)]
    command += ["--threads", str(options.threads)]
    started = (log_path, JOEY_START_LINE)
    returncode = interrupted_run(command, folder / "console.log", started, options, "JoeyNMT")
    text = log_path.read_text(encoding="utf-8")
    if returncode != 0:
        raise SystemExit(f"JoeyNMT's training of {shape} failed; see {folder / 'console.log'}")
    intervals = joey_intervals(text)
    result = {
        "updates": joey_updates(text, intervals),
        "parameters": joey_parameters(text),
        **median_after_warmup(intervals, options.warmup_updates),
    }
    out = folder / "decoding.json"
    decode = [python, driver.__file__, "decode", str(config_path),
              "--checkpoint", str(folder / "model" / "latest.ckpt"),
              "--threads", str(options.threads), "--reps", str(options.decode_reps),
              "--result", str(out)]  # fmt: skip
    return TrainedPeer(result, decode, out)


def run_joey_quality(shape: str, options: PeerOptions, data_dir: Path, folder: Path) -> QualityRun:
    """JoeyNMT's time-to-quality training of `shape` in `folder`: saving by the driver's
    clock until its budget; the command that decodes the quality sources with every save."""
    config_path = write_joey_config(shape, options, data_dir, folder, quality=True)
    python = str(options.peer_python("joeynmt"))
    saves = folder / "saves.jsonl"
    say(f"{shape}: JoeyNMT trains for {options.quality_minutes:g} min (time to quality)")
    command = [python, driver.__file__, "train", str(config_path)]
    command += ["--threads", str(options.threads), *clock_arguments(options, saves)]
    run_to_end(command, folder / "console.log", options, f"JoeyNMT ({shape})")
    out = folder / "quality.json"
    score = [python, driver.__file__, "quality", str(config_path), "--saves", str(saves),
             "--threads", str(options.threads), "--result", str(out)]  # fmt: skip
    return QualityRun(saves, score, out)
