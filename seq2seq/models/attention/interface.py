"""The call API that every attention module shares (`Attention`, `NoAttention`)."""

from __future__ import annotations

import torch
from torch import nn


class MemoryAttention(nn.Module):
    """`project_memory(keys, values)` once per sentence, then `attend(query, ...)` per
    query; `forward` does both for callers that do not cache the projected memory."""

    def project_memory(
        self, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def attend(
        self,
        query: torch.Tensor,
        proj_keys: torch.Tensor,
        proj_values: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        causal: bool = False,
        query_positions: torch.Tensor | None = None,
        need_weights: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        raise NotImplementedError

    def forward(
        self,
        query: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        causal: bool = False,
        query_positions: torch.Tensor | None = None,
        need_weights: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`project_memory` then `attend`."""
        return self.attend(
            query,
            *self.project_memory(keys, values),
            mask,
            causal=causal,
            query_positions=query_positions,
            need_weights=need_weights,
        )
