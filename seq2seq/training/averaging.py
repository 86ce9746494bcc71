"""Weight averaging: checkpoint averaging (`trainer.average_last`, `Snapshots`) and an
exponential moving average (`trainer.ema_decay`, `MovingAverage`).

Checkpoint averaging: the weights at the last N validations and
their mean, as Vaswani et al. (2017, §6.1) average their last checkpoints.

    θ̄ = (1/N) Σ_{i=1..N} θ_i      (each floating-point tensor; integer buffers: the newest)

The trainer takes a snapshot at each validation; `last.pt` keeps them (`snapshots`), so a
resumed run averages the same weights. After training, the average is tested instead of
`best.pt` when its valid value of the selected metric is better (`seq2seq.runs.assemble`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
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


class MovingAverage:
    """An exponential moving average of the weights (`trainer.ema_decay` = d > 0), updated
    after every applied update t = 1, 2, ... (Polyak & Juditsky 1992; as Marian's
    exponential smoothing and fairseq's EMA):

        θ̄_t = d_t · θ̄_{t-1} + (1 − d_t) · θ_t,      d_t = min(d, (1 + t) / (10 + t))

    The warm-up d_t (as TensorFlow's ExponentialMovingAverage with num_updates) keeps the
    first updates' weights from lingering in a short run; θ̄ starts as the weights after
    the first update. Validation, `best.pt` and the test use θ̄ (`applied`), training goes on with θ;
    `last.pt` keeps both, so a resumed run goes on with the same average. Integer tensors
    (none in these models) would be the newest. Off (d = 0): no copy, nothing changes."""

    def __init__(self, decay: float):
        self.decay = decay
        self.updates = 0
        self.weights: dict[str, torch.Tensor] = {}  # θ̄ on the model's device, float tensors

    @property
    def enabled(self) -> bool:
        return self.decay > 0.0

    def update(self, model: torch.nn.Module) -> None:
        """θ̄ ← d_t θ̄ + (1 − d_t) θ after an applied update."""
        if not self.enabled:
            return
        current = model.state_dict()
        if not self.weights:
            self.weights = own_floats(model)
        self.updates += 1
        decay = min(self.decay, (1 + self.updates) / (10 + self.updates))
        with torch.no_grad():
            for name, average in self.weights.items():
                average.lerp_(current[name].detach(), 1.0 - decay)

    @contextmanager
    def applied(self, model: torch.nn.Module) -> Iterator[None]:
        """The model holds θ̄ inside the block and its own weights θ again after it."""
        if not self.enabled or not self.weights:
            yield
            return
        own = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()
               if name in self.weights}  # fmt: skip
        model.load_state_dict(self.weights, strict=False)
        try:
            yield
        finally:
            model.load_state_dict(own, strict=False)

    def payload(self) -> dict[str, Any]:
        """θ̄ and the update count, as `last.pt` stores them."""
        return {"updates": self.updates, "weights": self.weights}

    def restore(self, saved: dict[str, Any] | None, model: torch.nn.Module) -> None:
        """θ̄ of a checkpoint's `ema` entry; a checkpoint without one (averaging was off, or
        `best.pt`, which holds θ̄ as its weights) starts θ̄ from the model's weights."""
        self.updates, self.weights = 0, {}
        if not self.enabled:
            return
        if saved is None:
            self.weights = own_floats(model)
            return
        if not isinstance(saved, dict) or not isinstance(saved.get("weights"), dict):
            raise ValueError("the checkpoint's `ema` entry is not {updates, weights}")
        own = model.state_dict()
        expected = {name for name, tensor in own.items() if tensor.is_floating_point()}
        if set(saved["weights"]) != expected:
            raise ValueError("the checkpoint's `ema` weights do not name the model's parameters")
        self.weights = {name: tensor.to(own[name].device, own[name].dtype).clone()
                        for name, tensor in saved["weights"].items()}  # fmt: skip
        self.updates = int(saved.get("updates", 0))


def own_floats(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of the model's floating-point tensors (parameters and buffers), by name."""
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()
            if tensor.is_floating_point()}  # fmt: skip
