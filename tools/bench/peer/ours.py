"""Our side of `make bench-peer`: the preset's config, and the training and decoding processes.

    python -m tools.bench.peer.ours train SHAPE RUN_DIR OVERRIDES_JSON
    python -m tools.bench.peer.ours decode CHECKPOINT --sources FILE --threads N --reps R --result OUT
    python -m tools.bench.peer.ours quality-train SHAPE RUN_DIR OVERRIDES_JSON --save-every S \\
        --budget S --saves SAVES
    python -m tools.bench.peer.ours quality --saves SAVES --sources FILE --threads N --result OUT

Training runs until its clock (`trainer.max_minutes`) runs out, with validation off but for
one untimed validation on `OUR_FINAL_VALID` pairs that fit() makes to write its checkpoint.
Decoding times `Translator.translate` on the exported test sources per search (after a
warm-up), as `make bench` does, and writes seconds, counts and outputs as JSON.

Time to quality (`quality_clock`): `quality-train` runs fit() to each save time in turn
(its clock continues across the calls and counts only its loop), keeps a copy of each
last.pt and records it in SAVES; `quality` translates the quality sources greedily with
every recorded checkpoint and writes the outputs (a list per checkpoint) as JSON.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from seq2seq.config.build import count_parameters
from seq2seq.config.search_settings import SearchSettings
from seq2seq.runs.assemble import assemble_trainer
from seq2seq.runs.compose import compose_train
from seq2seq.search.translator import Translator
from tools.bench.peer.driver import SEARCHES, generated_tokens
from tools.bench.peer.quality_clock import next_save_time, read_saves, record_save
from tools.bench.peer.shared_settings import DECODE_BATCH, LENGTH_PENALTY, NEVER, OUR_FINAL_VALID


def our_config(shape: str, overrides: Sequence[str] = ()) -> DictConfig:
    """Our composed config of `+experiment=<shape>` with `overrides`."""
    return compose_train([f"+experiment={shape}", *overrides])


def our_overrides(minutes: float, threads: int, log_every: int) -> list[str]:
    """Our run's settings beside the preset: the clock, threads, no validation, logging."""
    return [
        f"trainer.threads={threads}",
        "trainer.device=cpu",
        f"trainer.max_minutes={minutes}",
        f"trainer.max_steps={NEVER}",
        f"trainer.valid_every={NEVER}",
        f"trainer.valid_max_sentences={OUR_FINAL_VALID}",
        f"trainer.log_every={log_every}",
        "logging.progress_bar=false",
        "logging.tensorboard=false",
    ]


def our_train(shape: str, run_dir: Path, overrides: list[str]) -> dict[str, int]:
    """Train `shape` until its clock runs out (fit() then validates on a few pairs and
    saves checkpoints/last.pt); its updates and parameters."""
    trainer = assemble_trainer(our_config(shape, overrides), run_dir, observe=False)
    progress = trainer.fit()
    return {"updates": progress.step, "parameters": count_parameters(trainer.model)}


def our_quality_train(
    shape: str, run_dir: Path, overrides: list[str], every_s: float, budget_s: float, saves: Path
) -> dict[str, int]:
    """Train `shape` for `budget_s` training seconds, saving at the first update boundary at
    or after each multiple of `every_s`: fit() stops at the save time (`trainer.max_minutes`;
    its clock counts only its loop and continues across calls, so the validation on a few
    pairs and the save after each call stay off the clock), then its last.pt is copied to
    `run_dir`/quality and recorded in `saves`. Its updates and parameters."""
    trainer = assemble_trainer(our_config(shape, overrides), run_dir, observe=False)
    folder = run_dir / "quality"
    folder.mkdir(parents=True, exist_ok=True)
    due = every_s
    while True:
        stop_at = min(due, budget_s)
        trainer.settings = replace(trainer.settings, max_minutes=stop_at / 60)
        progress = trainer.fit()
        checkpoint = folder / f"step_{progress.step}.pt"
        shutil.copyfile(run_dir / "checkpoints" / "last.pt", checkpoint)
        record_save(saves, progress.step, progress.train_seconds, checkpoint)
        if progress.train_seconds < stop_at or progress.train_seconds >= budget_s:
            break  # the budget is spent, or the run ended on its own (epochs, early stop)
        due = next_save_time(progress.train_seconds, every_s)
    return {"updates": progress.step, "parameters": count_parameters(trainer.model)}


def our_quality_decode(saves: Path, sources_file: Path, threads: int, out: Path) -> None:
    """Greedy translations of the quality sources with every checkpoint recorded in
    `saves`, in that order; written as a JSON list of output lists."""
    torch.set_num_threads(threads)
    sources = sources_file.read_text(encoding="utf-8").splitlines()
    greedy = SearchSettings(beam_size=1, batch_size=DECODE_BATCH)
    outputs = []
    for save in read_saves(saves):
        translator = Translator.load(Path(save["checkpoint"]), "cpu")
        outputs.append([t.text for t in translator.translate(sources, greedy)])
    out.write_text(json.dumps(outputs), encoding="utf-8")


def timed_search(translator: Translator, sources: list[str], beam: int, reps: int) -> dict:
    """Median seconds of `reps` translations of `sources` with beam `beam`, and the last
    pass's sentences, generated tokens and outputs."""
    settings = SearchSettings(
        beam_size=beam, batch_size=DECODE_BATCH, length_penalty=LENGTH_PENALTY
    )
    seconds = []
    for _ in range(reps):
        started = time.perf_counter()
        translations = translator.translate(sources, settings)
        seconds.append(time.perf_counter() - started)
    return {
        "seconds": statistics.median(seconds),
        "sentences": len(sources),
        "tokens": generated_tokens([t.target_pieces[0] for t in translations]),
        "hypotheses": [t.text for t in translations],
    }


def our_decode(checkpoint: Path, sources_file: Path, threads: int, reps: int, out: Path) -> None:
    """Time `Translator.translate` on the exported test sources per search; write JSON."""
    torch.set_num_threads(threads)
    translator = Translator.load(checkpoint, "cpu")
    sources = sources_file.read_text(encoding="utf-8").splitlines()
    translator.translate(sources[:16], SearchSettings(beam_size=1))  # warm-up
    results: dict[str, Any] = {"parameters": count_parameters(translator.model)}
    for beam in SEARCHES:
        results[str(beam)] = timed_search(translator, sources, beam, reps)
    out.write_text(json.dumps(results), encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="our side of make bench-peer")
    tasks = parser.add_subparsers(dest="task", required=True)
    train = tasks.add_parser("train")
    train.add_argument("shape")
    train.add_argument("run_dir", type=Path)
    train.add_argument("overrides", help="a JSON list of Hydra overrides")
    decode = tasks.add_parser("decode")
    decode.add_argument("checkpoint", type=Path)
    for name in ("--sources", "--result"):
        decode.add_argument(name, type=Path, required=True)
    decode.add_argument("--threads", type=int, required=True)
    decode.add_argument("--reps", type=int, default=1)
    quality_train = tasks.add_parser("quality-train")
    quality_train.add_argument("shape")
    quality_train.add_argument("run_dir", type=Path)
    quality_train.add_argument("overrides", help="a JSON list of Hydra overrides")
    for name in ("--save-every", "--budget"):
        quality_train.add_argument(name, type=float, required=True, help="seconds")
    quality_train.add_argument("--saves", type=Path, required=True)
    quality = tasks.add_parser("quality")
    for name in ("--saves", "--sources", "--result"):
        quality.add_argument(name, type=Path, required=True)
    quality.add_argument("--threads", type=int, required=True)
    args = parser.parse_args(argv)
    if args.task == "train":
        print(json.dumps(our_train(args.shape, args.run_dir, json.loads(args.overrides))))
    elif args.task == "decode":
        our_decode(args.checkpoint, args.sources, args.threads, args.reps, args.result)
    elif args.task == "quality-train":
        overrides = json.loads(args.overrides)
        summary = our_quality_train(
            args.shape, args.run_dir, overrides, args.save_every, args.budget, args.saves
        )
        print(json.dumps(summary))
    else:
        our_quality_decode(args.saves, args.sources, args.threads, args.result)


if __name__ == "__main__":
    main()
