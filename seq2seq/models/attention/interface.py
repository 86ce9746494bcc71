"""The contract every attention implements (`Attention`, `NoAttention`, a plugin's class).

A decoder holds one attention per layer and calls it in two steps, so that what depends
only on the source is computed once per sentence, not once per target step (JoeyNMT's
key projections, Bahdanau et al. 2015 §A.1.2):

1. `project_memory(keys, values)`, once per sentence:

       keys   (batch, src_len, key_dim)      the encoder's memory (or the target so far,
       values (batch, src_len, value_dim)    for self-attention)
    -> proj_keys   (batch, heads, src_len, key_width)
       proj_values (batch, heads, src_len, value_width)

   `heads` is 1 for single-head attention (the widths then stay `key_dim`, `value_dim`);
   with several heads each is split into `heads` blocks of the per-head width.

2. `attend(query, proj_keys, proj_values, mask, ...)`, per query step or for all steps:

       query (batch, tgt_len, query_dim)     tgt_len = 1 for a decoder stepping
       mask  (batch, src_len) bool           True = a real key; None = every key is real
    -> context (batch, tgt_len, output_dim)  Σ_j α_tj v_j, merged over the heads
       weights (batch, heads, tgt_len, src_len) | None

   The weights α of each query sum to 1 over its visible keys (0 on masked ones; all 0
   for a query with no visible key). They are None only when `need_weights=False` let
   the module skip them (the fused kernel); `NoAttention` has none to give.

   `causal=True` lets query i, at absolute position `src_len - tgt_len + i`, see the keys at
   or before it (self-attention of a decoder). `query_positions` `(tgt_len,)` or `(batch,
   tgt_len)` gives the target position of each query to attentions that place a window
   (local-m); by default `arange(tgt_len)`, so a decoder stepping passes the step index.
   An attention that reads the source's sentences (`reads_sentences = True`, the
   hierarchical attention's) also takes `segments` `(batch, src_len)` long, the sentence
   of each key; a decoder passes it only when the model gives it, so no other attention
   sees the keyword.

An implementation also exposes `query_dim`, `key_dim`, `value_dim` and `output_dim` (the
decoder sizes its layers by `output_dim`), checks its inputs' shapes with
`seq2seq.models.attention.input_checks` (a ValueError naming the tensor), and counts its FLOPs with
a static `flops(node, batch, queries, keys, dim)` (`seq2seq.registry`). The checks every
attention must pass: `seq2seq.testing.check_component("attention", name)`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class MemoryAttention(nn.Module):
    """`project_memory(keys, values)` once per sentence, then `attend(query, ...)` per
    query; `forward` does both for callers that do not cache the projected memory.
    Shapes: the module docstring."""

    def project_memory(
        self, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`keys (batch, src_len, key_dim), values (batch, src_len, value_dim) ->
        proj_keys (batch, heads, src_len, *), proj_values (batch, heads, src_len, *)`."""
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
        """`query (batch, tgt_len, query_dim)`, mask `(batch, src_len)` or None ->
        `context (batch, tgt_len, output_dim), weights (batch, heads, tgt_len, src_len) | None`."""
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
        **extras: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`project_memory` then `attend` (`extras`: the keywords only some attentions take,
        `segments`)."""
        return self.attend(
            query,
            *self.project_memory(keys, values),
            mask,
            causal=causal,
            query_positions=query_positions,
            need_weights=need_weights,
            **extras,
        )
