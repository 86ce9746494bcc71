"""Time to quality from the scored saves of a run: the training minutes of the first save whose
valid BLEU reaches a threshold, and the ratio of two frameworks' times.

A series is a list of saves `{"step", "seconds", "bleu"}` (seconds on the training clock,
`quality_clock`). The time to a threshold is that of the first save, in training time, with
BLEU ≥ the threshold; the crossing itself lies between that save and the one before, so
the figure is exact to one save interval. A framework that never reaches the threshold
within its budget has a time above the budget, and a ratio against it is a bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def first_reached(series: Sequence[Mapping[str, Any]], threshold: float) -> Mapping | None:
    """The first save (in training time) whose BLEU is at or above `threshold`; None when
    none is."""
    for save in sorted(series, key=lambda save: save["seconds"]):
        if save["bleu"] >= threshold:
            return save
    return None


def minutes_to(series: Sequence[Mapping[str, Any]], threshold: float) -> float | None:
    """Training minutes to the first save at or above `threshold`; None when none is."""
    save = first_reached(series, threshold)
    return None if save is None else save["seconds"] / 60


@dataclass(frozen=True)
class TimeRatio:
    """A peer's minutes over ours (6.0: ours reached the threshold 6 times as fast), exact
    (`bound` "="), at least (">": the peer did not reach it in its budget) or at most ("<":
    ours did not)."""

    value: float
    bound: str


def time_ratio(ours: float | None, peer: float | None, budget: float) -> TimeRatio | None:
    """peer / ours of two times to a threshold in minutes (None: not reached within
    `budget` minutes): exact when both reached it; > budget / ours when only ours did;
    < peer / budget when only the peer did; None when neither did."""
    if ours is not None and peer is not None:
        return TimeRatio(peer / ours, "=") if ours > 0 else None
    if ours is not None:
        return TimeRatio(budget / ours, ">") if ours > 0 else None
    if peer is not None:
        return TimeRatio(peer / budget, "<")
    return None
