"""The FLOP convention of the formulas that every component carries (`flops` methods).

Every matrix product counts, a multiply-add as 2 FLOPs; element-wise work does not (the
convention of `torch.utils.flop_counter.FlopCounterMode`; the notation and the whole
model's count are in `seq2seq.flops`).
"""

from __future__ import annotations


def linear(rows: int, in_dim: int, out_dim: int) -> int:
    """A linear map `in_dim → out_dim` on `rows` rows: 2·rows·in_dim·out_dim."""
    return 2 * rows * in_dim * out_dim


def width_change(rows: int, in_dim: int, out_dim: int) -> int:
    """A linear map that exists only when the widths differ (else `nn.Identity`)."""
    return 0 if in_dim == out_dim else linear(rows, in_dim, out_dim)
