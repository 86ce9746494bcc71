"""The arithmetic of the training and validation passes (`trainer.precision`).

bf16 autocast with `trainer.precision=bf16`, and with `auto` on CUDA; float32 otherwise.
Under autocast the matrix products run in bf16, while the weights, the optimiser state and
the loss (`seq2seq.training.label_smoothing` computes it from float32 logits) stay in float32.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager

import torch

Autocast = Callable[[], AbstractContextManager[None]]  # a fresh context for each pass


def autocast_for(precision: str, device: torch.device) -> Autocast:
    """The context the passes run in on `device` with `precision` (auto | bf16 | fp32)."""
    if precision == "bf16" or (precision == "auto" and device.type == "cuda"):
        return lambda: torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext
