"""`make bench`'s training tables: throughput per preset, and the cost of dropout.

Every row is one `worker.run_worker` process. MFU is the achieved analytic training FLOP/s
over the matmul ceiling of the same entry. Dropout's cost is measured in alternating rounds
(each round measures every variant once, so a slow spell of the machine hits all of them);
a variant's figure is its median over the rounds.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

from tools.bench.matmul_bound import BOUND_HEAD, bound_row
from tools.bench.worker import WorkerJob, run_worker

# Where the Transformer draws dropout masks (rate 0.1 wherever it is on): the embeddings
# (model.embed_dropout), the encoder/decoder inputs and every sublayer output (dropout),
# inside every FFN (ff_dropout, the widest masks).
DROPOUT_VARIANTS = {
    "every site": ["model.embed_dropout=0.1", "encoder.dropout=0.1", "decoder.dropout=0.1",
                   "encoder.ff_dropout=0.1", "decoder.ff_dropout=0.1"],
    "inputs + sublayer outputs": ["model.embed_dropout=0", "encoder.dropout=0.1",
                                  "decoder.dropout=0.1", "encoder.ff_dropout=0",
                                  "decoder.ff_dropout=0"],
    "token: inputs + sublayer outputs": ["model.embed_dropout=0", "encoder.dropout=0.1",
                                         "decoder.dropout=0.1", "encoder.dropout_unit=token",
                                         "decoder.dropout_unit=token", "encoder.ff_dropout=0",
                                         "decoder.ff_dropout=0"],
    "token + word dropout": ["model.embed_dropout=0", "model.word_dropout=0.1",
                             "encoder.dropout=0.1", "decoder.dropout=0.1",
                             "encoder.dropout_unit=token", "decoder.dropout_unit=token",
                             "encoder.ff_dropout=0", "decoder.ff_dropout=0"],
    "none": ["model.embed_dropout=0", "encoder.dropout=0", "decoder.dropout=0",
             "encoder.ff_dropout=0", "decoder.ff_dropout=0"],
}  # fmt: skip
DROPOUT_ROUNDS = 3
TRAINING_HEAD = [
    "| preset | params | step s | tgt tok/s | src+tgt tok/s | GFLOP/step | MFU | padding | peak RSS MiB |",
    "|---|---|---|---|---|---|---|---|---|",
]


def training_section(
    presets: list[str], template: WorkerJob, compiled_too: bool, profile_out: Path, ceiling: float
) -> tuple[list[str], list[str]]:
    """The throughput table (one worker per preset, `template`'s threads, device, counts and
    batch size; plus a `torch.compile` row each when `compiled_too`), and the profile summary
    lines (when default_cpu ran: it is profiled into `profile_out`)."""
    lines, results = list(TRAINING_HEAD), {}
    for preset in presets:
        profile = str(profile_out) if preset == "default_cpu" else None
        results[preset] = run_worker(replace(template, preset=preset, profile=profile))
        lines.append(training_row(preset, results[preset], ceiling))
        if compiled_too:
            compiled = run_worker(replace(template, preset=preset, compiled=True))
            lines.append(training_row(f"{preset} + torch.compile", compiled, ceiling))
    notes = [result["batches"] for result in results.values() if "batches" in result]
    if notes:
        lines += ["", f"Batches: the first of epoch 0 ({notes[0]})."]
    top = results.get("default_cpu", {}).get("profile_top")
    return lines, profile_lines(top, profile_out) if top else []


def profile_lines(top: list[str], profile_out: Path) -> list[str]:
    return [
        f"One `default_cpu` training step: [{profile_out}]({profile_out}).",
        "Top operators by self CPU time: " + ", ".join(top) + ".",
    ]


def training_row(preset: str, result: dict[str, Any], ceiling: float) -> str:
    if "error" in result:
        return f"| {preset} | failed: {result['error']} |" + " |" * 7
    cells = [
        preset,
        f"{result['parameters']:,}",
        f"{result['step_seconds']:.3f}",
        f"{result['tgt_tokens_per_s']:,.0f}",
        f"{result['all_tokens_per_s']:,.0f}",
        f"{result['gflops_per_step']:.1f}",
        f"{100 * result['gflops_per_s'] / ceiling:.1f}%",
        f"{100 * result['padding']:.1f}%",
        f"{result['peak_rss_mib']:,.0f}",
    ]
    return "| " + " | ".join(cells) + " |"


def bound_section(presets: list[str], template: WorkerJob, ceiling: float) -> list[str]:
    """Per preset (one worker each): one update's matrix products in it and alone, and the
    MFU the update would reach were everything else free (`tools.bench.matmul_bound`)."""
    lines = list(BOUND_HEAD)
    for preset in presets:
        result = run_worker(replace(template, preset=preset, profile=None, matmul_bound=True))
        if "error" in result:
            lines.append(f"| {preset} | failed: {result['error']} |" + " |" * 8)
        else:
            lines.append(bound_row(preset, result["matmul_bound"], ceiling))
    return lines + [
        "",
        "Products: every aten mm, addmm, bmm and baddbmm of one update (the "
        "first measured batch), forward and backward, each timed again alone on "
        "operands of the same sizes and strides (median of the reps). Bound MFU: "
        "the analytic FLOPs over the products' seconds alone and the ceiling.",
    ]


def dropout_section(template: WorkerJob, ceiling: float) -> list[str]:
    """default_cpu's update time per dropout variant: the median over alternating rounds."""
    seconds: dict[str, list[float]] = {name: [] for name in DROPOUT_VARIANTS}
    rows: dict[str, dict[str, Any]] = {}
    for _ in range(DROPOUT_ROUNDS):
        for name, overrides in DROPOUT_VARIANTS.items():
            job = replace(template, preset="default_cpu", overrides=overrides, profile=None)
            result = run_worker(job)
            if "error" in result:
                return [f"Dropout variant {name!r} failed: {result['error']}"]
            seconds[name].append(result["step_seconds"])
            rows[name] = result
    return dropout_table(seconds, rows, ceiling)


def dropout_table(
    seconds: dict[str, list[float]], rows: dict[str, dict[str, Any]], ceiling: float
) -> list[str]:
    """One row per variant: its median, every round, MFU, and the speed-up over every site."""
    every = statistics.median(seconds["every site"])
    lines = [
        "| dropout | overrides | step s (median of rounds) | rounds | MFU | vs every site |",
        "|---|---|---|---|---|---|",
    ]
    for name, overrides in DROPOUT_VARIANTS.items():
        median = statistics.median(seconds[name])
        mfu = rows[name]["gflops_per_step"] / median / ceiling
        shown = " ".join(overrides)
        rounds = ", ".join(f"{value:.3f}" for value in seconds[name])
        lines.append(
            f"| {name} | `{shown}` | {median:.3f} | {rounds} | {100 * mfu:.1f}% | "
            f"{every / median:.2f}× |"
        )
    return lines
