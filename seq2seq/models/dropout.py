"""Dropout by element or by token: the two units of `dropout_unit`, and word dropout.

Element dropout (Srivastava et al. 2014) draws one Bernoulli number per feature of every
token: y = x ⊙ m / (1 − p), m ~ Bernoulli(1 − p) of x's shape (B, T, d). On a CPU,
`ElementDropout` draws its masks four to a random 64-bit word: each 16-bit lane u is
uniform on {0, …, 2¹⁶ − 1} and the element is kept when u ≥ round(p · 2¹⁶), so the drop
rate is p rounded to a multiple of 2⁻¹⁶ (0.1 → 0.100006) and the scale is 1 / (1 − that
rate). The words come from NumPy's PCG64 generator (O'Neill 2014), seeded for each mask
by one 64-bit draw of torch's generator, so `torch.manual_seed` and a checkpoint's saved
torch RNG state fix every mask; it writes them faster than torch's CPU generator
(`torch.randint`). `nn.Dropout` fills its mask with `bernoulli_`, one random draw per
element, and the update of `gru_additive` spent 9% of its time there (BENCHMARKS.md,
"Faster dropout masks"). On CUDA it is `F.dropout`. Token dropout
draws one number per token and shares it across the token's features, m of shape
(B, T, 1): on a residual branch it drops the whole sublayer output of that token (the
token keeps its input unchanged), on embeddings it zeroes the whole word (word dropout,
Gal & Ghahramani 2016, §4; Sennrich & Zhang 2019 use it for low-resource translation). It
draws d times fewer random numbers, which is what made element dropout cost 31% of an
update of `make train`'s model on a CPU (BENCHMARKS.md, "Dropout's cost").
"""

from __future__ import annotations

from enum import Enum

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

UNITS = ("element", "token")
DropoutUnit = Enum("DropoutUnit", {unit: unit for unit in UNITS})  # the schemas' choice


LANE_VALUES = 1 << 16  # a mask lane is a 16-bit slice of a random 64-bit word
_WORD_RANGE = (-(1 << 63), (1 << 63) - 1)  # torch.randint's bounds: every bit random


def check_rate(p: float) -> None:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {p}")


def lane_threshold(p: float) -> int:
    """The int16 lane value below which an element is dropped: P(drop) = round(p·2¹⁶)/2¹⁶."""
    return -(LANE_VALUES // 2) + round(p * LANE_VALUES)


def drop_rate(p: float) -> float:
    """The rate `ElementDropout` draws on a CPU: p rounded to a multiple of 2⁻¹⁶."""
    return round(p * LANE_VALUES) / LANE_VALUES


def random_words(count: int, device: torch.device) -> torch.Tensor:
    """`count` uniformly random int64 words on `device`. On a CPU: NumPy's PCG64 seeded by
    one 64-bit draw of torch's default generator (every bit random, and fixed by its seed);
    elsewhere `torch.randint` on the device's own generator."""
    if device.type != "cpu":
        return torch.randint(*_WORD_RANGE, (count,), dtype=torch.int64, device=device)
    seed = torch.randint(*_WORD_RANGE, (), dtype=torch.int64).item() & (2**64 - 1)
    words = np.random.default_rng(seed).integers(
        *_WORD_RANGE, size=count, dtype=np.int64, endpoint=True
    )
    return torch.from_numpy(words)


def keep_mask(
    shape: torch.Size, p: float, device: torch.device, dtype: torch.dtype = torch.bool
) -> torch.Tensor:
    """A mask of `shape`, each element kept (True, or 1 in another `dtype`) with probability
    1 − drop_rate(p), drawn as int16 lanes of ⌈n / 4⌉ random 64-bit words. The comparison
    writes `dtype` directly: a float mask costs no bool mask and no conversion pass."""
    count = shape.numel()
    words = random_words((count + 3) // 4, device)  # (⌈n / 4⌉,) int64
    lanes = words.view(torch.int16)[:count].view(shape)  # (n,) uniform int16 -> shape
    kept = torch.empty(shape, dtype=dtype, device=device)
    return torch.ge(lanes, lane_threshold(p), out=kept)


def element_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """y = x ⊙ m / (1 − p′), m ~ Bernoulli(1 − p′) per element, p′ = drop_rate(p) on a
    CPU (four mask lanes per random word) and p′ = p elsewhere (`F.dropout`)."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu":
        return F.dropout(x, p, training=True)
    scale = 1.0 / (1.0 - drop_rate(p))
    return x * keep_mask(x.shape, p, x.device, x.dtype).mul_(scale)


class ElementDropout(nn.Module):
    """`element_dropout` as a layer: `nn.Dropout` with a cheaper mask on a CPU; the
    identity in eval mode or at p = 0."""

    def __init__(self, p: float) -> None:
        super().__init__()
        check_rate(p)
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return element_dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class TokenDropout(nn.Module):
    """y = x · m / (1 − p) with one m ~ Bernoulli(1 − p) per (batch, position), shared by the
    features of the last dim; the identity in eval mode or at p = 0."""

    def __init__(self, p: float) -> None:
        super().__init__()
        check_rate(p)
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = x.new_empty(x.shape[:-1] + (1,)).bernoulli_(1.0 - self.p)  # (..., 1)
        return x * keep.div_(1.0 - self.p)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def dropout_layer(p: float, unit: str = "element") -> nn.Module:
    """`ElementDropout(p)` for unit element, `TokenDropout(p)` for unit token."""
    if unit not in UNITS:
        raise ValueError(f"dropout_unit must be one of {list(UNITS)}, got {unit!r}")
    return ElementDropout(p) if unit == "element" else TokenDropout(p)
