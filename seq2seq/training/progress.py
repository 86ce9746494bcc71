"""A one-line status that updates in place: step, epoch, loss, lr, tokens/s, time left.

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


class ProgressDisplay:
    """tqdm bar over optimiser steps on a terminal, log lines elsewhere."""

    def __init__(self, total_steps: int, enabled: bool = True):
        self.active = enabled and sys.stderr.isatty()
        self.bar = tqdm(total=total_steps, unit="step", dynamic_ncols=True, disable=not self.active)

    def update(self, step: int, stats: dict[str, Any]) -> None:
        if not self.active:
            if stats:
                log.info(
                    "step %d epoch %d loss %.3f lr %.2e %.0f tok/s",
                    step, stats.get("epoch", 0), stats["train/loss"], stats["train/lr"],
                    stats["train/tokens_per_sec"],
                )  # fmt: skip
            return
        self.bar.n = step
        if stats:
            self.bar.set_postfix(
                epoch=stats.get("epoch", 0),
                loss=f"{stats['train/loss']:.3f}",
                lr=f"{stats['train/lr']:.2e}",
                tok_s=f"{stats['train/tokens_per_sec']:.0f}",
                refresh=False,
            )
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
