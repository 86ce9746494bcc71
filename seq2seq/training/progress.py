"""A one-line status that updates in place: step, epoch, loss, lr, tokens/s, time left.

Off a terminal (a log file, CI) the same numbers go to the log, one line per update.
"""

from __future__ import annotations

import logging
import sys
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
