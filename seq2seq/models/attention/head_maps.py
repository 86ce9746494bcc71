"""Per-head linear maps and the reshapes between `(batch, time, heads * width)` and
`(batch, heads, time, width)`.

Every attention tensor inside this package carries the heads on dim 1 and time on dim 2,
so a single-head attention is simply the case `heads == 1`.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class HeadLinear(nn.Module):
    """An independent affine map per head: `y[:, h] = x[:, h] @ W[h] + b[h]`.

    `(batch, heads, time, in_dim) -> (batch, heads, time, out_dim)`. With `heads == 1`
    it is an `nn.Linear` that keeps the head dim; initialised like `nn.Linear`.
    """

    def __init__(self, heads: int, in_dim: int, out_dim: int, *, bias: bool = True):
        super().__init__()
        bound = 1.0 / math.sqrt(in_dim)
        self.weight = nn.Parameter(torch.empty(heads, in_dim, out_dim).uniform_(-bound, bound))
        bias_init = torch.empty(heads, 1, out_dim).uniform_(-bound, bound)
        self.bias = nn.Parameter(bias_init) if bias else None

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        outputs = torch.einsum("bhti,hio->bhto", inputs, self.weight)  # (batch, heads, time, out)
        return outputs if self.bias is None else outputs + self.bias


def split_heads(inputs: torch.Tensor, heads: int) -> torch.Tensor:
    """`(batch, time, heads * width) -> (batch, heads, time, width)`."""
    batch, time, _ = inputs.shape
    return inputs.view(batch, time, heads, -1).transpose(1, 2)


def merge_heads(inputs: torch.Tensor) -> torch.Tensor:
    """`(batch, heads, time, width) -> (batch, time, heads * width)`."""
    batch, heads, time, width = inputs.shape
    return inputs.transpose(1, 2).reshape(batch, time, heads * width)
