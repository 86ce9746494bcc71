"""Two levers of an update's element-wise time, measured against each other in one run.

    python scripts/bench_update_levers.py --presets default_cpu gru_additive --threads 2 --rounds 5

- the loss: the closed-form label-smoothed cross-entropy of `seq2seq.training.label_smoothing`
  (`SmoothedTerms`) against the log-softmax/gather/mean formulation it replaced, whose
  gradient autograd assembles (kept here as `autograd_smoothed`);
- `trainer.keep_freed_memory` on and off (glibc keeps freed blocks for the next update).

Each variant runs in a fresh process (the malloc setting is the process's), the four in turn
for every round, so a slow minute of a shared machine hits every variant alike; each process
times 5 reps of 10 updates after 5 untimed ones (`tools.bench.training_speed`) and reports
the median. The matmul ceiling is measured before and after the rounds. Prints one JSON line
per measurement, then a Markdown table of the medians over the rounds.
"""

from __future__ import annotations

import _workshop  # noqa: F401  (puts the repository root, and tools/, on sys.path)

# isort: split

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

VARIANTS = (("autograd", False), ("closed_form", False), ("autograd", True), ("closed_form", True))


def autograd_smoothed(logits, targets, smoothing, reduce):
    """The loss before `SmoothedTerms`: log p materialised, its gradient left to autograd."""
    import torch.nn.functional as F

    from seq2seq.special_tokens import PAD_ID

    log_probs = F.log_softmax(logits.float(), dim=-1)  # (batch, tgt_len, vocab)
    real = targets != PAD_ID
    nll = reduce(-log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1).masked_fill(~real, 0.0))
    if smoothing == 0.0:
        return nll, nll
    uniform = reduce(-log_probs.mean(dim=-1).masked_fill(~real, 0.0))
    return (1.0 - smoothing) * nll + smoothing * uniform, nll


def measure(preset: str, threads: int, loss: str, keep: bool) -> dict:
    """One variant's median seconds per update and GFLOP/s, in this process."""
    from seq2seq.runs.assemble import assemble_trainer
    from seq2seq.runs.compose import preset_config
    from seq2seq.training import label_smoothing as loss_module
    from tools.bench.training_speed import StepCounts, measure_training

    if loss == "autograd":
        loss_module._smoothed = autograd_smoothed
    overrides = [f"trainer.keep_freed_memory={str(keep).lower()}"]
    cfg = preset_config(preset, threads, "cpu", None, False, overrides)
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = assemble_trainer(cfg, Path(run_dir), observe=False)
        found = measure_training(trainer, StepCounts(warmup=5, reps=5, steps=10))
    return {"preset": preset, "loss": loss, "keep_freed_memory": keep,
            "step_s": found["step_seconds"], "gflops_per_s": found["gflops_per_s"]}  # fmt: skip


def ceiling(threads: int) -> float:
    import torch

    from seq2seq.lab.matmul_ceiling import ceiling_section

    torch.set_num_threads(threads)
    return ceiling_section(20, torch.device("cpu"))[1]


def in_fresh_process(threads: int, *arguments: str) -> dict | float:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    command = [sys.executable, __file__, "--worker", *arguments]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(rows: list[dict], best_ceiling: float) -> list[str]:
    """Median step seconds and MFU per (preset, variant), and the speed-up over the first."""
    lines = ["| preset | loss | keep_freed_memory | step s (median) | MFU | speed-up |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for preset in dict.fromkeys(row["preset"] for row in rows):
        first = None
        for loss, keep in VARIANTS:
            mine = [r for r in rows if (r["preset"], r["loss"], r["keep_freed_memory"]) == (preset, loss, keep)]  # fmt: skip
            step = statistics.median(r["step_s"] for r in mine)
            mfu = statistics.median(r["gflops_per_s"] for r in mine) / best_ceiling
            first = first or step
            lines.append(f"| {preset} | {loss} | {keep} | {step:.3f} | {100 * mfu:.1f}% | {first / step:.2f}× |")  # fmt: skip
    return lines


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        kind, *rest = sys.argv[2:]
        found = ceiling(int(rest[0])) if kind == "ceiling" else measure(rest[0], int(rest[1]), rest[2], rest[3] == "1")  # fmt: skip
        print(json.dumps(found))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", nargs="+", default=["default_cpu", "gru_additive"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ceilings = [in_fresh_process(args.threads, "ceiling", str(args.threads))]
    rows = []
    for preset in args.presets:
        for _ in range(args.rounds):
            for loss, keep in VARIANTS:
                rows.append(in_fresh_process(args.threads, "measure", preset, str(args.threads), loss, str(int(keep))))  # fmt: skip
                print(json.dumps(rows[-1]), flush=True)
    ceilings.append(in_fresh_process(args.threads, "ceiling", str(args.threads)))
    print(
        f"\nfloat32 matmul ceiling: {ceilings[0]:.1f} before, {ceilings[1]:.1f} after (GFLOP/s)\n"
    )
    print("\n".join(table(rows, max(ceilings))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
