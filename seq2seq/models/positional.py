"""Position encodings added to token embeddings: fixed sinusoids or a learned table.

Both modules share one call shape, `forward(x, offset=0) -> x + table[offset:offset + T]`
with `x` of shape `(batch, T, dim)`: they return the input WITH the positions added, not
the table. `offset` is the absolute position of `x[:, 0]`; a decoder that runs one target
position at a time passes the step index, so step t gets the same encoding as position t
of a full teacher-forced pass. Dropout is left to the caller.
"""

from __future__ import annotations

import math
from enum import Enum

import torch
from torch import nn


def sinusoid_table(max_positions: int, dim: int) -> torch.Tensor:
    """The fixed sinusoid table of Vaswani et al. 2017, §3.5, shape `(max_positions, dim)`.

        PE(pos, 2i)     = sin(pos / 10000^(2i / dim))
        PE(pos, 2i + 1) = cos(pos / 10000^(2i / dim))

    An odd `dim` gets one more sine column than cosine columns.
    """
    positions = torch.arange(max_positions, dtype=torch.float64).unsqueeze(1)  # (P, 1)
    even_columns = torch.arange(0, dim, 2, dtype=torch.float64)  # 2i, (ceil(dim/2),)
    frequencies = torch.exp(-math.log(10000.0) * even_columns / dim)  # 1 / 10000^(2i/dim)
    angles = positions * frequencies  # (P, ceil(dim/2))
    table = torch.zeros(max_positions, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : dim // 2])
    return table.float()


class _PositionTable(nn.Module):
    """Shared argument checks and the `x + table[offset:offset + T]` addition."""

    def __init__(self, dim: int, max_positions: int) -> None:
        super().__init__()
        if dim < 1:
            raise ValueError(f"dim must be positive, got {dim}")
        if max_positions < 1:
            raise ValueError(f"max_positions must be positive, got {max_positions}")
        self.dim = dim
        self.max_positions = max_positions

    def table(self) -> torch.Tensor:
        """The full `(max_positions, dim)` table."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """`x (batch, T, dim)` -> `x + table[offset:offset + T]`, same shape and dtype."""
        self._check(x, offset)
        length = x.size(1)
        positions = self.table()[offset : offset + length]  # (T, dim)
        return x + positions.to(dtype=x.dtype).unsqueeze(0)  # (batch, T, dim)

    def _check(self, x: torch.Tensor, offset: int) -> None:
        if x.dim() != 3 or x.size(-1) != self.dim:
            raise ValueError(f"x must be (batch, time, {self.dim}), got {tuple(x.shape)}")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be a non-negative int, got {offset!r}")
        if offset + x.size(1) > self.max_positions:
            raise ValueError(
                f"positions {offset}..{offset + x.size(1) - 1} exceed max_positions="
                f"{self.max_positions}; raise max_positions or shorten the sequence"
            )

    def extra_repr(self) -> str:
        return f"dim={self.dim}, max_positions={self.max_positions}"


class SinusoidalPositions(_PositionTable):
    """Fixed sinusoidal positions (Vaswani et al. 2017, §3.5); see `sinusoid_table`.

    The table is a non-persistent buffer: it follows `.to(device)` but is not a parameter
    and is not stored in checkpoints (it is recomputed from `dim` and `max_positions`).
    """

    def __init__(self, dim: int, max_positions: int = 1024) -> None:
        super().__init__(dim, max_positions)
        self.register_buffer("positions", sinusoid_table(max_positions, dim), persistent=False)

    def table(self) -> torch.Tensor:
        return self.positions  # (max_positions, dim)


class LearnedPositions(_PositionTable):
    """A learned embedding per absolute position (Gehring et al. 2017, §3.1).

    Initialised from N(0, 0.1), like all embeddings in Gehring et al. 2017, §3.5.
    """

    def __init__(self, dim: int, max_positions: int = 1024) -> None:
        super().__init__(dim, max_positions)
        self.positions = nn.Parameter(torch.empty(max_positions, dim))
        nn.init.normal_(self.positions, mean=0.0, std=0.1)

    def table(self) -> torch.Tensor:
        return self.positions  # (max_positions, dim)


POSITIONAL_ENCODINGS = {"sinusoidal": SinusoidalPositions, "learned": LearnedPositions}
Positional = Enum("Positional", {name: name for name in POSITIONAL_ENCODINGS})  # schema choice


def position_table(positional: str, dim: int, max_positions: int) -> _PositionTable:
    """The position encoding called `positional` (a key of `POSITIONAL_ENCODINGS`)."""
    if positional not in POSITIONAL_ENCODINGS:
        raise ValueError(
            f"positional must be one of {sorted(POSITIONAL_ENCODINGS)}, got {positional!r}"
        )
    return POSITIONAL_ENCODINGS[positional](dim, max_positions)
