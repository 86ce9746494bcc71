"""Training speed: the Trainer's own `train_step` + `update` timed on the first batches of
epoch 0 of the real corpus (the same batches for every preset and precision).

`warmup` untimed updates first (allocations, kernel selection), then `reps` timings of
`steps` updates each; every rate is the median over the reps:

    target tokens/s = Σ real target tokens of the k batches / their seconds
    MFU             = analytic training FLOP/s (seq2seq.flops, 3 × forward) / the ceiling

Padding is the share of padded positions in the measured batches (`sampler.padding_ratio`).
"""

from __future__ import annotations

import datetime
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from seq2seq.config.build import count_parameters
from seq2seq.data.batching import collate
from seq2seq.flops import training_flops
from seq2seq.lab.matmul_ceiling import synchronize
from seq2seq.training.trainer import Trainer


@dataclass(frozen=True)
class StepCounts:
    """How many updates a measurement spends: untimed first, then reps × steps timed."""

    warmup: int
    reps: int
    steps: int

    @property
    def needed(self) -> int:
        return self.warmup + self.reps * self.steps


def timed_steps(trainer: Trainer, batches: list[list[int]]) -> float:
    """Seconds for one optimiser update per batch, each read as the training loop reads it
    (`Trainer.training_batch`: under subword regularisation its segmentations are drawn
    inside the timed seconds, and the tokens and FLOPs counted are the best segmentation's)."""
    started = time.perf_counter()
    for position, indices in enumerate(batches, start=1):
        batch = trainer.training_batch(indices, (0, position))
        trainer.train_step(batch.to(trainer.device))
        trainer.update()
    synchronize(trainer.device)
    return time.perf_counter() - started


def batch_counts(trainer: Trainer, batches: list[list[int]]) -> dict[str, int]:
    """Real tokens and analytic training FLOPs of `batches` (padded shapes)."""
    data, cfg = trainer.data, trainer.settings.run_config
    vocab = (data.src_tokenizer.vocab_size, data.tgt_tokenizer.vocab_size)
    counts = {"tgt_tokens": 0, "src_tokens": 0, "flops": 0}
    for indices in batches:
        batch = collate([data.train.examples[i] for i in indices], indices)
        counts["tgt_tokens"] += batch.num_tgt_tokens
        counts["src_tokens"] += batch.num_src_tokens
        shape = (len(batch), batch.src.size(1), batch.tgt_in.size(1))  # (batch, src, tgt)
        counts["flops"] += training_flops(cfg, *shape, *vocab)
    return counts


def measured_rates(trainer: Trainer, batches: list[list[int]], counts: StepCounts) -> list[dict]:
    """Per rep: tokens and FLOPs per second, and the rep's seconds (`s`)."""
    rates = []
    for rep in range(counts.reps):
        start = counts.warmup + rep * counts.steps
        chunk = batches[start : start + counts.steps]
        seconds = timed_steps(trainer, chunk)
        totals = batch_counts(trainer, chunk)
        rates.append({name: value / seconds for name, value in totals.items()} | {"s": seconds})
    return rates


def measure_training(trainer: Trainer, counts: StepCounts) -> dict[str, Any]:
    """Warm-up, then `reps` timings of `steps` updates; medians of the per-rep rates."""
    batches = trainer.sampler.batches(0)[: counts.needed]
    if len(batches) < counts.needed:
        raise ValueError(
            f"an epoch has {len(batches)} batches, fewer than the {counts.needed} asked for"
        )
    timed_steps(trainer, batches[: counts.warmup])
    rates = measured_rates(trainer, batches, counts)
    measured = batches[counts.warmup :]
    return {
        "parameters": count_parameters(trainer.model),
        "step_seconds": statistics.median(r["s"] for r in rates) / counts.steps,
        "tgt_tokens_per_s": statistics.median(r["tgt_tokens"] for r in rates),
        "all_tokens_per_s": statistics.median(r["tgt_tokens"] + r["src_tokens"] for r in rates),
        "gflops_per_s": statistics.median(r["flops"] for r in rates) / 1e9,
        "gflops_per_step": batch_counts(trainer, measured)["flops"] / len(measured) / 1e9,
        "padding": trainer.sampler.padding_ratio(measured),
        "batches": f"{len(measured)} measured after {counts.warmup} warm-up; "
        f"data.max_tokens={trainer.settings.max_tokens}, seed {trainer.settings.seed}",
    }


def profile_step(trainer: Trainer, indices: list[int], path: Path) -> list[str]:
    """Profile one training step; write the top-25 table; return its top-5 lines."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if trainer.device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profiler:
        timed_steps(trainer, [indices])
    averages = profiler.key_averages()
    table = averages.table(sort_by="self_cpu_time_total", row_limit=25)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(profile_header(trainer, indices) + table + "\n", encoding="utf-8")
    total = sum(event.self_cpu_time_total for event in averages) or 1.0
    top = sorted(averages, key=lambda event: event.self_cpu_time_total, reverse=True)[:5]
    return [f"{e.key} {100 * e.self_cpu_time_total / total:.0f}%" for e in top]


def profile_header(trainer: Trainer, indices: list[int]) -> str:
    """The profile file's first lines: the batch shape, torch, threads, the date."""
    batch = collate([trainer.data.train.examples[i] for i in indices], indices)
    shape = f"batch {len(batch)} × src {batch.src.size(1)} × tgt {batch.tgt_in.size(1)}"
    header = f"One training step of default_cpu ({shape}), torch {torch.__version__}, "
    return header + f"threads: {torch.get_num_threads()}, {datetime.date.today()}\n\n"
