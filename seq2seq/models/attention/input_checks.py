"""Input checks shared by `Attention` and `NoAttention`: bad shapes fail with a ValueError
that names the argument, instead of broadcasting into a silently wrong result."""

from __future__ import annotations

import torch


def check_sizes(**sizes) -> None:
    """Every keyword argument must be an int >= 1."""
    for name, value in sizes.items():
        if not (isinstance(value, int) and value >= 1):
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def check_memory(keys: torch.Tensor, values: torch.Tensor, key_dim: int, value_dim: int) -> None:
    """keys `(batch, src_len, key_dim)` and values `(batch, src_len, value_dim)`."""
    if keys.dim() != 3 or keys.size(-1) != key_dim:
        raise ValueError(
            f"keys must be (batch, src_len, key_dim={key_dim}), got {tuple(keys.shape)}"
        )
    if values.dim() != 3 or values.size(-1) != value_dim:
        raise ValueError(
            f"values must be (batch, src_len, value_dim={value_dim}), got {tuple(values.shape)}"
        )
    if keys.shape[:2] != values.shape[:2]:
        raise ValueError(
            f"keys {tuple(keys.shape)} and values {tuple(values.shape)} differ in batch or src_len"
        )


def check_attend_inputs(
    query: torch.Tensor,
    proj_keys: torch.Tensor,
    proj_values: torch.Tensor,
    mask: torch.Tensor | None,
    query_dim: int,
    heads: int,
) -> None:
    """query `(batch, tgt_len, query_dim)`, projected memory `(batch, heads, src_len, *)`,
    mask `(batch, src_len)` bool or None."""
    if query.dim() != 3 or query.size(-1) != query_dim:
        raise ValueError(
            f"query must be (batch, tgt_len, query_dim={query_dim}), got {tuple(query.shape)}"
        )
    batch = query.size(0)
    for name, tensor in (("proj_keys", proj_keys), ("proj_values", proj_values)):
        if tensor.dim() != 4 or tensor.size(0) != batch or tensor.size(1) != heads:
            raise ValueError(
                f"{name} must be (batch={batch}, heads={heads}, src_len, *) from "
                f"project_memory, got {tuple(tensor.shape)}"
            )
    if proj_keys.size(2) != proj_values.size(2):
        raise ValueError("proj_keys and proj_values have different src_len")
    check_mask(mask, batch, proj_keys.size(2))


def check_mask(mask: torch.Tensor | None, batch: int, src_len: int) -> None:
    """mask must be None or `(batch, src_len)` bool."""
    if mask is None:
        return
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be bool (True = real key), got {mask.dtype}")
    if tuple(mask.shape) != (batch, src_len):
        raise ValueError(
            f"mask must be (batch={batch}, src_len={src_len}), got {tuple(mask.shape)}"
        )
