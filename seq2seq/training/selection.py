"""Checkpoint selection: which validation is the best so far, and when a run stops early.

`trainer.select_metric` (default `bleu`) names a registered validation metric
(`seq2seq.metrics`). At each validation its value, compared in its direction,

* decides `best.pt`: a strictly better value than the best so far (a tie is no progress);
* counts toward early stopping: `trainer.patience` validations in a row without a better
  value stop the run (0: never);
* joins the validation history, which the convergence rule reads
  (`seq2seq.training.convergence`): the run stops the first time the gain over its last
  `trainer.converged_fraction` of updates, once that part holds at least
  `trainer.converged_validations` validations, is under `trainer.converged_gain` (0: never).

The best value, its step, every metric at that validation, the patience count and the
history live in the run's `Progress`, saved in each checkpoint, so a resume goes on exactly;
a checkpoint written before the choice existed resumes as one that selected on BLEU. The
translation and loss metrics come from the trainer's validation, the others from the
validation hooks that report them (`seq2seq.training.hooks`, e.g. AER on a gold set).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from seq2seq.checkpoint import CheckpointError
from seq2seq.config.build import ConfigError
from seq2seq.config.training_settings import TrainerSettings
from seq2seq.metrics.base import HOOK, Metric, metric
from seq2seq.training.convergence import recent_gain, validations_in_window
from seq2seq.training.hooks import ValidationHook, produced_metrics
from seq2seq.training.progress import Progress

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Selection:
    """The selected metric and the rules that stop a run early (module docstring)."""

    metric: Metric
    patience: int  # trainer.patience
    converged_gain: float  # trainer.converged_*
    converged_fraction: float
    converged_validations: int

    @classmethod
    def from_settings(cls, settings: TrainerSettings) -> Selection:
        """The run's selection; ConfigError listing the registered metrics for an unknown
        `trainer.select_metric`."""
        try:
            selected = metric(settings.select_metric)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        return cls(selected, settings.patience, settings.converged_gain,
                   settings.converged_fraction, settings.converged_validations)  # fmt: skip

    @property
    def name(self) -> str:
        return self.metric.name

    def value(self, metrics: dict[str, float], step: int) -> float:
        """The selected metric's value among a validation's metrics; ConfigError when no
        part of the validation produced it."""
        if self.name not in metrics:
            raise ConfigError(
                f"trainer.select_metric={self.name}: validation at step {step} gave no value "
                f"for it (it gave {', '.join(metrics) or 'nothing'})"
            )
        return metrics[self.name]

    def judge(self, progress: Progress, value: float, metrics: dict[str, float], step: int) -> bool:
        """Record the validation at `step` in `progress` (history, best, patience, early
        stop); whether it is the best so far."""
        self._check_converged(progress, value, step)
        if self.metric.improves(value, progress.best_value):
            progress.best_value, progress.best_step = value, step
            progress.best_scores = dict(metrics)
            progress.bad_validations = 0
            return True
        progress.bad_validations += 1
        if self.patience > 0 and progress.bad_validations >= self.patience:
            progress.stopped_early = True
        return False

    def _check_converged(self, progress: Progress, value: float, step: int) -> None:
        progress.history.append([step, value])
        gain = self.converged_gain_of(progress.history)
        if gain is not None:
            progress.stopped_early = True
            log.info(
                "step %d: converged: %s gained %.3f (< trainer.converged_gain %g) over the "
                "last %g of the updates; stopping", step, self.name, gain,
                self.converged_gain, self.converged_fraction,
            )  # fmt: skip

    def converged_gain_of(self, history: list[list[float]]) -> float | None:
        """The gain of `history` when the convergence rule judges it converged, else None
        (the rule off, too few validations in the window, or a gain at or above the
        threshold)."""
        if self.converged_gain <= 0:
            return None
        if validations_in_window(history, self.converged_fraction) < self.converged_validations:
            return None
        gain = recent_gain(history, self.converged_fraction, self.metric.higher_is_better)
        return gain if gain is not None and gain < self.converged_gain else None

    def resumed(self, saved: dict[str, Any]) -> Progress:
        """A checkpoint's progress, judged again by the rules the run resumes with.

        CheckpointError when it selected on another metric (its best value and patience
        count are that metric's). A run that had stopped by the convergence rule trains on
        under a stricter rule (more validations in the window, a smaller gain, the rule
        off), exactly as if that rule had held from its start, since the rule only reads
        the validations; as a run stopped by `trainer.max_steps` goes on under a higher
        cap. A run whose `trainer.patience`, as it resumes, is used up stays stopped."""
        progress = Progress.from_payload(saved)
        if progress.best_metric != self.name:
            raise CheckpointError(
                f"trainer.select_metric={self.name}, but the checkpoint's run "
                f"selected on {progress.best_metric} (its best.pt, best value and patience "
                f"count are {progress.best_metric}'s): resume with "
                f"trainer.select_metric={progress.best_metric}, or start a new run"
            )
        patience_used_up = self.patience > 0 and progress.bad_validations >= self.patience
        if progress.stopped_early and not patience_used_up:
            if self.converged_gain_of(progress.history) is None:
                progress.stopped_early = False
                log.info(
                    "resumed at step %d: stopped by the convergence rule, but not converged by "
                    "trainer.converged_gain=%g, converged_fraction=%g, converged_validations=%d: "
                    "training goes on", progress.step, self.converged_gain,
                    self.converged_fraction, self.converged_validations,
                )  # fmt: skip
        return progress

    def check_reported(self, hooks: Iterable[ValidationHook], on_main: bool) -> None:
        """ConfigError when the selected metric comes from a hook and none of the run's
        hooks reports it (no gold set for AER, no attention, hooks left out)."""
        if self.metric.source != HOOK:
            return
        produced = produced_metrics(hooks)
        if on_main and self.name not in produced:
            reported = ", ".join(sorted(produced)) or "no metric"
            raise ConfigError(
                f"trainer.select_metric={self.name}: no validation hook of this run "
                f"reports it (its hooks report {reported}); {_summary(self.metric)}"
            )

    def shown(self, value: float | None) -> str:
        """The value as the log shows it: the metric's decimals, `n/a` for None."""
        return _shown(self.metric, value)


def shown_metrics(metrics: dict[str, float]) -> str:
    """`loss 2.301 ppl 9.98 BLEU 3.32 chrF2 20.10 ...`: each registered metric by its
    label and decimals; a name the registry does not know as it is."""
    shown = []
    for name, value in metrics.items():
        try:
            known = metric(name)
        except ValueError:
            shown.append(f"{name} {value:.4g}")
            continue
        shown.append(f"{known.label} {_shown(known, value)}")
    return " ".join(shown)


def _shown(selected: Metric, value: float | None) -> str:
    return "n/a" if value is None else f"{value:.{selected.digits}f}"


def _summary(selected: Metric) -> str:
    """The first paragraph of a metric's docstring, on one line: what it is, who reports it."""
    doc = type(selected).__doc__ or ""
    return " ".join(doc.split("\n\n")[0].split()) or f"metric {selected.name}"
