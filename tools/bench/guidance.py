"""The cost of guided alignment and of the alignment layer: time per update with and
without them, same batches, same run.

For each preset, one trainer per variant (assembled as `seq2seq-train` assembles it:
`seq2seq.runs.assemble.assemble_trainer`): without guidance, with `alignment=guided`, for
a Transformer decoder also with `alignment.full_context=true`, and with the separate
alignment layer (`alignment=layer`), guided and unsupervised. The links are those a
guided run uses (eflomal's, or `data.alignments`), made once and cached. The variants take
the same batches of epoch 0, after `warmup` updates each, one update of every variant in
turn, the first of the turn rotating (so a slow spell of the machine hits them all, and no
variant always runs first); an update is the trainer's own batch (the link targets
included), `train_step` and `update`. Reported: the median seconds per update of each
variant and its ratio to the unguided one.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from seq2seq import registry
from seq2seq.lab.matmul_ceiling import synchronize
from seq2seq.runs.assemble import assemble_trainer
from seq2seq.runs.compose import preset_config
from seq2seq.training.trainer import Trainer

PRESETS = ("default_cpu", "gru_additive")
VARIANTS = {
    "unguided": [],
    "guided": ["alignment=guided"],
    "guided, full context": ["alignment=guided", "alignment.full_context=true"],
    "layer, guided": ["alignment=layer"],
    "layer, unsupervised": ["alignment=layer", "alignment.training=unsupervised"],
}
FULL_CONTEXT = ("alignment.full_context=true", "alignment.query=full_context")


def timed_update(trainer: Trainer, indices: list[int]) -> float:
    """Seconds of one update on the batch `indices`, as the training loop makes it."""
    started = time.perf_counter()
    batch = trainer.data.train.batch(indices).to(trainer.device)
    trainer.train_step(batch)
    trainer.update()
    synchronize(trainer.device)
    return time.perf_counter() - started


def variant_trainers(
    preset: str, threads: int, device: str, extra: list[str], folder: Path
) -> dict[str, Trainer]:
    """One trainer per variant that applies to the preset (the full-context pass only where
    the decoder has one: a recurrent or convolutional decoder has none)."""
    trainers = {}
    for name, overrides in VARIANTS.items():
        cfg = preset_config(preset, threads, device, extra=overrides + extra)
        decoder = registry.of_node("decoder", cfg.decoder).builder
        full_context = any(setting in overrides for setting in FULL_CONTEXT)
        if full_context and not hasattr(decoder, "full_context"):
            continue
        trainers[name] = assemble_trainer(cfg, folder / preset / name, observe=False)
    return trainers


def measure(trainers: dict[str, Trainer], warmup: int, updates: int) -> dict[str, float]:
    """Median seconds per update of each trainer, on the same batches, in rotating turns."""
    batches = next(iter(trainers.values())).sampler.batches(0)[: warmup + updates]
    seconds: dict[str, list[float]] = {name: [] for name in trainers}
    names = list(trainers)
    for position, indices in enumerate(batches):
        turn = position % len(names)
        for name in names[turn:] + names[:turn]:  # each variant goes first as often
            elapsed = timed_update(trainers[name], indices)
            if position >= warmup:
                seconds[name].append(elapsed)
    return {name: statistics.median(values) for name, values in seconds.items()}


def report_lines(preset: str, medians: dict[str, float]) -> list[str]:
    """`preset variant ms/update ratio-to-unguided`, one line per variant."""
    base = medians["unguided"]
    return [
        f"{preset:14} {name:22} {median * 1000:8.1f} ms/update  {median / base:.3f}×"
        for name, median in medians.items()
    ]
