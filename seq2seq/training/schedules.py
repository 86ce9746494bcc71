"""Learning-rate schedules with one interface: `step()` after every update and
`on_validation(score, higher_is_better)` after every validation, with the value of the
selected metric (`trainer.select_metric`, BLEU by default) and its direction; only the
plateau schedule uses it.

All of them scale the optimiser's configured learning rate (the peak) by a factor. Each
is registered (`seq2seq.registry`, group "schedule") with the dataclass of its config
node; a schedule that must know the length of training declares `needs_total_steps`, and
the trainer then passes `total_steps=trainer.max_steps`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from seq2seq import registry
from seq2seq.metrics.base import improves


class Schedule:
    """Base class: factor(step) times the base learning rate of each parameter group."""

    needs_total_steps = False  # True: constructed with total_steps (trainer.max_steps)

    def __init__(self, optimizer: torch.optim.Optimizer, warmup_steps: int = 0):
        if warmup_steps < 0:
            raise ValueError(f"schedule.warmup_steps must be >= 0, got {warmup_steps}")
        self.optimizer = optimizer
        self.warmup_steps = warmup_steps
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]
        self.num_updates = 0
        self._apply()

    def factor(self, step: int) -> float:
        raise NotImplementedError

    def _warmup(self, step: int) -> float:
        return min(1.0, step / self.warmup_steps) if self.warmup_steps else 1.0

    def _apply(self) -> None:
        factor = self.factor(max(self.num_updates, 1))
        for group, base_lr in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            group["lr"] = base_lr * factor

    def step(self) -> None:
        self.num_updates += 1
        self._apply()

    def on_validation(self, score: float, higher_is_better: bool = True) -> None:
        """Called with the selected metric's validation value and its direction."""

    @property
    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def state_dict(self) -> dict:
        return {"num_updates": self.num_updates}

    def load_state_dict(self, state: dict) -> None:
        self.num_updates = int(state["num_updates"])
        self._apply()


@dataclass
class InverseSqrtConfig:
    """`schedule=inverse_sqrt`: the keyword arguments of `InverseSqrtSchedule`."""

    _target_: str = "seq2seq.training.schedules.InverseSqrtSchedule"
    warmup_steps: int = 300


@registry.register("schedule", "inverse_sqrt", schema=InverseSqrtConfig)
class InverseSqrtSchedule(Schedule):
    """Linear warm-up, then decay with the inverse square root of the step
    (Vaswani et al. 2017 eq. 3, scaled so that the peak is the configured lr):
    factor(s) = min(s / w, √(w / s))."""

    def __init__(self, optimizer: torch.optim.Optimizer, warmup_steps: int = 300):
        super().__init__(optimizer, warmup_steps)

    def factor(self, step: int) -> float:
        if self.warmup_steps == 0:
            return 1.0 / math.sqrt(step)
        return min(step / self.warmup_steps, math.sqrt(self.warmup_steps / step))


@dataclass
class CosineConfig:
    """`schedule=cosine`: the keyword arguments of `CosineSchedule` (total_steps aside)."""

    _target_: str = "seq2seq.training.schedules.CosineSchedule"
    warmup_steps: int = 300
    min_lr_ratio: float = 0.05


@registry.register("schedule", "cosine", schema=CosineConfig)
class CosineSchedule(Schedule):
    """Linear warm-up, then a half cosine from the peak down to `min_lr_ratio` × peak at
    `total_steps` (the trainer passes `trainer.max_steps`)."""

    needs_total_steps = True

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        warmup_steps: int = 300,
        *,
        total_steps: int,
        min_lr_ratio: float = 0.05,
    ):
        if total_steps <= warmup_steps:
            raise ValueError(
                f"cosine schedule: trainer.max_steps ({total_steps}) must exceed "
                f"schedule.warmup_steps ({warmup_steps})"
            )
        self.total_steps = total_steps
        self.min_lr_ratio = min_lr_ratio
        super().__init__(optimizer, warmup_steps)

    def factor(self, step: int) -> float:
        if step < self.warmup_steps:
            return self._warmup(step)
        progress = min(1.0, (step - self.warmup_steps) / (self.total_steps - self.warmup_steps))
        cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
        return self.min_lr_ratio + (1.0 - self.min_lr_ratio) * cosine


@dataclass
class PlateauConfig:
    """`schedule=plateau`: the keyword arguments of `PlateauSchedule`."""

    _target_: str = "seq2seq.training.schedules.PlateauSchedule"
    warmup_steps: int = 0
    factor: float = 0.5
    patience: int = 2
    min_lr_ratio: float = 0.01


@registry.register("schedule", "plateau", schema=PlateauConfig)
class PlateauSchedule(Schedule):
    """Warm-up, then constant; the rate is multiplied by `factor` whenever the validation
    score has not improved (risen, or fallen for a lower-is-better metric) for more than
    `patience` validations in a row, down to `min_lr_ratio` × peak. `best` is the best
    score so far in the metric's own sign (None before the first validation)."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        warmup_steps: int = 0,
        factor: float = 0.5,
        patience: int = 2,
        min_lr_ratio: float = 0.01,
    ):
        if not 0.0 < factor < 1.0:
            raise ValueError(f"schedule.factor must be in (0, 1), got {factor}")
        self.decay, self.patience, self.min_lr_ratio = factor, patience, min_lr_ratio
        self.scale, self.bad_validations = 1.0, 0
        self.best: float | None = None
        super().__init__(optimizer, warmup_steps)

    def factor(self, step: int) -> float:
        return self._warmup(step) * self.scale

    def on_validation(self, score: float, higher_is_better: bool = True) -> None:
        if improves(score, self.best, higher_is_better):
            self.best, self.bad_validations = score, 0
            return
        self.bad_validations += 1
        if self.bad_validations > self.patience:
            self.scale = max(self.scale * self.decay, self.min_lr_ratio)
            self.bad_validations = 0
            self._apply()

    def state_dict(self) -> dict:
        return {
            "num_updates": self.num_updates,
            "scale": self.scale,
            "best": self.best,
            "bad_validations": self.bad_validations,
        }

    def load_state_dict(self, state: dict) -> None:
        self.scale = float(state["scale"])
        # None: no validation yet (a state saved before None existed holds -inf)
        best = state["best"]
        self.best = None if best is None or best == -math.inf else float(best)
        self.bad_validations = int(state["bad_validations"])
        super().load_state_dict(state)

