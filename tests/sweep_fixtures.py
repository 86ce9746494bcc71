"""Sweep folders as `seq2seq-train -m` leaves them, for the comparison's tests: composed
configs, results, event files, test hypotheses (no training)."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

from helpers import compose_config
from omegaconf import OmegaConf
from torch.utils.tensorboard import SummaryWriter

from seq2seq.metrics import corpus_scores
from seq2seq.study.report import ReportSettings, write_report

SEEDS = (1, 2, 3)
WORDS = "the a cat dog sat ran on under mat house red big small quickly today".split()


def fake_run(
    run_dir: Path,
    attention: str,
    results: dict | None,
    scalars: dict,
    *,
    experiment: str = "compare_gru",
    extra: tuple[str, ...] = (),
) -> None:
    """A run folder: config, overrides, results, one event file. `extra` overrides
    (`trainer.seed=2`, `data.root=...`) join the config and the command line."""
    (run_dir / ".hydra").mkdir(parents=True)
    overrides = [f"+experiment={experiment}", f"attention={attention}", *extra]
    OmegaConf.save(compose_config(overrides), run_dir / ".hydra" / "config.yaml")
    OmegaConf.save(OmegaConf.create(overrides), run_dir / ".hydra" / "overrides.yaml")
    if results is not None:
        (run_dir / "results.json").write_text(json.dumps(results), encoding="utf-8")
    writer = SummaryWriter(str(run_dir / "tensorboard"))
    for tag, values in scalars.items():
        for step, value in enumerate(values, 1):
            writer.add_scalar(tag, value, step)
    writer.close()


def results(parameters: int, bleu: float) -> dict:
    return {
        "test": {"bleu": bleu, "chrf": 40.5, "bleu_signature": "x", "chrf_signature": "y"},
        "valid_best_bleu": bleu + 1.0,
        "steps": 60,
        "train_minutes": 1.3,
        "parameters": parameters,
    }


def run_name(number: int, attention: str, seed: int) -> str:
    return f"{number}_+experiment=compare_gru,attention={attention},trainer.seed={seed}"


def seeded_sweep(folder: Path, test_bleu: dict[str, list[float]], extra=()) -> list[Path]:
    """One fake run per (attention, seed), in Hydra's job order (seed varies fastest)."""
    made, number = [], 0
    for attention, values in test_bleu.items():
        for seed, bleu in zip(SEEDS, values):
            run = folder / run_name(number, attention, seed)
            fake_run(run, attention, results(4_000_000, bleu), {},
                     extra=(f"trainer.seed={seed}", *extra))  # fmt: skip
            made.append(run)
            number += 1
    return made


def sentences(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(5, 12))) + "." for _ in range(count)]


def scored_run(
    run_dir: Path, experiment: str, hypotheses: list[str], references: list[str], extra: tuple
) -> None:
    """A finished fake run of `experiment` (cosine attention) whose test output is
    `hypotheses`, its BLEU against `references` in its results."""
    bleu = corpus_scores(hypotheses, references, "en")["bleu"]
    fake_run(run_dir, "cosine", results(800_000, bleu), {}, experiment=experiment, extra=extra)
    (run_dir / "test.hyp").write_text("\n".join(hypotheses) + "\n", encoding="utf-8")


def degraded(references: list[str], seed: int) -> list[str]:
    """Each reference with a third of its words replaced: a worse system."""
    rng = random.Random(seed)
    return [
        " ".join(word if rng.random() > 0.35 else rng.choice(WORDS) for word in line.split())
        for line in references
    ]


def significance_sweep(root: Path) -> tuple[Path, list[str]]:
    """Two seeds of: a baseline (attention=none), a copy of the references (additive), the
    baseline's own hypotheses (dot), and general: better than the baseline with seed 1,
    worse with seed 2. The references are a prepared test split below `root/data`."""
    references = sentences(150, 0)
    prepared = root / "data" / "prepared" / "tatoeba_zh_en"
    prepared.mkdir(parents=True)
    (prepared / "test.en").write_text("\n".join(references) + "\n", encoding="utf-8")
    baseline = {seed: degraded(references, seed) for seed in (1, 2)}
    systems = {
        "none": baseline,
        "additive": {seed: references for seed in (1, 2)},
        "dot": baseline,
        "general": {1: references, 2: ["the"] * len(references)},
    }
    valid = {"none": 5.0, "additive": 30.0, "dot": 5.0, "general": 20.0}
    sweep, number = root / "attention", 0
    for attention, by_seed in systems.items():
        for seed, hypotheses in by_seed.items():
            run = sweep / run_name(number, attention, seed)
            bleu = corpus_scores(hypotheses, references, "en")["bleu"]
            scored = results(4_000_000, bleu) | {"valid_best_bleu": valid[attention] + seed}
            fake_run(run, attention, scored, {},
                     extra=(f"trainer.seed={seed}", f"data.root={root / 'data'}"))  # fmt: skip
            (run / "test.hyp").write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
            number += 1
    return sweep, references


def report(sweeps: list[Path], out: Path, **settings) -> Path | None:
    """`write_report` without images or AER (no checkpoints here), into `out`."""
    chosen = {"image": False, "aer": False} | settings
    return write_report(sweeps, ReportSettings(out_dir=out, **chosen))


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def table_rows(text: str, start: str, width: int | None = None) -> list[list[str]]:
    """The cells of the markdown rows that start with `start` (and have `width` cells)."""
    rows = [cells(line) for line in text.splitlines() if line.startswith(f"| {start}")]
    return [row for row in rows if width is None or len(row) == width]
