"""A one-line status that updates in place: update, epoch, loss, lr, tokens/s, TFLOP,
the best valid value of the selected metric (`trainer.select_metric`), time left.

Off a terminal (a log file, CI) the same numbers go to the log, one line per update.
`MetricsFile` also appends every logged step to `<run_dir>/metrics.jsonl`, one JSON object
per line at full precision, so a run (and a resumed run, which appends to the same file) can
be compared step by step without TensorBoard.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

log = logging.getLogger(__name__)


ESTIMATE_AFTER = 20  # updates timed before saying how long the run will take here


class ProgressDisplay:
    """tqdm bar over optimiser updates on a terminal, log lines elsewhere: update, epoch,
    loss, lr, tokens/s, TFLOP so far, the best valid value of the selected metric so far
    (BLEU by default) and the time left.

    After its first `ESTIMATE_AFTER` updates it logs how long one update takes on this
    machine and so how long the update budget (`trainer.max_steps`) will take, or at which
    update the time budget (`trainer.max_minutes`) will stop the run.
    """

    def __init__(self, total_steps: int, max_minutes: float | None = None, enabled: bool = True):
        self.total_steps, self.max_minutes = total_steps, max_minutes
        self.active = enabled and sys.stderr.isatty()
        self.bar = tqdm(
            total=total_steps, unit="update", dynamic_ncols=True, disable=not self.active
        )
        self.start: tuple[int, float] | None = None  # (step, training seconds) when timing began
        self.seconds_per_update: float | None = None

    def advance(self, step: int, train_seconds: float) -> None:
        """An update was applied; `train_seconds` is the run's training time so far."""
        if self.start is None:
            self.start = (step, train_seconds)
        elif self.seconds_per_update is None and step - self.start[0] >= ESTIMATE_AFTER:
            self.seconds_per_update = (train_seconds - self.start[1]) / (step - self.start[0])
            log.info("%s", self.estimate(step, train_seconds))
        if self.active:
            self.bar.n = step
            self.bar.refresh()

    def estimate(self, step: int, train_seconds: float) -> str:
        """How long the rest of the run takes at the measured pace (validation not included)."""
        pace = self.seconds_per_update or 0.0
        left = max(0, self.total_steps - step)
        line = (
            f"{pace:.2f} s per update on this machine: the {left:,} updates left of "
            f"trainer.max_steps={self.total_steps:,} take about {left * pace / 60:.0f} min"
        )
        if self.max_minutes is not None and pace > 0:
            last = step + int(max(0.0, 60 * self.max_minutes - train_seconds) / pace)
            if last < self.total_steps:
                line += (
                    f"; trainer.max_minutes={self.max_minutes:g} will stop the run near "
                    f"update {last:,} (set trainer.max_minutes=null for the same model on "
                    f"every machine)"
                )
        return line + " (plus validation)"

    def minutes_left(self, step: int) -> float | None:
        if self.seconds_per_update is None:
            return None
        return max(0, self.total_steps - step) * self.seconds_per_update / 60

    def update(
        self, step: int, stats: dict[str, Any], best: tuple[str, float] | None = None
    ) -> None:
        """A log step: the numbers of `stats` (TensorBoard's names) on the bar or in the log;
        `best`: (the selected metric's label, its best valid value), None before the first
        validation."""
        if not self.active:
            if stats:
                left = self.minutes_left(step)
                log.info(
                    "update %d/%d epoch %d loss %.3f lr %.2e %.0f tok/s %.2f TFLOP%s%s",
                    step, self.total_steps, stats.get("epoch", 0), stats["train/loss"],
                    stats["train/lr"], stats["train/tokens_per_sec"], stats.get("train/tflop", 0.0),
                    f" best valid {best[0]} {best[1]:.2f}" if best is not None else "",
                    f" ~{left:.0f} min left" if left is not None else "",
                )  # fmt: skip
            return
        self.bar.n = step
        if stats:
            postfix = {
                "epoch": stats.get("epoch", 0),
                "loss": f"{stats['train/loss']:.3f}",
                "lr": f"{stats['train/lr']:.2e}",
                "tok_s": f"{stats['train/tokens_per_sec']:.0f}",
                "TFLOP": f"{stats.get('train/tflop', 0.0):.1f}",
            }
            if best is not None:
                postfix[best[0]] = f"{best[1]:.2f}"
            self.bar.set_postfix(postfix, refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()


class MetricsFile:
    """Appends `{"step": N, "train/loss": ..., ...}` lines to `metrics.jsonl`; a no-op when
    disabled (ranks other than 0). Each line is flushed as it is written, so a process
    killed right after a step still leaves that step's line."""

    NAME = "metrics.jsonl"

    def __init__(self, run_dir: Path, enabled: bool = True):
        self.path = Path(run_dir) / self.NAME
        self.enabled = enabled

    def write(self, step: int, stats: dict[str, Any]) -> None:
        if not self.enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"step": step, **stats}, allow_nan=True)
        with self.path.open("a", encoding="utf-8") as stream:
            stream.write(line + "\n")
