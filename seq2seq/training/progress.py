"""Where a run stands, and how it shows: the progress saved in every checkpoint, the running
sums of the training log, the status line and `metrics.jsonl`.

`Progress` is the run's position (update, epoch, data position), its best validation and
the validation history (`seq2seq.training.selection`), its clock, skipped updates and FLOPs;
each checkpoint saves it as a dict, and `Progress.from_payload` reads it back, migrating a
checkpoint written before `trainer.select_metric` (its `best_bleu`).

`LogWindow` sums the training numbers between two log lines on the device, one host sync
per log line and none per step. `ProgressDisplay` is a progress bar that updates in place,
in a terminal or a notebook (`seq2seq.progress_bars`): update, epoch, loss, lr, tokens/s,
TFLOP, the best valid value of the selected metric (`trainer.select_metric`), time left;
where no bar is drawn (a log file, CI, `logging.progress_bar=false`, `SEQ2SEQ_PROGRESS=0`)
the same numbers go to the log, one line per logged update. `MetricsFile` also appends every logged step to
`<run_dir>/metrics.jsonl`, one JSON object per line at full precision, so a run (and a
resumed run, which appends to the same file) can be compared step by step without
TensorBoard.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from seq2seq.checkpoint import CheckpointError
from seq2seq.data.batching import Batch
from seq2seq.metrics.valid_loss import perplexity
from seq2seq.progress_bars import bars_wanted, progress_bar
from seq2seq.training.objectives import LossParts

log = logging.getLogger(__name__)


@dataclass
class Progress:
    """Where the run stands; saved in every checkpoint."""

    step: int = 0  # optimiser updates done
    epoch: int = 0
    position: int = 0  # batches of this epoch already consumed
    best_metric: str = "bleu"  # trainer.select_metric of the run
    best_value: float | None = None  # its best valid value; None before the first validation
    best_step: int = 0
    best_scores: dict[str, float] = field(default_factory=dict)  # every metric at best_step
    bad_validations: int = 0  # validations since the best, for trainer.patience
    history: list[list[float]] = field(
        default_factory=list
    )  # [update, selected value] of each validation
    validated_step: int = 0  # step of the latest validation
    train_seconds: float = 0.0
    stopped_early: bool = False
    skipped_steps: int = 0  # updates skipped for a non-finite loss or gradient norm
    nonfinite_streak: int = 0  # of which in a row, up to now
    train_flops: int = 0  # analytic training FLOPs of every batch trained on, all ranks

    @property
    def train_tflop(self) -> float:
        return self.train_flops / 1e12

    @classmethod
    def from_payload(cls, values: dict[str, Any]) -> Progress:
        """The progress a checkpoint saved. One written before `trainer.select_metric`
        holds `best_bleu` (-1 before the first validation) and selected on BLEU."""
        values = dict(values)
        if "best_bleu" in values:
            best = float(values.pop("best_bleu"))
            values.setdefault("best_metric", "bleu")
            values.setdefault("best_value", best if best >= 0 else None)
            values.setdefault("best_scores", {"bleu": best} if best >= 0 else {})
        values["history"] = checked_history(values.get("history", []))
        return cls(**values)


def checked_history(value: Any) -> list[list[float]]:
    """A checkpoint's validation history: a list of [update, value] pairs with finite
    numbers in update order; CheckpointError naming `progress.history` otherwise."""

    def is_number(x: Any) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)

    pairs = value if isinstance(value, list) else None
    if pairs is None or not all(
        isinstance(pair, (list, tuple)) and len(pair) == 2 and all(map(is_number, pair))
        for pair in pairs
    ):
        raise CheckpointError("progress.history: must be a list of [update, value] number pairs")
    steps = [pair[0] for pair in pairs]
    if steps != sorted(steps):
        raise CheckpointError("progress.history: the updates must be in increasing order")
    return [[int(step), float(score)] for step, score in pairs]


@dataclass
class _Sums:
    """Loss terms and token counts summed over micro-batches; None: nothing summed yet."""

    loss: torch.Tensor | None = None
    nll: torch.Tensor | None = None
    align: torch.Tensor | None = None  # guided alignment: L_align summed
    align_rows: torch.Tensor | None = None  # and its linked rows
    reward: torch.Tensor | None = None  # REINFORCE: R summed
    sentences: int = 0  # and its sentences
    baseline: torch.Tensor | None = None  # REINFORCE: b at the latest batch
    tgt_tokens: int = 0
    src_tokens: int = 0

    def add(self, parts: LossParts, batch: Batch) -> None:
        """One micro-batch."""
        self.loss = _total(self.loss, parts.loss)
        self.nll = _total(self.nll, parts.nll)
        self.tgt_tokens += batch.num_tgt_tokens
        self.src_tokens += batch.num_src_tokens
        if parts.align is not None:
            self.align = _total(self.align, parts.align)
            self.align_rows = _total(self.align_rows, parts.align_rows)
        if parts.rewards is not None:
            self.reward = _total(self.reward, parts.rewards.sum())
            self.sentences += parts.rewards.numel()
            self.baseline = parts.baseline.detach().clone()

    def merge(self, update: _Sums) -> None:
        """The sums of an applied update join these."""
        self.loss = _total(self.loss, update.loss)
        self.nll = _total(self.nll, update.nll)
        if update.align is not None:
            self.align = _total(self.align, update.align)
            self.align_rows = _total(self.align_rows, update.align_rows)
        if update.reward is not None:
            self.reward = _total(self.reward, update.reward)
            self.sentences += update.sentences
            self.baseline = update.baseline
        self.tgt_tokens += update.tgt_tokens
        self.src_tokens += update.src_tokens


def _total(total: torch.Tensor | None, value: torch.Tensor) -> torch.Tensor:
    """`total + value`, or `value` when nothing is summed yet."""
    return value if total is None else total + value


class LogWindow:
    """Running sums between two log lines; one host sync per log line, none per step.

    The micro-batches of the update in progress are summed apart (`in_progress`) and join the
    window only once their update is applied (`commit`); a skipped update's are dropped."""

    def __init__(self):
        self.micro_batches = 0
        self.grad_norm = torch.zeros(())
        self.sums, self.in_progress = _Sums(), _Sums()
        self.started = time.perf_counter()

    def add(self, parts: LossParts, batch: Batch) -> None:
        """One micro-batch of the update in progress."""
        self.in_progress.add(parts, batch)
        self.micro_batches += 1

    def commit(self, grad_norm: torch.Tensor) -> None:
        """The update was applied: its sums join the window."""
        self.grad_norm = grad_norm
        self.sums.merge(self.in_progress)
        self.in_progress = _Sums()

    def discard(self) -> None:
        """The update was skipped: forget its sums."""
        self.in_progress = _Sums()

    def flush(self, lr: float) -> dict[str, float]:
        """The window's numbers by their TensorBoard names; the window starts again."""
        seconds = max(time.perf_counter() - self.started, 1e-9)
        sums = self.sums
        tokens = max(sums.tgt_tokens, 1)
        loss, nll = sums.loss.item() / tokens, sums.nll.item() / tokens
        stats = {
            "train/loss": loss,
            "train/ppl": perplexity(nll),
            "train/lr": lr,
            "train/grad_norm": float(self.grad_norm),
            "train/tokens_per_sec": sums.tgt_tokens / seconds,
        }
        if sums.align is not None:  # mean L_align per linked target position
            stats["train/align_loss"] = sums.align.item() / max(sums.align_rows.item(), 1.0)
        if sums.reward is not None:  # mean R per sentence, and b at the last update
            stats["train/reinforce_reward"] = sums.reward.item() / max(sums.sentences, 1)
            stats["train/reinforce_baseline"] = float(sums.baseline)
        self.sums, self.started = _Sums(), time.perf_counter()
        return stats


ESTIMATE_AFTER = 20  # updates timed before saying how long the run will take here


class ProgressDisplay:
    """A progress bar over optimiser updates in a terminal or a notebook, log lines
    elsewhere (`seq2seq.progress_bars.bars_wanted`; `enabled`: `logging.progress_bar` on
    the main rank): update, epoch, loss, lr, tokens/s, TFLOP so far, the best valid value of
    the selected metric so far (BLEU by default) and the time left. The bar's time left is
    its own: the updates left at the pace of this session's updates (a resumed run counts
    from where it resumed), validations included.

    After its first `ESTIMATE_AFTER` updates it logs how long one update takes on this
    machine and so how long the update budget (`trainer.max_steps`) will take, or at which
    update the time budget (`trainer.max_minutes`) will stop the run.
    """

    def __init__(self, total_steps: int, max_minutes: float | None = None, enabled: bool = True):
        self.total_steps, self.max_minutes = total_steps, max_minutes
        self.active = bars_wanted(enabled)
        self.bar: Any = None  # made at the first step shown: it starts from there
        self.start: tuple[int, float] | None = None  # (step, training seconds) when timing began
        self.seconds_per_update: float | None = None

    def _bar_at(self, step: int) -> Any:
        """The bar, moved to `step`; made at the first call, starting at `step` so that a
        resumed run's pace (and so the time left) counts only the updates of this session."""
        if self.bar is None:
            self.bar = progress_bar(
                self.total_steps, unit="update", initial=step, dynamic_ncols=True
            )
        elif step > self.bar.n:
            self.bar.update(step - self.bar.n)
        return self.bar

    def advance(self, step: int, train_seconds: float) -> None:
        """An update was applied; `train_seconds` is the run's training time so far."""
        if self.start is None:
            self.start = (step, train_seconds)
        elif self.seconds_per_update is None and step - self.start[0] >= ESTIMATE_AFTER:
            self.seconds_per_update = (train_seconds - self.start[1]) / (step - self.start[0])
            log.info("%s", self.estimate(step, train_seconds))
        if self.active:
            self._bar_at(step)

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
        bar = self._bar_at(step)
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
            bar.set_postfix(postfix, refresh=False)
        bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
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
