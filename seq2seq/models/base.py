"""The interfaces every encoder and decoder implements, and the decoder-state helpers.

Conventions used everywhere in `seq2seq.models`:

* Batch first: every tensor is `(batch, time, features)`.
* Masks are boolean and True marks a real token: `src_mask` is `(batch, src_len)`.
* Attention weights are `(batch, heads, tgt_len, src_len)` from one attention call, and
  a decoder returns them stacked over its attention layers as
  `(batch, layers, heads, tgt_len, src_len)`, or None when it has no attention.
* A decoder state is a dict whose values are tensors with the batch on dim 0, or lists /
  tuples / dicts of such tensors, or plain Python values (ints, None). Beam search expands
  and reorders a state with `reorder_state` without knowing what is in it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

DecoderState = dict[str, Any]


@dataclass
class EncoderOutput:
    """What an encoder hands to the decoder."""

    memory: torch.Tensor  # (batch, src_len, memory_dim)
    mask: torch.Tensor  # (batch, src_len) bool, True = real token
    final: torch.Tensor | None  # (batch, final_dim) summary state of recurrent encoders, else None
    # (batch, src_len) long: the sentence of each source position in a document (set by the
    # model for an attention that reads sentences, `seq2seq.models.attention.hierarchical`)
    segments: torch.Tensor | None = None


class Encoder(nn.Module):
    """`(src_embedded (batch, src_len, embed_dim), src_mask) -> EncoderOutput`.

    Subclasses set `output_dim` (width of `memory`) and `final_dim` (width of `final`, or
    None when the encoder has no final state). A registered encoder also has the static
    method `flops(node, embed_dim, batch, src_len) -> int` (see `seq2seq.registry`).
    """

    output_dim: int
    final_dim: int | None

    def forward(self, src_embedded: torch.Tensor, src_mask: torch.Tensor) -> EncoderOutput:
        raise NotImplementedError

    @staticmethod
    def widths(node: Mapping[str, Any]) -> tuple[int, int | None]:
        """(`output_dim`, `final_dim`) of the encoder that the config node describes."""
        return node["hidden_size"], None


class Decoder(nn.Module):
    """One interface for teacher forcing and for step-by-step decoding.

    * `init_state(memory, src_mask, init_hidden)` builds the state before the first step.
      `memory` already has the decoder's `memory_dim` width (the bridge projects it),
      `init_hidden` is `(batch, hidden_dim)` from the bridge (recurrent decoders use it,
      others may ignore it). Work that depends only on the source (projected attention
      keys) is done here, once per sentence. A model whose attention reads the source's
      sentences also passes `segments=` (batch, src_len), which the decoder keeps in the
      state and passes on to `attend` (`seq2seq.models.decoders.common.segment_keyword`).
    * `forward(tgt_embedded, state)` runs the whole target at once (teacher forcing):
      `(batch, tgt_len, embed_dim) -> hidden (batch, tgt_len, output_dim), attn`.
    * `step(tgt_embedded, state)` runs one position: `(batch, 1, embed_dim) ->
      hidden (batch, 1, output_dim), attn (batch, layers, heads, 1, src_len) | None,
      new_state`. Running `step` over a target equals `forward` on it.

    `need_weights=False` lets a decoder skip materialising attention weights (the fused
    kernel path); it then returns None for attn. A registered decoder also has the static
    method `flops(node, embed_dim, batch, tgt_len) -> (own FLOPs, attention layers)` (see
    `seq2seq.registry`).
    """

    output_dim: int
    # The first decoder step whose attention query has read target piece t is t + this lag:
    # piece t is the input of step t + 1, which attends after reading it (Transformer, CNN,
    # Luong-style RNN); a Bahdanau-style RNN attends before reading, so at t + 2. Guided
    # alignment's `alignment.shift=null` supervises (and reads) the rows this many steps later.
    target_read_lag: int = 1
    # Whether the decoder starts from the bridge's `init_hidden` (the source's summary,
    # `model.summary`): the recurrent decoders do; the CNN and Transformer decoders ignore it.
    starts_from_summary: bool = True
    # The state entries that depend only on the source sentence (projected attention
    # memory, the source mask): equal in every beam row of one sentence, so beam search
    # does not reorder them when rows move within their sentence. Empty: reorder all.
    source_state: frozenset[str] = frozenset()

    def init_state(
        self, memory: torch.Tensor, src_mask: torch.Tensor, init_hidden: torch.Tensor
    ) -> DecoderState:
        raise NotImplementedError

    def forward(
        self, tgt_embedded: torch.Tensor, state: DecoderState, need_weights: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        raise NotImplementedError

    def step(
        self, tgt_embedded: torch.Tensor, state: DecoderState, need_weights: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None, DecoderState]:
        raise NotImplementedError


def reorder_state(state: Any, index: torch.Tensor, keep: frozenset[str] = frozenset()) -> Any:
    """Select `index` along the batch dim of every tensor in a (nested) decoder state.

    Used by beam search both to expand a batch to `batch * beam` rows and to follow the
    surviving hypotheses after pruning. The top-level entries named in `keep` are returned
    as they are (see `Decoder.source_state`).
    """
    if isinstance(state, dict) and keep:
        return {
            key: value if key in keep else reorder_state(value, index)
            for key, value in state.items()
        }
    if isinstance(state, torch.Tensor):
        return state.index_select(0, index)
    if isinstance(state, dict):
        return {key: reorder_state(value, index) for key, value in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(reorder_state(value, index) for value in state)
    return state


def source_state(model: Any) -> frozenset[str]:
    """The `source_state` entries of the model's decoder (none for a decoder that declares
    none, so that its whole state is reordered)."""
    return frozenset(getattr(getattr(model, "decoder", None), "source_state", frozenset()))
