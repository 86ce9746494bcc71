"""The GPU section of the benchmark log (tools/bench/LOG.md): training throughput on one CUDA device.

For each preset, `data.max_tokens` and precision (bf16 autocast, what `trainer.device=cuda`
trains with, and float32 via `trainer.precision=fp32`) it measures the Trainer's own updates
with `training_speed.measure_training` (the first batches of epoch 0, warm-up, the median of
several timings): the update time, target and all tokens/s, the achieved training TFLOP/s
(the analytic FLOPs of `seq2seq/flops.py`), MFU and the peak GPU memory
(`torch.cuda.max_memory_allocated`).

MFU is the achieved FLOP/s over the GPU's dense bf16 tensor-core peak: `--peak-tflops`, or
the datasheet figure of `KNOWN_PEAKS` matched on the device name (dense, without the 2×
of structured sparsity). A float32 row uses the same bf16 denominator, so it reads as "the
share of what this GPU could do", not as float32 efficiency. An unknown GPU without
`--peak-tflops` gets no MFU.
"""

from __future__ import annotations

import datetime
import re
import tempfile
from pathlib import Path
from typing import Any

import torch

from seq2seq.runs.assemble import assemble_trainer
from seq2seq.runs.compose import preset_config
from tools.bench.entry import shown_command
from tools.bench.training_speed import StepCounts, measure_training

# Dense bf16 tensor-core peaks, TFLOP/s, from the vendors' datasheets; first match wins
# (so the PCIe H100 comes before the SXM one, and `A10` does not match A100 or A10G).
KNOWN_PEAKS: list[tuple[str, str, float]] = [
    (r"H100.*(PCIe|PCIE)", "H100 PCIe", 756.0),
    (r"H100.*NVL", "H100 NVL", 835.0),
    (r"H100|H800", "H100/H800 SXM", 989.0),
    (r"GH200", "GH200", 989.0),
    (r"H200.*NVL", "H200 NVL", 835.0),
    (r"H200", "H200 SXM", 989.0),
    (r"B200", "B200", 2250.0),
    (r"A100|A800", "A100/A800", 312.0),
    (r"L40S", "L40S", 362.0),
    (r"L40\b", "L40", 181.0),
    (r"\bL4\b", "L4", 121.0),
    (r"\bA10\b", "A10", 125.0),
    (r"MI300X", "MI300X", 1307.0),
]
PRESETS = ("default_cpu",)
PRECISIONS = ("bf16", "fp32")
# Fewer, longer-lived measurements than on the CPU: the first CUDA steps include kernel
# selection, and an epoch of Tatoeba at 8192 tokens holds about 30 batches.
GPU_COUNTS = StepCounts(warmup=5, reps=5, steps=4)
TABLE_HEAD = [
    "| preset | precision | max_tokens | params | update ms | tgt tok/s | src+tgt tok/s "
    "| TFLOP/s | MFU | peak memory MiB |",
    "|---|---|---|---|---|---|---|---|---|---|",
]


def known_peak(device_name: str) -> tuple[str, float] | None:
    """(the matched GPU, its dense bf16 peak in TFLOP/s) for a CUDA device name."""
    for pattern, label, tflops in KNOWN_PEAKS:
        if re.search(pattern, device_name):
            return label, tflops
    return None


def mfu(flops_per_s: float, peak_tflops: float | None) -> float | None:
    """Model FLOP utilisation: achieved FLOP/s over the peak (None without a peak)."""
    if not peak_tflops:
        return None
    return flops_per_s / (peak_tflops * 1e12)


def row(result: dict[str, Any], peak_tflops: float | None) -> str:
    """One table row from a measurement (or its error)."""
    first = f"| {result['preset']} | {result['precision']} | {result['max_tokens']} |"
    if "error" in result:
        return first + f" failed: {result['error']} |" + " |" * 6
    utilisation = mfu(result["gflops_per_s"] * 1e9, peak_tflops)
    cells = [
        f"{result['parameters']:,}",
        f"{1000 * result['step_seconds']:.1f}",
        f"{result['tgt_tokens_per_s']:,.0f}",
        f"{result['all_tokens_per_s']:,.0f}",
        f"{result['gflops_per_s'] / 1000:.2f}",
        "n/a" if utilisation is None else f"{100 * utilisation:.2f}%",
        f"{result['peak_memory_mib']:,.0f}",
    ]
    return first + " " + " | ".join(cells) + " |"


def entry_lines(
    gpu: dict[str, Any], results: list[dict[str, Any]], peak: tuple[str, float] | None
) -> list[str]:
    """The dated benchmark log (tools/bench/LOG.md) entry: the GPU, how MFU is counted, the table."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    peak_line = (
        f"- MFU against {peak[1]:g} TFLOP/s, the dense bf16 peak of {peak[0]}"
        if peak is not None
        else "- MFU: unknown GPU and no `--peak-tflops`, so none"
    )
    lines = [
        f"## {stamp} GPU: {gpu['name']}",
        "",
        f"- GPU: {gpu['name']} (compute capability {gpu['capability']}, "
        f"{gpu['memory_gib']:.0f} GiB), {gpu['count']} visible; CUDA {gpu['cuda']}",
        f"- torch {torch.__version__}; bf16 = `trainer.precision=bf16` (autocast, what `auto` "
        "trains with on CUDA), fp32 = `trainer.precision=fp32`",
        peak_line,
        f"- command: `{shown_command()}`",
        "",
        *TABLE_HEAD,
        *(row(result, peak[1] if peak else None) for result in results),
    ]
    note = next((r["batches"] for r in results if "batches" in r), None)
    if note:
        lines += ["", f"Batches: the first of epoch 0 ({note})."]
    return lines


def gpu_facts() -> dict[str, Any]:
    """Name, compute capability, memory, count and CUDA version of the first GPU."""
    properties = torch.cuda.get_device_properties(0)
    return {
        "name": torch.cuda.get_device_name(0),
        "capability": f"{properties.major}.{properties.minor}",
        "memory_gib": properties.total_memory / 2**30,
        "count": torch.cuda.device_count(),
        "cuda": torch.version.cuda,
    }


def measure(
    preset: str, precision: str, max_tokens: int | None, overrides: list[str] | None = None
) -> dict[str, Any]:
    """One row: the preset on cuda:0 at this precision and batch size (plus `overrides`)."""
    shown = {"preset": preset, "precision": precision, "max_tokens": max_tokens or "preset's"}
    extra = [f"trainer.precision={precision}", *(overrides or [])]
    cfg = preset_config(preset, 0, "cuda", max_tokens, extra=extra)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    try:
        with tempfile.TemporaryDirectory() as run_dir:
            trainer = assemble_trainer(cfg, Path(run_dir), observe=False)
            result = measure_training(trainer, GPU_COUNTS)
    except (ValueError, RuntimeError) as error:  # too few batches, out of memory
        return shown | {"error": str(error).splitlines()[0]}
    result["peak_memory_mib"] = torch.cuda.max_memory_allocated() / 2**20
    del trainer
    return shown | result


def measure_all(
    presets: list[str], max_tokens: list[int], overrides: list[str]
) -> list[dict[str, Any]]:
    """Every preset × batch size (0: the preset's) × precision, in that nesting."""
    return [
        measure(preset, precision, tokens or None, overrides)
        for preset in presets
        for tokens in max_tokens
        for precision in PRECISIONS
    ]
