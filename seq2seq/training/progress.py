"""A one-line status that updates in place: step, epoch, loss, lr, tokens/s, time left."""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm


class ProgressDisplay:
    """tqdm bar over optimiser steps; on a terminal only (logs carry the same numbers)."""

    def __init__(self, total_steps: int, enabled: bool = True):
        active = enabled and sys.stderr.isatty()
        self.bar = tqdm(total=total_steps, unit="step", dynamic_ncols=True, disable=not active)

    def update(self, step: int, stats: dict[str, Any]) -> None:
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
