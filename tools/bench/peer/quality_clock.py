"""The training clock of a time-to-quality run of `make bench-peer`, the same on every side.

The clock starts where the framework's training loop starts and runs while it trains; it
stops while a checkpoint is written. At the first update boundary at or after each multiple
of the save interval (t ≥ k·every), the weights are saved and (step, clock seconds,
checkpoint) appended to a JSON-lines file; at the first boundary at or after the budget the
last save is made and training ends. After training, every saved checkpoint is decoded and
scored (`quality_runs`), untimed.

Only the standard library: the peers' drivers import this module from their own
environments (by its folder, as `driver` is imported).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path


def next_save_time(seconds: float, every: float) -> float:
    """The first multiple of `every` after `seconds`: when the next save is due
    (⌊seconds / every⌋ + 1) · every; a save that came late skips the multiples it passed."""
    return (math.floor(seconds / every) + 1) * every


def record_save(saves: Path, step: int, seconds: float, checkpoint: Path) -> None:
    """Append one save to the JSON-lines file `saves`."""
    line = json.dumps({"step": step, "seconds": seconds, "checkpoint": str(checkpoint)})
    with saves.open("a", encoding="utf-8") as stream:
        stream.write(line + "\n")


def read_saves(saves: Path) -> list[dict]:
    """Every save of the JSON-lines file `saves`, in the order they were made."""
    if not saves.is_file():
        return []
    lines = saves.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


class SaveClock:
    """The clock of one training run (the peers' drivers; ours runs `fit` between the same
    save times, `ours.our_quality_train`). `start()` where the training loop starts, then
    `at_update(step, save)` before every batch is used."""

    def __init__(
        self,
        every_s: float,
        budget_s: float,
        saves: Path,
        now: Callable[[], float] = time.perf_counter,
    ):
        if not 0 < every_s <= budget_s:
            raise ValueError(f"save interval {every_s} s not in (0, budget {budget_s} s]")
        self.every_s, self.budget_s, self.saves, self.now = every_s, budget_s, saves, now
        self._started: float | None = None
        self._paused = 0.0  # seconds spent saving
        self._due = every_s
        self._seen_step = 0  # the updates done at the previous call of at_update

    def start(self) -> None:
        """The training loop starts: the clock starts at 0 (again, when called again)."""
        self._started, self._paused, self._due = self.now(), 0.0, self.every_s
        self._seen_step = 0

    def seconds(self) -> float:
        """Training seconds so far: wall time since `start` less the time spent saving."""
        if self._started is None:
            raise RuntimeError("the clock was not started")
        return self.now() - self._started - self._paused

    def at_update(self, step: int, save: Callable[[int], Path]) -> bool:
        """Between two batches, `step` updates done: when an update finished since the last
        call (`step` moved on; with accumulated batches it does not every time), save with
        `save(step)` (the clock stopped) if a save is due or the budget is spent; whether
        the budget is spent (training should end)."""
        if step == self._seen_step:
            return False
        self._seen_step = step
        seconds = self.seconds()
        over = seconds >= self.budget_s
        if seconds >= self._due or over:
            began = self.now()
            checkpoint = save(step)
            record_save(self.saves, step, seconds, checkpoint)
            self._paused += self.now() - began
            self._due = next_save_time(seconds, self.every_s)
        return over
