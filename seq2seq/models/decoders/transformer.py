"""Transformer decoder, pre-layer-norm (Vaswani et al. 2017, §3.1; pre-LN as in Xiong et al. 2020).

Each block, on the target x (batch, T, hidden)::

    x = x + Dropout(SelfAttention(LN(x), causal))       masked: position i sees only j <= i
    x = x + Dropout(CrossAttention(LN(x), memory))      the pluggable attention
    x = x + Dropout(FFN(LN(x)))                         FFN(x) = W₂ ReLU(W₁ x + b₁) + b₂

followed by a final LayerNorm. The input is the target embedding (projected to `hidden_size`
when widths differ) plus sinusoidal or learned positions.

Self-attention is always multi-head scaled dot-product attention,
softmax(Q Kᵀ / √d) V (Vaswani et al. 2017, eq. 1); with `need_weights=False` the project's
`Attention` runs it through the fused `F.scaled_dot_product_attention` kernel. The
cross-attention comes from the attention factory, so additive, local or hard attention
work here too.

Incremental decoding keeps, per layer, the projected self-attention keys and values of all
earlier positions in the state (`(B, heads, t, head_dim)`, grown with `torch.cat` on dim 2);
the cross-attention keys and values are projected once, in `init_state`.

`full_context` runs the teacher-forced pass without the future mask: self-attention sees
every real target position, before and after (the alignment pass of Garg et al. 2019,
whose cross-attention guided alignment supervises; `seq2seq.training.guided_alignment`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from seq2seq import registry
from seq2seq.models.attention import self_attention, self_attention_flops
from seq2seq.models.base import DecoderState
from seq2seq.models.costs import width_change
from seq2seq.models.decoders.common import (
    CachedDecoder,
    check_memory,
    check_target,
    segment_keyword,
    stack_layers,
    target_positions,
    with_segments,
)
from seq2seq.models.dropout import dropout_layer
from seq2seq.models.family_fields import TransformerConfig
from seq2seq.models.feed_forward import FeedForward
from seq2seq.models.positional import position_table

KeyValue = tuple[torch.Tensor, torch.Tensor]  # projected (keys, values), each (B, heads, len, *)


class TransformerDecoderLayer(nn.Module):
    """One pre-LN block: causal self-attention, cross-attention, feed-forward."""

    def __init__(
        self,
        hidden_size: int,
        *,
        heads: int,
        ff_size: int,
        dropout: float,
        cross_attention: nn.Module,
        attention_dropout: float = 0.0,
        ff_dropout: float = 0.1,
        dropout_unit: str = "element",
    ) -> None:
        super().__init__()
        self.self_norm = nn.LayerNorm(hidden_size)
        self.self_attention = self_attention(hidden_size, heads, attention_dropout)
        self.cross_norm = nn.LayerNorm(hidden_size)
        self.cross_attention = cross_attention
        self.ff_norm = nn.LayerNorm(hidden_size)
        self.feed_forward = FeedForward(hidden_size, ff_size, ff_dropout)
        self.dropout = dropout_layer(dropout, dropout_unit)

    def forward(
        self,
        x: torch.Tensor,
        past: KeyValue | None,
        cross: KeyValue,
        src_mask: torch.Tensor,
        positions: torch.Tensor,
        need_weights: bool,
        target_mask: torch.Tensor | None = None,
        segments: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None, KeyValue]:
        """x (B, T, hidden) continuing after the `past` self-attention keys/values (or None).
        `target_mask` (B, T) bool, True = real target: self-attention sees every real
        position, not only the earlier ones (no future mask); None: causal. `segments`
        (B, S): the source's sentences, for a cross-attention that reads them.

        Returns x (B, T, hidden), cross-attention weights (B, H, T, S) or None, and the
        self-attention keys/values of all positions so far.
        """
        normed = self.self_norm(x)  # (B, T, hidden)
        present = self._project_self(normed, past)  # (B, H, past + T, head_dim) each
        context, _ = self.self_attention.attend(
            normed, *present, target_mask, causal=target_mask is None, need_weights=False
        )
        x = x + self.dropout(context)
        normed = self.cross_norm(x)
        context, weights = self.cross_attention.attend(
            normed, *cross, src_mask, query_positions=positions, need_weights=need_weights,
            **segment_keyword(segments),
        )  # (B, T, hidden), (B, H, T, S)
        x = x + self.dropout(context)
        x = x + self.dropout(self.feed_forward(self.ff_norm(x)))
        return x, weights, present

    def _project_self(self, normed: torch.Tensor, past: KeyValue | None) -> KeyValue:
        """Project the new positions and append them to the cached ones on the time dim."""
        keys, values = self.self_attention.project_memory(normed, normed)  # (B, H, T, head_dim)
        if past is None:
            return keys, values
        past_keys, past_values = past
        return torch.cat([past_keys, keys], dim=2), torch.cat([past_values, values], dim=2)


@dataclass
class TransformerDecoderConfig(TransformerConfig):
    """`decoder=transformer`: the keyword arguments of `TransformerDecoder` (embed_dim and
    the attention factory aside)."""

    _target_: str = "seq2seq.models.decoders.TransformerDecoder"


@registry.register("decoder", "transformer", schema=TransformerDecoderConfig)
class TransformerDecoder(CachedDecoder):
    """Transformer decoder, pre-layer-norm (Vaswani et al. 2017, §3.1; pre-LN as in Xiong et
    al. 2020).

    A stack of pre-LN Transformer decoder blocks; `output_dim == hidden_size`.

    `init_hidden` is ignored. The state holds `position` (the next target position), per
    layer the self-attention cache `self_keys` / `self_values` (None before the first step,
    then `(B, heads, position, head_dim)`) and the projected cross-attention memory.
    """

    source_state = frozenset(("cross_keys", "cross_values", "src_mask"))
    starts_from_summary = False  # init_hidden is ignored

    def __init__(
        self,
        embed_dim: int,
        *,
        attention: Callable[..., nn.Module],
        hidden_size: int = 256,
        num_layers: int = 3,
        heads: int = 4,
        ff_size: int = 1024,
        dropout: float = 0.1,
        ff_dropout: float = 0.1,
        attention_dropout: float = 0.0,
        dropout_unit: str = "element",
        positional: str = "sinusoidal",
        max_positions: int = 1024,
    ) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, got {num_layers}")
        self.embed_dim = embed_dim
        self.hidden_size = hidden_size
        self.output_dim = hidden_size
        self.input_proj = (
            nn.Linear(embed_dim, hidden_size) if embed_dim != hidden_size else nn.Identity()
        )
        self.positions = position_table(positional, hidden_size, max_positions)
        self.layers = nn.ModuleList(
            TransformerDecoderLayer(
                hidden_size,
                heads=heads,
                ff_size=ff_size,
                dropout=dropout,
                ff_dropout=ff_dropout,
                attention_dropout=attention_dropout,
                dropout_unit=dropout_unit,
                cross_attention=attention(
                    query_dim=hidden_size, key_dim=hidden_size, value_dim=hidden_size
                ),
            )
            for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(hidden_size)
        self.dropout = dropout_layer(dropout, dropout_unit)

    @staticmethod
    def flops(node: Mapping[str, Any], embed_dim: int, batch: int, tgt_len: int) -> tuple[int, int]:
        """`W_in` when E ≠ H, then per layer causal self-attention (counted over the full
        T × T square, as the kernels compute it) and the FFN; one cross-attention per layer."""
        tokens, hidden, layers = batch * tgt_len, node["hidden_size"], node["num_layers"]
        per_layer = self_attention_flops(batch, tgt_len, hidden, node["heads"])
        per_layer += FeedForward.flops(tokens, hidden, node["ff_size"])
        return width_change(tokens, embed_dim, hidden) + layers * per_layer, layers

    def init_state(
        self,
        memory: torch.Tensor,
        src_mask: torch.Tensor,
        init_hidden: torch.Tensor | None = None,
        segments: torch.Tensor | None = None,
    ) -> DecoderState:
        """Project every layer's cross-attention keys/values once; empty self-attention caches.
        `segments (B, S)`: the source's sentences, for a cross-attention that reads them."""
        check_memory(memory, src_mask, self.hidden_size)
        cross = [layer.cross_attention.project_memory(memory, memory) for layer in self.layers]
        return with_segments({
            "cross_keys": [keys for keys, _ in cross],  # per layer (B, H, S, *)
            "cross_values": [values for _, values in cross],  # per layer (B, H, S, *)
            "src_mask": src_mask,
            "self_keys": [None] * len(self.layers),
            "self_values": [None] * len(self.layers),
            "position": 0,
        }, segments)

    def forward(
        self,
        tgt_embedded: torch.Tensor,
        state: DecoderState,
        need_weights: bool = True,
        target_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Teacher forcing, `(B, T, embed_dim)` -> `(B, T, hidden)`, attn `(B, layers, H, T, S)`.

        With `target_mask (B, T)` bool (True = real target) the pass runs without the future
        mask, as `full_context` does, and returns its hidden states too: the model
        `Seq2Seq.forward(..., future_mask=False)` trains, for the lab's experiment on masks
        (`seq2seq.lab.masks`). None (the default): causal, `CachedDecoder.forward`."""
        check_target(tgt_embedded, self.embed_dim, single_step=False)
        hidden, attn, _ = self._run(tgt_embedded, state, need_weights, target_mask)
        return hidden, attn

    def full_context(
        self, tgt_embedded: torch.Tensor, state: DecoderState, target_mask: torch.Tensor
    ) -> torch.Tensor | None:
        """Teacher forcing without the future mask (module docstring): `(B, T, embed_dim)`,
        `target_mask (B, T)` bool -> the cross-attention weights `(B, layers, H, T, S)`."""
        return self.forward(tgt_embedded, state, True, target_mask)[1]

    def _run(
        self,
        tgt_embedded: torch.Tensor,
        state: DecoderState,
        need_weights: bool,
        target_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None, DecoderState]:
        """Run T positions after the state's cached ones; return the state extended by T.
        `target_mask`: see `TransformerDecoderLayer.forward` (teacher forcing only)."""
        offset, length = state["position"], tgt_embedded.size(1)
        x = self.dropout(self.positions(self.input_proj(tgt_embedded), offset))  # (B, T, hidden)
        query_positions = target_positions(offset, length, x.device)  # (T,)
        weights, self_keys, self_values = [], [], []
        for index, layer in enumerate(self.layers):
            past = _cached(state, index)
            cross = (state["cross_keys"][index], state["cross_values"][index])
            x, layer_weights, (keys, values) = layer(
                x, past, cross, state["src_mask"], query_positions, need_weights, target_mask,
                state.get("segments"),
            )
            weights.append(layer_weights)  # (B, H, T, S) or None
            self_keys.append(keys)
            self_values.append(values)
        new_state = {
            **state,
            "self_keys": self_keys,
            "self_values": self_values,
            "position": offset + length,
        }
        return self.final_norm(x), stack_layers(weights), new_state


def _cached(state: DecoderState, index: int) -> KeyValue | None:
    """Layer `index`'s cached self-attention (keys, values), or None before the first step."""
    keys, values = state["self_keys"][index], state["self_values"][index]
    return None if keys is None else (keys, values)
