"""Checks on what every encoder receives: shapes, a boolean right-padded mask.

All encoders assume RIGHT padding (real tokens first, then padding): the RNN packs by
length and the convolutional and Transformer encoders number positions from the left,
so a left-padded batch would silently change the result. It is rejected instead.
"""

from __future__ import annotations

import torch


def check_encoder_inputs(
    src_embedded: torch.Tensor, src_mask: torch.Tensor, embed_dim: int
) -> None:
    """Raise ValueError unless `src_embedded (B, S, embed_dim)` and `src_mask (B, S)` fit.

    The mask must be bool, True = real token, right-padded, with at least one real
    token per row.
    """
    if src_embedded.dim() != 3 or src_embedded.size(-1) != embed_dim:
        raise ValueError(
            f"src_embedded must be (batch, src_len, {embed_dim}), got {tuple(src_embedded.shape)}"
        )
    if src_mask.dtype != torch.bool or src_mask.shape != src_embedded.shape[:2]:
        raise ValueError(
            f"src_mask must be a bool tensor of shape {tuple(src_embedded.shape[:2])}, "
            f"got {src_mask.dtype} {tuple(src_mask.shape)}"
        )
    lengths = src_mask.sum(dim=1)  # (batch,)
    if not torch.equal(src_mask, prefix_mask(lengths, src_mask.size(1))):
        raise ValueError("src_mask must be right-padded: True (real) first, then only False")
    if not bool((lengths > 0).all()):
        raise ValueError("src_mask: every source needs at least one real token")


def prefix_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """`lengths (B,)` -> bool `(B, max_len)`, True on the first `lengths[b]` positions."""
    positions = torch.arange(max_len, device=lengths.device)  # (max_len,)
    return positions.unsqueeze(0) < lengths.unsqueeze(1)  # (B, max_len)
