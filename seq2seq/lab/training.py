"""Trained models for the lab: composed and trained as `seq2seq-train` does, kept for reuse.

`trained(context, overrides, label)` composes the train config with `overrides` (Hydra's
compose API, the same config groups as the command line), trains and tests it with
`seq2seq.runs.assemble.train_and_test` in a folder of `context.runs_dir` named by the label
and a hash of the overrides, and returns the run. A run whose `results.json` exists is not
trained again, so experiments that need the same model (the GRU with additive attention is
one) share it, and `make lab` can be stopped and started again: a run cut short continues
from its last checkpoint (`trainer.resume=auto`).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_module
from omegaconf import DictConfig

from seq2seq.bounded_files import read_json
from seq2seq.config.schema import register_configs
from seq2seq.lab.experiment import LabContext
from seq2seq.runs.assemble import train_and_test
from seq2seq.search.translator import Translator

log = logging.getLogger(__name__)

RESULTS = "results.json"


@dataclass(frozen=True)
class TrainedRun:
    """A trained and tested run: its folder, `results.json` and best checkpoint."""

    label: str
    run_dir: Path
    results: dict[str, Any]

    @property
    def checkpoint(self) -> Path:
        return self.run_dir / "checkpoints" / "best.pt"

    @property
    def test_bleu(self) -> float:
        return float(self.results["test"]["bleu"])

    @property
    def valid_bleu(self) -> float:
        return float(self.results["valid_best_bleu"])

    def translator(self, device: str = "cpu") -> Translator:
        """The best checkpoint, loaded with every checkpoint check (`Translator.load`)."""
        return Translator.load(self.checkpoint, device)


def compose_config(overrides: list[str]) -> DictConfig:
    """The train config with `overrides`, composed as `seq2seq-train` composes it."""
    register_configs()
    with initialize_config_module(config_module="seq2seq.configs", version_base="1.3"):
        return compose(config_name="train", overrides=list(overrides))


def run_overrides(context: LabContext, overrides: list[str]) -> list[str]:
    """`overrides` and what every lab run shares: the data root, device and threads, no
    progress bar, no TensorBoard (the lab draws its own figures), and the smoke test's
    cap on updates (`LabContext.max_steps`)."""
    capped = [] if context.max_steps is None else [
        f"trainer.max_steps={context.max_steps}", f"trainer.valid_every={context.max_steps}",
        "schedule.warmup_steps=1",  # a cosine schedule needs max_steps > warmup_steps
    ]  # fmt: skip
    return [
        *overrides,
        f"data.root={context.data_root}",
        f"trainer.device={context.device}",
        f"trainer.threads={context.threads}",
        "trainer.resume=auto",
        "logging.progress_bar=false",
        "logging.tensorboard=false",
        *capped,
    ]


def run_folder(context: LabContext, label: str, overrides: list[str]) -> Path:
    """`runs_dir/<label>-<hash of the overrides>`: a change of any setting is a new run,
    and the same overrides are the same run whatever the label (an experiment that asks
    for a run another one trained under another label finds its folder)."""
    digest = hashlib.sha256("\n".join(overrides).encode("utf-8")).hexdigest()[:10]
    earlier = sorted(context.runs_dir.glob(f"*-{digest}")) if context.runs_dir.is_dir() else []
    return earlier[0] if earlier else context.runs_dir / f"{label}-{digest}"


def trained(context: LabContext, overrides: list[str], label: str) -> TrainedRun:
    """The run of `overrides`, trained and tested unless an earlier call finished it."""
    overrides = run_overrides(context, overrides)
    run_dir = run_folder(context, label, overrides)
    results_file = run_dir / RESULTS
    if results_file.is_file():
        results = read_json(results_file)
        log.info("lab: %s reused from %s", label, run_dir)
        context.models.append((label, True, float(results.get("train_minutes", 0.0))))
        return TrainedRun(label, run_dir, results)
    log.info("lab: training %s in %s", label, run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "overrides.txt").write_text("\n".join(overrides) + "\n", encoding="utf-8")
    results = train_and_test(compose_config(overrides), run_dir)
    context.models.append((label, False, float(results.get("train_minutes", 0.0))))
    return TrainedRun(label, run_dir, results)
