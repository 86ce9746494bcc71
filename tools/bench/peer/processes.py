"""The processes of `make bench-peer` for one shape: ours trains first, then each peer
directly after (`joey_runs`, `onmt_runs`), all on the same exported data; then every trained
model decodes the same test sources, and our scorer gives each output its BLEU.

Ours stops itself after `trainer.max_minutes`; a peer is sent SIGINT the same minutes after
its training loop starts and saves its weights. The throughput of each comes from its own
log (`throughput_logs`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from seq2seq.metrics import corpus_scores
from tools.bench.peer import driver
from tools.bench.peer.joey_runs import run_joey_training
from tools.bench.peer.onmt_runs import run_onmt_training
from tools.bench.peer.ours import our_overrides
from tools.bench.peer.peer_options import PeerOptions
from tools.bench.peer.shared_settings import PEERS, say, thread_env
from tools.bench.peer.throughput_logs import median_after_warmup, our_intervals
from tools.bench.peer.timed_process import TrainedPeer, run_decoding

PEER_TRAINING: dict[str, Callable[[str, PeerOptions, Path], TrainedPeer]] = {
    "joeynmt": run_joey_training,
    "opennmt": run_onmt_training,
}


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


def decode_ours(shape: str, options: PeerOptions, checkpoint: Path, test_src: Path) -> dict:
    """Our trained model decodes the exported test sources."""
    out = options.work_dir / shape / "ours" / "decoding.json"
    command = [sys.executable, "-m", "tools.bench.peer.ours", "decode", str(checkpoint),
               "--sources", str(test_src), "--threads", str(options.threads),
               "--reps", str(options.decode_reps), "--result", str(out)]  # fmt: skip
    return run_decoding(command, out, options, f"{shape}: ours")


def add_bleu(results: dict[str, Any], references: list[str], lang: str) -> None:
    """BLEU of each search's outputs by our scorer (the same for every side)."""
    for beam in driver.SEARCHES:
        side = results[str(beam)]
        side["bleu"] = corpus_scores(side["hypotheses"], references, lang)["bleu"]


def measure_shape(
    shape: str, options: PeerOptions, data_dir: Path
) -> tuple[dict[str, dict], dict[str, dict]]:
    """Train ours, then each peer; then decode with all. (training, decoding) rows keyed
    `ours` and the peers' names."""
    training, trained = {}, {}
    training["ours"], ours_checkpoint = run_ours_training(shape, options)
    for peer in options.peers:
        trained[peer] = PEER_TRAINING[peer](shape, options, data_dir)
        training[peer] = trained[peer].training
    test_src = data_dir / f"test.{export_language(data_dir, 'src')}"
    decoding = {"ours": decode_ours(shape, options, ours_checkpoint, test_src)}
    for peer, run in trained.items():
        what = f"{shape}: {PEERS[peer]}"
        decoding[peer] = run_decoding(run.decode_command, run.decode_result, options, what)
        training[peer]["parameters"] = training[peer].get("parameters") or decoding[peer].get(
            "parameters"
        )
    tgt = export_language(data_dir, "tgt")
    references = (data_dir / f"reference.{tgt}").read_text(encoding="utf-8").splitlines()
    for results in decoding.values():
        add_bleu(results, references, tgt)
    return training, decoding


def export_language(data_dir: Path, side: str) -> str:
    """The source or target language code of the export (from languages.json)."""
    return json.loads((data_dir / "languages.json").read_text(encoding="utf-8"))[side]
