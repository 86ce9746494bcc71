"""The time-to-quality runs of `make bench-peer` for one shape (`--quality`).

Each framework in turn (ours, then each peer) trains the shape from scratch on the exported
data with the settings of the throughput run, for `quality_minutes` of its training clock
(`quality_clock`: saves every `quality_every` minutes, their time off the clock), in
`work_dir/<shape>/quality/<side>`. Then, untimed, its own toolkit translates the exported
quality sources (the first `quality_sentences` valid pairs) greedily with every saved
checkpoint, and this project's scorer gives each output its BLEU, as for the test BLEU; the
checkpoints are deleted once scored (the saves, outputs and scores stay). The times to each
threshold come from these series (`time_to_quality`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from seq2seq.metrics import corpus_scores
from tools.bench.peer.joey_runs import run_joey_quality
from tools.bench.peer.onmt_runs import run_onmt_quality
from tools.bench.peer.ours import our_overrides
from tools.bench.peer.peer_options import PeerOptions
from tools.bench.peer.processes import export_language
from tools.bench.peer.quality_clock import read_saves
from tools.bench.peer.shared_settings import PEERS, say, thread_env
from tools.bench.peer.timed_process import QualityRun, clock_arguments, run_decoding

PEER_QUALITY: dict[str, Callable[[str, PeerOptions, Path, Path], QualityRun]] = {
    "joeynmt": run_joey_quality,
    "opennmt": run_onmt_quality,
}


def run_ours_quality(shape: str, options: PeerOptions, data_dir: Path, folder: Path) -> QualityRun:
    """Our time-to-quality training of `shape` in `folder` (`ours.our_quality_train`); the
    command that decodes the quality sources with every save."""
    saves = folder / "saves.jsonl"
    overrides = our_overrides(options.quality_minutes, options.threads, options.log_every)
    command = [sys.executable, "-m", "tools.bench.peer.ours", "quality-train", shape,
               str(folder), json.dumps(overrides), *clock_arguments(options, saves)]  # fmt: skip
    say(f"{shape}: ours trains for {options.quality_minutes:g} min (time to quality)")
    done = subprocess.run(
        command, capture_output=True, text=True, env=thread_env(options.threads), cwd=options.root
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stderr.log").write_text(done.stderr, encoding="utf-8")
    if done.returncode != 0:
        raise SystemExit(f"our time-to-quality training of {shape} failed:\n{done.stderr[-3000:]}")
    out = folder / "quality.json"
    sources = data_dir / f"quality.{export_language(data_dir, 'src')}"
    score = [sys.executable, "-m", "tools.bench.peer.ours", "quality", "--saves", str(saves),
             "--sources", str(sources), "--threads", str(options.threads),
             "--result", str(out)]  # fmt: skip
    return QualityRun(saves, score, out)


def scored_saves(
    run: QualityRun, options: PeerOptions, references: list[str], lang: str, what: str
) -> list[dict]:
    """Every save of `run` with the BLEU of its greedy outputs by our scorer, in the order
    of the saves; the checkpoints are deleted afterwards."""
    saves = read_saves(run.saves)
    outputs = run_decoding(run.score_command, run.score_result, options, what)
    if len(outputs) != len(saves):
        raise SystemExit(f"{what}: {len(outputs)} outputs for {len(saves)} saves ({run.saves})")
    series = [
        {
            "step": save["step"],
            "seconds": save["seconds"],
            "bleu": corpus_scores(hypotheses, references, lang)["bleu"],
        }
        for save, hypotheses in zip(saves, outputs)
    ]
    for save in saves:
        Path(save["checkpoint"]).unlink(missing_ok=True)
    (run.saves.parent / "scores.json").write_text(json.dumps(series), encoding="utf-8")
    return series


def measure_quality(shape: str, options: PeerOptions, data_dir: Path) -> dict[str, list[dict]]:
    """Ours, then each peer: train for the budget, then score every save; the scored saves
    keyed `ours` and the peers' names."""
    tgt = export_language(data_dir, "tgt")
    references = (data_dir / f"quality-reference.{tgt}").read_text(encoding="utf-8").splitlines()
    folder = options.work_dir / shape / "quality"
    runs: dict[str, Callable[[str, PeerOptions, Path, Path], QualityRun]] = {
        "ours": run_ours_quality
    }
    runs |= {peer: PEER_QUALITY[peer] for peer in options.peers}
    series = {}
    for side, run_training in runs.items():
        run = run_training(shape, options, data_dir, folder / side)
        what = f"{shape}: {PEERS.get(side, side)} (every checkpoint saved, greedy)"
        series[side] = scored_saves(run, options, references, tgt, what)
    return series
