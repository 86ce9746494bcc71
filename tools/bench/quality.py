"""Time to quality: the best valid BLEU a run had logged within budgets of minutes and of
training TFLOP, read from its TensorBoard events.

Minutes count from the first event of the run's TensorBoard file and depend on the machine;
TFLOP (`train/tflop`, the analytic FLOPs of every batch) do not.
"""

from __future__ import annotations

from pathlib import Path

from seq2seq.study.reading import best_within, read_scalars
from tools.bench.entry import shown_path

QUALITY_MINUTES = (5, 10, 20)
QUALITY_TFLOP = (10, 20, 40, 80, 120)  # training TFLOP budgets (issue: quality per compute)


def quality_section(run_dir: Path) -> list[str]:
    """Best valid BLEU logged within each budget of minutes and of training TFLOP."""
    scalars = read_scalars(run_dir)
    bleu = scalars.series.get("valid/bleu", [])
    if scalars.first_wall_time is None or not bleu:
        return [f"No `valid/bleu` in {shown_path(run_dir)}/tensorboard."]
    end_minutes = (max(wall for wall, _, _ in bleu) - scalars.first_wall_time) / 60
    lines = [f"Run `{shown_path(run_dir)}`: last validation at {end_minutes:.1f} min.", ""]
    lines += budget_table(
        "minutes", QUALITY_MINUTES, best_within(scalars, QUALITY_MINUTES, "minutes")
    )
    if "train/tflop" in scalars.series:
        reached = best_within(scalars, QUALITY_TFLOP, "tflop")
        lines += ["", *budget_table("TFLOP", QUALITY_TFLOP, reached)]
    else:
        lines += ["", "No `train/tflop` in the run (trained before TFLOP were counted)."]
    return lines


def budget_table(unit: str, budgets: tuple[float, ...], reached: list) -> list[str]:
    """`| budget | best valid BLEU so far | at step |` rows; — where the budget was not spent."""
    lines = [f"| {unit} | best valid BLEU so far | at step |", "|---|---|---|"]
    for budget, found in zip(budgets, reached, strict=True):
        if found is None:
            lines.append(f"| {budget:g} | — | — |")
        else:
            value, step, _ = found
            lines.append(f"| {budget:g} | {value:.2f} | {step} |")
    return lines
