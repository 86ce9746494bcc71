"""`NoAttention`: the plain encoder-decoder baseline with one fixed context vector,
registered as the attention component "none" (`seq2seq.registry`). The vector is the mean
of the encoder's states, or with `attention.context=attention_pool` their attention-pooled
summary (`seq2seq.models.attention.pooling`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from seq2seq import registry
from seq2seq.models.attention.input_checks import check_attend_inputs, check_memory, check_sizes
from seq2seq.models.attention.interface import MemoryAttention
from seq2seq.models.attention.masks import visible_keys
from seq2seq.models.attention.pooling import AttentionPooling, masked_softmax

CONTEXTS = ("mean", "attention_pool")


@dataclass
class NoAttentionConfig:
    """`attention=none`: the one context vector, the mean of the encoder's states or their
    attention pooling (the widths come from the model builder)."""

    _target_: str = "seq2seq.models.attention.NoAttention"
    # the one context: mean (of the encoder's states) | attention_pool (one learned query
    # weighs them: seq2seq.models.attention.pooling)
    context: str = "mean"


@registry.register("attention", "none", schema=NoAttentionConfig)
class NoAttention(MemoryAttention):
    """No attention: every query gets the same context, the mean of the real values,

    `c = (1 / S_len) Σ_{j real} v_j`,

    the single summary vector of the encoder-decoder models without attention (Cho et
    al. 2014; Sutskever et al. 2014), here taken as a masked mean so it does not depend
    on padding. With `context="attention_pool"` it is instead `c = Σ_j α_j v_j`, α the
    attention pooling of the keys (`AttentionPooling`: one learned query, not the
    decoder's). The query is ignored and no weights are returned (None); the pooling's
    weights are `pooling_weights(keys, mask)`. Same call API as `Attention`; with
    `causal=True` each query averages (or pools) the keys it may see.
    """

    heads = 1

    def __init__(
        self, query_dim: int, key_dim: int, value_dim: int | None = None, context: str = "mean"
    ):
        super().__init__()
        value_dim = key_dim if value_dim is None else value_dim
        check_sizes(query_dim=query_dim, key_dim=key_dim, value_dim=value_dim)
        if context not in CONTEXTS:
            raise ValueError(f"attention.context must be one of {', '.join(CONTEXTS)}, "
                             f"not {context!r}")  # fmt: skip
        self.query_dim, self.key_dim, self.value_dim = query_dim, key_dim, value_dim
        self.output_dim = value_dim
        self.context = context
        self.pooling = AttentionPooling(key_dim) if context == "attention_pool" else None

    def project_memory(
        self, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`(batch, src_len, key_dim), (batch, src_len, value_dim) -> (batch, 1, src_len, *)`
        each; with attention pooling the "keys" are the pooling's scores s_j (width 1),
        computed once per sentence."""
        check_memory(keys, values, self.key_dim, self.value_dim)
        if self.pooling is not None:
            keys = self.pooling.scores(keys).unsqueeze(-1)  # (batch, src_len, 1)
        return keys.unsqueeze(1), values.unsqueeze(1)

    def pooling_weights(self, keys: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The attention pooling's weights over `keys` (batch, src_len, key_dim): `(batch,
        src_len)`, the one context's weights. ValueError with `context="mean"`."""
        if self.pooling is None:
            raise ValueError("attention=none with context=mean has no pooling weights")
        return self.pooling.weights(keys, mask)

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
        if self.pooling is not None:  # α_j = softmax of the pooled scores over visible keys
            scores = proj_keys.squeeze(-1).unsqueeze(2)  # (batch, 1, 1, src_len)
            weights = masked_softmax(scores, visible).to(proj_values.dtype)
        else:
            counts = visible.sum(dim=-1, keepdim=True).clamp(min=1)  # (batch or 1, 1, tgt_len, 1)
            weights = visible.to(proj_values.dtype) / counts  # (batch or 1, 1, tgt_len, src_len)
        return (weights @ proj_values).squeeze(1), None  # (batch, tgt_len, value_dim)

    @staticmethod
    def flops(node: Mapping[str, Any], batch: int, queries: int, keys: int, dim: int) -> int:
        """The weights times the values: 2·B·Tq·Sk·H (`seq2seq.flops`); with attention
        pooling also its scores, once per sentence (`AttentionPooling.flops` without its
        weighted sum, which is the term above)."""
        weighted_sum = 2 * batch * queries * keys * dim
        if node.get("context", "mean") != "attention_pool":
            return weighted_sum
        pooled_scores = AttentionPooling.flops(batch, keys, dim, dim) - 2 * batch * keys * dim
        return weighted_sum + pooled_scores
