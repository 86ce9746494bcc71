"""OpenNMT-py's training and decoding processes for one shape, on the exported data.

Its training (`onmt_driver.py train`) is sent SIGINT `minutes` after its `Start training
loop` line (vocabularies and model built; its first batches, the corpus read into its
bucket, fall in the first logged intervals) and saves the weights of that step. It logs to
its console only (its data iterator resets the logger, so `log_file` stops before the loop):
the throughput, parameters and checkpoint are read from there. A time-to-quality run saves
by the driver's clock and ends itself (`run_onmt_quality`).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from seq2seq.config.build import plain
from tools.bench.peer import onmt_driver
from tools.bench.peer.onmt_config import onmt_decode_settings, onmt_train_config, write_onmt_vocab
from tools.bench.peer.ours import our_config
from tools.bench.peer.peer_options import PeerOptions
from tools.bench.peer.shared_settings import say
from tools.bench.peer.throughput_logs import (
    median_after_warmup,
    onmt_checkpoint,
    onmt_intervals,
    onmt_parameters,
)
from tools.bench.peer.timed_process import (
    QualityRun,
    TrainedPeer,
    clock_arguments,
    interrupted_run,
    run_to_end,
)

ONMT_START_LINE = "Start training loop"


def write_onmt_files(
    shape: str, options: PeerOptions, data_dir: Path, folder: Path, quality: bool = False
) -> tuple[Path, Path]:
    """OpenNMT-py's vocabularies, training config (YAML) and decoding settings (JSON) of
    `shape`, from our resolved preset, in its run folder `folder`: (config, settings). A
    time-to-quality run (`quality`) keeps every checkpoint and decodes the quality sources."""
    ours = plain(our_config(shape))
    for lang in (ours["data"]["src_lang"], ours["data"]["tgt_lang"]):
        write_onmt_vocab(data_dir, lang, folder)
    config = onmt_train_config(ours, data_dir, folder, options.log_every, quality)
    settings = onmt_decode_settings(ours, data_dir, folder, "quality" if quality else "test")
    config_path, settings_path = folder / "config.yaml", folder / "decode.json"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    settings_path.write_text(json.dumps(settings), encoding="utf-8")
    return config_path, settings_path


def run_onmt_training(shape: str, options: PeerOptions, data_dir: Path) -> TrainedPeer:
    """OpenNMT-py's training of `shape` for `minutes` from its training loop, then SIGINT;
    its throughput, updates, parameters, and the command that decodes with its weights."""
    folder = options.work_dir / shape / "opennmt"
    config_path, settings_path = write_onmt_files(shape, options, data_dir, folder)
    console = folder / "console.log"
    python = str(options.peer_python("opennmt"))
    say(f"{shape}: OpenNMT-py trains for {options.minutes:g} min")
    command = [python, onmt_driver.__file__, "train", str(config_path)]
    command += ["--threads", str(options.threads)]
    started = (console, ONMT_START_LINE)
    returncode = interrupted_run(command, console, started, options, "OpenNMT-py")
    text = console.read_text(encoding="utf-8")
    saved = onmt_checkpoint(text)
    if returncode != 0 or saved is None:
        raise SystemExit(f"OpenNMT-py's training of {shape} failed; see {console}")
    updates, checkpoint = saved
    result = {
        "updates": updates,
        "parameters": onmt_parameters(text),
        **median_after_warmup(onmt_intervals(text), options.warmup_updates),
    }
    out = folder / "decoding.json"
    decode = [python, onmt_driver.__file__, "decode", str(settings_path),
              "--checkpoint", str(checkpoint), "--threads", str(options.threads),
              "--reps", str(options.decode_reps), "--result", str(out)]  # fmt: skip
    return TrainedPeer(result, decode, out)


def run_onmt_quality(shape: str, options: PeerOptions, data_dir: Path, folder: Path) -> QualityRun:
    """OpenNMT-py's time-to-quality training of `shape` in `folder`: saving by the driver's
    clock until its budget; the command that decodes the quality sources with every save."""
    config_path, settings_path = write_onmt_files(shape, options, data_dir, folder, quality=True)
    python = str(options.peer_python("opennmt"))
    saves = folder / "saves.jsonl"
    say(f"{shape}: OpenNMT-py trains for {options.quality_minutes:g} min (time to quality)")
    command = [python, onmt_driver.__file__, "train", str(config_path)]
    command += ["--threads", str(options.threads), *clock_arguments(options, saves)]
    run_to_end(command, folder / "console.log", options, f"OpenNMT-py ({shape})")
    out = folder / "quality.json"
    score = [python, onmt_driver.__file__, "quality", str(settings_path), "--saves", str(saves),
             "--threads", str(options.threads), "--result", str(out)]  # fmt: skip
    return QualityRun(saves, score, out)
