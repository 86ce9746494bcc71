"""`NoAttention`: the plain encoder-decoder baseline with one fixed context vector,
registered as the attention component "none" (`seq2seq.registry`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from seq2seq import registry
from seq2seq.models.attention.input_checks import check_attend_inputs, check_memory, check_sizes
from seq2seq.models.attention.interface import MemoryAttention
from seq2seq.models.attention.masks import visible_keys


@dataclass
class NoAttentionConfig:
    """`attention=none`: nothing to choose (the widths come from the model builder)."""

    _target_: str = "seq2seq.models.attention.NoAttention"


@registry.register("attention", "none", schema=NoAttentionConfig)
class NoAttention(MemoryAttention):
    """No attention: every query gets the same context, the mean of the real values,

    `c = (1 / S_len) Σ_{j real} v_j`,

    the single summary vector of the encoder-decoder models without attention (Cho et
    al. 2014; Sutskever et al. 2014), here taken as a masked mean so it does not depend
    on padding. The query is ignored and no weights are returned (None). Same call API as
    `Attention`; with `causal=True` each query averages the keys it may see.
    """

    heads = 1

    def __init__(self, query_dim: int, key_dim: int, value_dim: int | None = None):
        super().__init__()
        value_dim = key_dim if value_dim is None else value_dim
        check_sizes(query_dim=query_dim, key_dim=key_dim, value_dim=value_dim)
        self.query_dim, self.key_dim, self.value_dim = query_dim, key_dim, value_dim
        self.output_dim = value_dim

    def project_memory(
        self, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`(batch, src_len, key_dim), (batch, src_len, value_dim) -> (batch, 1, src_len, *)` each."""
        check_memory(keys, values, self.key_dim, self.value_dim)
        return keys.unsqueeze(1), values.unsqueeze(1)

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
    ) -> tuple[torch.Tensor, None]:
        """`query (batch, tgt_len, query_dim) -> context (batch, tgt_len, value_dim), None`."""
        check_attend_inputs(query, proj_keys, proj_values, mask, self.query_dim, heads=1)
        visible = visible_keys(mask, causal, query.size(1), proj_values.size(2), query.device)
        counts = visible.sum(dim=-1, keepdim=True).clamp(min=1)  # (batch or 1, 1, tgt_len, 1)
        uniform = visible.to(proj_values.dtype) / counts  # (batch or 1, 1, tgt_len, src_len)
        return (uniform @ proj_values).squeeze(1), None  # (batch, tgt_len, value_dim)

    @staticmethod
    def flops(node: Mapping[str, Any], batch: int, queries: int, keys: int, dim: int) -> int:
        """The uniform weights times the values: 2·B·Tq·Sk·H (`seq2seq.flops`)."""
        return 2 * batch * queries * keys * dim
