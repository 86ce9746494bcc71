"""Dropout by element or by token: the two units of `dropout_unit`, and word dropout.

Element dropout (Srivastava et al. 2014) draws one Bernoulli number per feature of every
token: y = x ⊙ m / (1 − p), m ~ Bernoulli(1 − p) of x's shape (B, T, d). Token dropout
draws one number per token and shares it across the token's features, m of shape
(B, T, 1): on a residual branch it drops the whole sublayer output of that token (the
token keeps its input unchanged), on embeddings it zeroes the whole word (word dropout,
Gal & Ghahramani 2016, §4; Sennrich & Zhang 2019 use it for low-resource translation). It
draws d times fewer random numbers, which is what made element dropout cost 31% of an
update of `make train`'s model on a CPU (BENCHMARKS.md, "Dropout's cost").
"""

from __future__ import annotations

from enum import Enum

import torch
from torch import nn

UNITS = ("element", "token")
DropoutUnit = Enum("DropoutUnit", {unit: unit for unit in UNITS})  # the schemas' choice


class TokenDropout(nn.Module):
    """y = x · m / (1 − p) with one m ~ Bernoulli(1 − p) per (batch, position), shared by the
    features of the last dim; the identity in eval mode or at p = 0."""

    def __init__(self, p: float) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = x.new_empty(x.shape[:-1] + (1,)).bernoulli_(1.0 - self.p)  # (..., 1)
        return x * keep.div_(1.0 - self.p)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def dropout_layer(p: float, unit: str = "element") -> nn.Module:
    """`nn.Dropout(p)` for unit element, `TokenDropout(p)` for unit token."""
    if unit not in UNITS:
        raise ValueError(f"dropout_unit must be one of {list(UNITS)}, got {unit!r}")
    return nn.Dropout(p) if unit == "element" else TokenDropout(p)
