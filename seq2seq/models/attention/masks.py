"""Which keys each query may see: the padding mask combined with the causal rule."""

from __future__ import annotations

import torch


def causal_visibility(
    tgt_len: int, src_len: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """`(tgt_len, src_len)` bool, True where query i may see key j.

    Query i sits at absolute position `src_len - tgt_len + i` (the last `tgt_len`
    positions of the sequence), and sees every key j at or before that position. With
    `tgt_len == src_len` this is the usual lower triangle; with `tgt_len == 1`
    (incremental decoding) the single query sees all keys.
    """
    if tgt_len > src_len:
        raise ValueError(
            f"causal attention needs tgt_len <= src_len (queries are the last positions of "
            f"the keys), got tgt_len={tgt_len}, src_len={src_len}"
        )
    query_pos = torch.arange(src_len - tgt_len, src_len, device=device)  # (tgt_len,)
    key_pos = torch.arange(src_len, device=device)  # (src_len,)
    return key_pos.unsqueeze(0) <= query_pos.unsqueeze(1)


def visible_keys(
    mask: torch.Tensor | None,
    causal: bool,
    tgt_len: int,
    src_len: int,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """`(batch or 1, 1, tgt_len, src_len)` bool, True where a query may attend to a key.

    `mask` is `(batch, src_len)` bool with True = real key, or None (all keys real).
    """
    visible = torch.ones(1, 1, tgt_len, src_len, dtype=torch.bool, device=device)
    if mask is not None:
        visible = visible & mask[:, None, None, :]  # (batch, 1, tgt_len, src_len)
    if causal:
        visible = visible & causal_visibility(tgt_len, src_len, device)
    return visible


def key_lengths(mask: torch.Tensor | None, batch: int, src_len: int, device) -> torch.Tensor:
    """`(batch,)` long: number of real keys per row (`src_len` everywhere when mask is None)."""
    if mask is None:
        return torch.full((batch,), src_len, dtype=torch.long, device=device)
    return mask.sum(dim=-1)
