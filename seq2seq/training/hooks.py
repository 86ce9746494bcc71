"""Validation hooks: what the trainer runs after each validation, and how a run gets them.

A hook is any callable `hook(context)`; it gets the model, where it runs, where to log and
the step, and nothing else of the trainer. What a hook needs beyond that (tokenisers,
sentences, a title) it is given when it is made.

The hooks are a registry group ("hook"): a registered class makes the hooks of a run with
its classmethod `for_run(cfg, data, earlier) -> list[hook]` (none when the run does not
suit it: no attention, no gold set, ...), where `cfg` is the run's config as plain data
(converted once where the run is assembled, `seq2seq.runs.assemble`; enums as their names)
and `earlier` holds the hooks made so far, in registration order, so a hook may build on
one registered before it. `validation_hooks`
asks every registered class; a user's plugin registers its own the same way. The built-in
ones, in the order they run: `aer` (`seq2seq.align.aer_hook`: AER on the valid gold pairs,
the head chosen) and `alignment` (`seq2seq.visualise.alignment_images`: images, alignment accuracy).
This module imports neither: both sit above training, and the registry loads them.

A hook may report validation metrics with `context.report(name, value)`, and lists the
names it reports in its `produces` attribute (a tuple; absent means none): a registered
metric that a hook produces (`seq2seq.metrics.base.HookMetric`) can be selected with
`trainer.select_metric`, like BLEU or the loss.

A hook may return entries for the checkpoints (a dict whose keys are among
`seq2seq.checkpoint.HOOK_KEYS`, values plain data), or None. The trainer runs the hooks
before it saves, so `best.pt` holds what the hooks returned at the validation that made it
and `last.pt` the latest; a resume keeps them until a hook returns new ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from seq2seq import registry
from seq2seq.models.model import Seq2Seq
from seq2seq.training.logger import RunLogger


@dataclass(frozen=True)
class ValidationContext:
    """The state a validation hook may read, at one validation, and the metrics the hooks
    report there."""

    model: Seq2Seq  # in eval mode is the hook's business: it is called after validation
    device: torch.device
    logger: RunLogger
    step: int
    metrics: dict[str, float] = field(default_factory=dict)  # name -> value, by `report`

    def report(self, name: str, value: float) -> None:
        """Report the value of the validation metric `name` at this validation."""
        self.metrics[name] = float(value)


# hook(context) -> checkpoint entries (e.g. {"alignment_choice": {...}}) or None
ValidationHook = Callable[[ValidationContext], Mapping[str, Any] | None]


def validation_hooks(cfg: Mapping[str, Any], data: Any) -> list[ValidationHook]:
    """The hooks of a run (its config as plain data and its prepared data): those each
    registered hook class makes for it, in registration order."""
    hooks: list[ValidationHook] = []
    for component in registry.components("hook"):
        hooks.extend(component.builder.for_run(cfg, data, tuple(hooks)))
    return hooks


def produced_metrics(hooks: Iterable[ValidationHook]) -> set[str]:
    """The names of the metrics the hooks report (their `produces`)."""
    return {name for hook in hooks for name in getattr(hook, "produces", ())}
