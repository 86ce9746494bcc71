"""Checkpoint averaging (`trainer.average_last`): the weights at the last N validations and
their mean, as Vaswani et al. (2017, §6.1) average their last checkpoints.

    θ̄ = (1/N) Σ_{i=1..N} θ_i      (each floating-point tensor; integer buffers: the newest)

The trainer takes a snapshot at each validation; `last.pt` keeps them (`snapshots`), so a
resumed run averages the same weights. After training, the average is tested instead of
`best.pt` when its valid value of the selected metric is better (`seq2seq.runs.assemble`).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import torch


class Snapshots:
    """The weights (on the CPU) at the last `keep` validations; nothing kept for `keep` ≤ 1."""

    def __init__(self, keep: int):
        self.keep = keep
        self.kept: deque[dict[str, torch.Tensor]] = deque(maxlen=max(1, keep))

    @property
    def enabled(self) -> bool:
        return self.keep > 1

    def take(self, model: torch.nn.Module) -> None:
        """Keep a copy of the model's weights now (the oldest kept drops out)."""
        if self.enabled:
            self.kept.append({
                name: tensor.detach().to("cpu", copy=True)
                for name, tensor in model.state_dict().items()
            })  # fmt: skip

    def payload(self) -> list[dict[str, torch.Tensor]]:
        """The kept weights, oldest first, as a checkpoint stores them."""
        return list(self.kept)

    def restore(self, saved: list[dict[str, Any]]) -> None:
        """The kept weights of a checkpoint's `snapshots` (none when averaging is off)."""
        self.kept.clear()
        if self.enabled:
            self.kept.extend(saved)

    def averaged(self) -> dict[str, torch.Tensor] | None:
        """θ̄ of the kept weights (module docstring); None with fewer than two."""
        return mean_weights(list(self.kept))


def mean_weights(snapshots: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor] | None:
    """The mean of each floating-point tensor over the snapshots (computed in float32, kept
    in its dtype), the newest snapshot's integer tensors; None with fewer than two."""
    if len(snapshots) < 2:
        return None
    return {
        name: torch.stack([snap[name].float() for snap in snapshots]).mean(0).to(tensor.dtype)
        if tensor.is_floating_point() else tensor
        for name, tensor in snapshots[-1].items()
    }  # fmt: skip
