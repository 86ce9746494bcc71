"""Whether two runs' training-loss curves agree: bf16 autocast against float32.

Both runs start from the same weights and read the same batches, but bf16 rounds every
matrix product's inputs to 8 significant bits (relative error ≤ 2⁻⁹ ≈ 0.2 %), so after a
few hundred updates the weights, and each batch's loss, have drifted apart: per-step losses
differ by the batch-to-batch noise, a few per cent on this model's small batches, even when
both runs learn equally well. A trailing moving average over `window` logged steps

    smooth(t) = (1/w) · Σ_{i=t-w+1..t} loss(i)

removes most of that noise and leaves the trend, which mixed precision should not change
(Micikevicius et al. 2018; Kalamkar et al. 2019 train bf16 to float32's curves): the
smoothed curves then typically agree within 1–2 %. The check is the largest relative gap
max_t |smooth_bf16(t) − smooth_fp32(t)| / smooth_fp32(t) over the steps both runs logged,
from the first full window on, against a threshold of 5 %. A real fault (an overflow or a
quantity that underflows in bf16, a loss left in bf16, a missing cast) shows as a NaN, a
plateau or a gap that grows with training, well beyond 5 % within a few hundred updates.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from seq2seq.runs.metrics_log import read_series

DEFAULT_WINDOW = 25
DEFAULT_THRESHOLD = 0.05
LOSS_TAG = "train/loss"
PREFIX = "gpu_compare_losses"  # what the one-line messages start with


def read_losses(run_dir: Path) -> dict[int, float]:
    """Step → `train/loss` of a run (`seq2seq.runs.metrics_log`); the lines skipped are
    named in one line on stderr. ValueError when no line can be read, OSError when the
    file cannot."""
    series = read_series(run_dir, LOSS_TAG)
    if series.skipped:
        print(f"{PREFIX}: {series.path}: {series.skipped_summary()}", file=sys.stderr)
    if not series.values:
        raise ValueError(f"{series.path}: no readable {LOSS_TAG} line")
    return series.values


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


def check(
    candidate_dir: Path,
    reference_dir: Path,
    window: int = DEFAULT_WINDOW,
    threshold: float = DEFAULT_THRESHOLD,
) -> int:
    """Print the comparison of two run folders; the exit code: 0 when the smoothed curves
    are within `threshold`, 1 above it (a NaN or infinity, too few shared steps), 2 for a
    missing file or one without a readable line."""
    try:
        candidate, reference = read_losses(candidate_dir), read_losses(reference_dir)
    except (OSError, ValueError) as error:
        print(f"{PREFIX}: cannot read the losses: {error}", file=sys.stderr)
        return 2
    try:
        worst, step = compare(candidate, reference, window)
    except ValueError as error:
        print(f"{PREFIX}: {error}", file=sys.stderr)
        return 1
    last = max(set(candidate) & set(reference))
    print(
        f"smoothed loss (moving average of {window} steps), {Path(candidate_dir).name} vs "
        f"{Path(reference_dir).name}: max relative difference {worst:.4f} at step {step} "
        f"(threshold {threshold}); final raw losses {candidate[last]:.4f} vs "
        f"{reference[last]:.4f} at step {last}"
    )
    if not worst <= threshold:
        print(f"{PREFIX}: FAILED: the curves differ by more than the threshold")
        return 1
    return 0
