"""Compare the training-loss curves of two runs (bf16 autocast against float32).

    python scripts/gpu_compare_losses.py RUN_BF16 RUN_FP32 [--window 25] [--threshold 0.05]

Reads each run folder's `metrics.jsonl` (step → `train/loss`; a step logged twice, before
a stop and after the resume, keeps its later value), smooths each curve with a trailing
moving average of `--window` logged steps, and prints the largest relative difference
|bf16 − fp32| / fp32 of the smoothed curves over the steps both runs logged, from the first
full window on. Exit code 0 when it is at most `--threshold`, 1 above it (or when a curve
holds a NaN or infinity, or the runs share too few steps), 2 for a missing file or one
without a readable line. A line that is not a JSON object with an integer `step` and a
numeric `train/loss` (a killed run's half-written last line, a null loss, bytes that are
not text) is skipped, and the skipped lines are named, with their numbers, in one line.

Why smooth, and why 5 %. The two runs start from the same weights and read the same
batches, but bf16 rounds every matrix product's inputs to 8 significant bits (relative
error ≤ 2⁻⁹ ≈ 0.2 %), so after a few hundred updates the weights, and each batch's loss, have
drifted apart: per-step losses differ by the batch-to-batch noise, a few per cent on this
model's small batches, even when both runs learn equally well. A moving average over 25
updates removes most of that noise and leaves the trend, which mixed precision should not
change (Micikevicius et al. 2018; Kalamkar et al. 2019 train bf16 to float32's curves):
the smoothed curves then typically agree within 1–2 %. A real fault (an overflow or a
quantity that underflows in bf16, a loss left in bf16, a missing cast) shows as a NaN, a
plateau or a gap that grows with training, well beyond 5 % within a few hundred updates.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

DEFAULT_WINDOW = 25
DEFAULT_THRESHOLD = 0.05
SHOWN_SKIPS = 5  # skipped lines named in the warning; the others are counted


def read_losses(run_dir: Path) -> dict[int, float]:
    """Step → `train/loss` from `run_dir/metrics.jsonl` (the later of a repeated step).
    Lines that cannot be read are skipped and named in one line on stderr; ValueError when
    no line can be read, OSError when the file cannot."""
    losses: dict[int, float] = {}
    skipped: list[str] = []
    path = Path(run_dir) / "metrics.jsonl"
    for number, line in enumerate(path.read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        try:
            step, loss = parse_line(line)
        except ValueError as error:
            skipped.append(f"line {number} ({error})")
            continue
        losses[step] = loss
    if skipped:
        print(f"gpu_compare_losses: {path}: {skipped_lines(skipped)}", file=sys.stderr)
    if not losses:
        raise ValueError(f"{path}: no readable train/loss line")
    return losses


def parse_line(line: bytes) -> tuple[int, float]:
    """(step, loss) of one metrics.jsonl line; ValueError saying what is wrong with it."""
    try:
        row = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"not valid JSON: {error.msg}") from None
    if not isinstance(row, dict):
        raise ValueError(f"not a JSON object: {type(row).__name__}")
    step, loss = row.get("step"), row.get("train/loss")
    if isinstance(step, bool) or not isinstance(step, int):
        raise ValueError(f"step must be an integer, got {step!r}")
    if "train/loss" not in row:
        raise ValueError("no train/loss")
    if isinstance(loss, bool) or not isinstance(loss, (int, float)):
        raise ValueError(f"train/loss must be a number, got {loss!r}")
    return step, float(loss)


def skipped_lines(skipped: list[str]) -> str:
    """`skipped 2 unreadable lines: line 4 (...), line 9 (...)`, the first few named."""
    count = len(skipped)
    named = ", ".join(skipped[:SHOWN_SKIPS])
    more = f" and {count - SHOWN_SKIPS} more" if count > SHOWN_SKIPS else ""
    return f"skipped {count} unreadable line{'s' if count > 1 else ''}: {named}{more}"


def smoothed(losses: dict[int, float], window: int) -> dict[int, float]:
    """Trailing moving average over `window` logged steps, for each step that has a full
    window behind it (the first `window - 1` steps have none)."""
    steps = sorted(losses)
    values = [losses[step] for step in steps]
    out: dict[int, float] = {}
    for index in range(window - 1, len(values)):
        out[steps[index]] = sum(values[index - window + 1 : index + 1]) / window
    return out


def compare(
    candidate: dict[int, float], reference: dict[int, float], window: int = DEFAULT_WINDOW
) -> tuple[float, int]:
    """(largest relative difference of the smoothed curves, the step where it is), over the
    steps both logged; `inf` when either curve is not finite. ValueError when the runs share
    fewer than `window` steps."""
    shared = sorted(set(candidate) & set(reference))
    if len(shared) < window:
        raise ValueError(
            f"the runs share {len(shared)} logged steps, fewer than the window {window}"
        )
    for losses in (candidate, reference):
        bad = [step for step in shared if not math.isfinite(losses[step])]
        if bad:
            return math.inf, bad[0]
    smooth_candidate = smoothed({s: candidate[s] for s in shared}, window)
    smooth_reference = smoothed({s: reference[s] for s in shared}, window)
    worst, worst_step = 0.0, shared[window - 1]
    for step, expected in smooth_reference.items():
        difference = abs(smooth_candidate[step] - expected) / max(abs(expected), 1e-12)
        if difference > worst:
            worst, worst_step = difference, step
    return worst, worst_step


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("candidate", type=Path, help="run folder of the bf16 run")
    parser.add_argument("reference", type=Path, help="run folder of the float32 run")
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW, help="logged steps averaged")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, help="largest "
                        "relative difference accepted (default 0.05)")  # fmt: skip
    args = parser.parse_args(argv)
    try:
        candidate, reference = read_losses(args.candidate), read_losses(args.reference)
    except (OSError, ValueError) as error:
        print(f"gpu_compare_losses: cannot read the losses: {error}", file=sys.stderr)
        return 2
    try:
        worst, step = compare(candidate, reference, args.window)
    except ValueError as error:
        print(f"gpu_compare_losses: {error}", file=sys.stderr)
        return 1
    last = max(set(candidate) & set(reference))
    print(
        f"smoothed loss (moving average of {args.window} steps), {args.candidate.name} vs "
        f"{args.reference.name}: max relative difference {worst:.4f} at step {step} "
        f"(threshold {args.threshold}); final raw losses {candidate[last]:.4f} vs "
        f"{reference[last]:.4f} at step {last}"
    )
    if not worst <= args.threshold:
        print("gpu_compare_losses: FAILED: the curves differ by more than the threshold")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
