"""Each registered learning-rate schedule against its formula, written out independently
(`SCHEDULE_CASES`, one per registered name), built from its preset as the trainer does."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import torch
from helpers import compose_config

from seq2seq import registry
from seq2seq.config.build import instantiate_part

WARMUP, TOTAL, STEPS = 4, 12, 14


@dataclass(frozen=True)
class ScheduleCase:
    """The factor of the peak rate after `step` updates, and the valid scores (one per
    update, None where there is no validation) that drive it."""

    factor: Callable[[int], float]
    scores: dict[int, float] = field(default_factory=dict)


def inverse_sqrt(step: int) -> float:
    return min(step / WARMUP, math.sqrt(WARMUP / step))  # Vaswani et al. 2017, eq. 3


def cosine(step: int, floor: float = 0.05) -> float:
    if step < WARMUP:
        return step / WARMUP
    progress = min(1.0, (step - WARMUP) / (TOTAL - WARMUP))
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def plateau(step: int) -> float:
    """The score stalls after update 6: each third stalled validation (patience 2) halves."""
    stalled = max(0, step - 6)
    return min(1.0, step / WARMUP) * 0.5 ** (stalled // 3)


# Every registered schedule needs a case here: the contract suite (seq2seq.testing) has no
# schedule checks, so this is where a new schedule's formula is tested.
SCHEDULE_CASES = {
    "inverse_sqrt": ScheduleCase(inverse_sqrt),
    "cosine": ScheduleCase(cosine),
    "plateau": ScheduleCase(plateau, {step: min(step, 6) for step in range(1, STEPS + 1)}),
}


def build(name: str):
    """The schedule of preset `name` over a one-parameter SGD at lr 1, as the trainer builds it."""
    cfg = compose_config([f"schedule={name}", f"schedule.warmup_steps={WARMUP}"])
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    extra = (
        {"total_steps": TOTAL} if registry.get("schedule", name).builder.needs_total_steps else {}
    )
    return instantiate_part(cfg.schedule, "schedule", optimizer=optimizer, **extra)


@pytest.mark.parametrize("name", registry.names("schedule"))
def test_every_registered_schedule_follows_its_formula(name):
    if name not in SCHEDULE_CASES:
        pytest.fail(f"schedule {name!r} is registered but has no case in tests/test_schedules.py")
    case, schedule = SCHEDULE_CASES[name], build(name)
    for step in range(1, STEPS + 1):
        schedule.step()
        if step in case.scores:
            schedule.on_validation(case.scores[step])
        assert schedule.lr == pytest.approx(case.factor(step)), f"after update {step}"


@pytest.mark.parametrize(
    "component", registry.components("schedule"), ids=registry.names("schedule")
)
def test_a_schedule_needs_total_steps_exactly_when_its_constructor_takes_them(component):
    takes_total = "total_steps" in inspect.signature(component.builder).parameters
    assert component.builder.needs_total_steps == takes_total


def test_plateau_reads_a_lower_is_better_metric_in_its_direction():
    """A loss that falls until update 6 and then stalls (it rises a little) decays the
    rate exactly as the stalled BLEU of the plateau case does."""
    schedule = build("plateau")
    for step in range(1, STEPS + 1):
        schedule.step()
        loss = 10.0 - min(step, 6) + 0.01 * max(0, step - 6)  # worse after update 6
        schedule.on_validation(loss, higher_is_better=False)
        assert schedule.lr == pytest.approx(plateau(step)), f"after update {step}"


def test_a_plateau_state_saved_before_any_validation_loads_in_either_form():
    for saved_best in (-math.inf, None):  # -inf: written before the direction existed
        schedule = build("plateau")
        schedule.load_state_dict({**schedule.state_dict(), "best": saved_best})
        schedule.on_validation(50.0, higher_is_better=False)  # the first value is the best
        assert schedule.best == 50.0 and schedule.bad_validations == 0
