"""Convolutional decoder of ConvS2S (Gehring et al. 2017, §3.2-3.3).

The target embeddings w plus learned positions p give e = w + p (§3.1), projected to the
hidden width: g = W_in e. Each layer l then, on its input h^{l-1} (h^0 = g):

    z_i   = GLU(conv([h^{l-1}_{i-k+1}, ..., h^{l-1}_i])) = A ⊗ σ(B)     causal: left-padded k-1
    d_i   = (W_d z_i + b_d + g_i) · √0.5                                 the attention query
    c_i   = attend(d_i, memory)                                          one attention per layer
    h^l_i = ((z_i + c_i) · √0.5 + h^{l-1}_i) · √0.5                      context, then residual

Position i sees only targets <= i, so teacher forcing needs no mask. Incremental decoding
keeps, per layer, the last k-1 layer inputs in the state: one step convolves that cache
plus the new input, which is exactly the window the full pass uses at that position.

Differences from the paper, kept for simplicity: the attention values are the memory
itself (the paper adds the encoder's input embeddings, z_j + e_j), there is no weight
normalisation and no √m rescaling of the context. `output_dim == hidden_size`: the top
layer's output goes straight to the model's generator (no projection back to embed_dim).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from seq2seq import registry
from seq2seq.models.base import DecoderState
from seq2seq.models.costs import linear
from seq2seq.models.decoders.common import (
    CachedDecoder,
    check_memory,
    segment_keyword,
    stack_layers,
    target_positions,
    with_segments,
)
from seq2seq.models.dropout import ElementDropout
from seq2seq.models.family_fields import ConvS2SConfig
from seq2seq.models.positional import LearnedPositions

SQRT_HALF = math.sqrt(0.5)


class CNNDecoderLayer(nn.Module):
    """One causal GLU convolution with its own attention and scaled residual connections."""

    def __init__(
        self, hidden_size: int, *, kernel_size: int, dropout: float, attention: nn.Module
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.conv = nn.Conv1d(hidden_size, 2 * hidden_size, kernel_size)  # no padding: we pad
        std = math.sqrt(4.0 * (1.0 - dropout) / (kernel_size * hidden_size))  # §3.5 init for GLU
        nn.init.normal_(self.conv.weight, mean=0.0, std=std)
        nn.init.zeros_(self.conv.bias)
        self.query_proj = nn.Linear(hidden_size, hidden_size)  # W_d, b_d
        self.attention = attention
        self.dropout = ElementDropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        past: torch.Tensor,
        target: torch.Tensor,
        memory: tuple[torch.Tensor, torch.Tensor],
        src_mask: torch.Tensor,
        positions: torch.Tensor,
        need_weights: bool,
        segments: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """x (B, T, hidden) after the `past` (B, k-1, hidden) inputs; target g (B, T, hidden);
        `segments` (B, S): the source's sentences, for an attention that reads them.

        Returns h^l (B, T, hidden), weights (B, H, T, S) or None, and the new past.
        """
        window = torch.cat([past, self.dropout(x)], dim=1)  # (B, k-1+T, hidden)
        convolved = self.conv(window.transpose(1, 2)).transpose(1, 2)  # (B, T, 2·hidden)
        gated = F.glu(convolved, dim=-1)  # z: (B, T, hidden)
        query = (self.query_proj(gated) + target) * SQRT_HALF  # d: (B, T, hidden)
        context, weights = self.attention.attend(
            query, *memory, src_mask, query_positions=positions, need_weights=need_weights,
            **segment_keyword(segments),
        )  # (B, T, hidden), (B, H, T, S)
        attended = (gated + context) * SQRT_HALF
        new_past = window[:, window.size(1) - (self.kernel_size - 1) :]  # (B, k-1, hidden)
        return (attended + x) * SQRT_HALF, weights, new_past


@dataclass
class CNNDecoderConfig(ConvS2SConfig):
    """`decoder=cnn`: the keyword arguments of `CNNDecoder` (embed_dim and the attention
    factory aside)."""

    _target_: str = "seq2seq.models.decoders.CNNDecoder"


@registry.register("decoder", "cnn", schema=CNNDecoderConfig)
class CNNDecoder(CachedDecoder):
    """Convolutional decoder of ConvS2S (Gehring et al. 2017, §3.2-3.3).

    A stack of causal convolution layers with attention; `output_dim == hidden_size`.

    `init_hidden` is ignored. The state holds `position` (the next target position), per
    layer the projected memory and `conv_past`, the last k-1 inputs (zeros at the start,
    which is the causal left padding).
    """

    source_state = frozenset(("proj_keys", "proj_values", "src_mask"))
    starts_from_summary = False  # init_hidden is ignored

    def __init__(
        self,
        embed_dim: int,
        *,
        attention: Callable[..., nn.Module],
        hidden_size: int = 256,
        num_layers: int = 4,
        kernel_size: int = 3,
        dropout: float = 0.1,
        max_positions: int = 1024,
    ) -> None:
        super().__init__()
        if kernel_size < 1:
            raise ValueError(f"kernel_size must be at least 1, got {kernel_size}")
        if num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, got {num_layers}")
        self.embed_dim = embed_dim
        self.hidden_size = hidden_size
        self.kernel_size = kernel_size
        self.output_dim = hidden_size
        self.positions = LearnedPositions(embed_dim, max_positions)
        self.input_proj = nn.Linear(embed_dim, hidden_size)
        self.layers = nn.ModuleList(
            CNNDecoderLayer(
                hidden_size,
                kernel_size=kernel_size,
                dropout=dropout,
                attention=attention(
                    query_dim=hidden_size, key_dim=hidden_size, value_dim=hidden_size
                ),
            )
            for _ in range(num_layers)
        )
        self.dropout = ElementDropout(dropout)

    @staticmethod
    def flops(node: Mapping[str, Any], embed_dim: int, batch: int, tgt_len: int) -> tuple[int, int]:
        """`lin(B·T, E, H)`, then per layer the causal convolution `lin(B·T, k·H, 2H)` and
        the attention query `lin(B·T, H, H)`; one attention layer per layer."""
        tokens, hidden, layers = batch * tgt_len, node["hidden_size"], node["num_layers"]
        conv = linear(tokens, node["kernel_size"] * hidden, 2 * hidden)
        per_layer = conv + linear(tokens, hidden, hidden)  # + the attention query d_i
        return linear(tokens, embed_dim, hidden) + layers * per_layer, layers

    def init_state(
        self,
        memory: torch.Tensor,
        src_mask: torch.Tensor,
        init_hidden: torch.Tensor | None = None,
        segments: torch.Tensor | None = None,
    ) -> DecoderState:
        """Project every layer's attention keys/values once; zero convolution caches.
        `segments (B, S)`: the source's sentences, for an attention that reads them."""
        check_memory(memory, src_mask, self.hidden_size)
        projected = [layer.attention.project_memory(memory, memory) for layer in self.layers]
        past = memory.new_zeros(memory.size(0), self.kernel_size - 1, self.hidden_size)
        return with_segments({
            "proj_keys": [keys for keys, _ in projected],  # per layer (B, H, S, *)
            "proj_values": [values for _, values in projected],  # per layer (B, H, S, *)
            "src_mask": src_mask,
            "conv_past": [past] * len(self.layers),  # per layer (B, k-1, hidden)
            "position": 0,
        }, segments)

    def _run(
        self, tgt_embedded: torch.Tensor, state: DecoderState, need_weights: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None, DecoderState]:
        """Run T positions after the state's; return the state advanced by T."""
        offset, length = state["position"], tgt_embedded.size(1)
        embedded = self.dropout(self.positions(tgt_embedded, offset))  # e = w + p: (B, T, embed)
        target = self.input_proj(embedded)  # g: (B, T, hidden)
        query_positions = target_positions(offset, length, target.device)  # (T,)
        x, weights, pasts = target, [], []
        for index, layer in enumerate(self.layers):
            memory = (state["proj_keys"][index], state["proj_values"][index])
            x, layer_weights, past = layer(
                x,
                state["conv_past"][index],
                target,
                memory,
                state["src_mask"],
                query_positions,
                need_weights,
                state.get("segments"),
            )
            weights.append(layer_weights)  # (B, H, T, S) or None
            pasts.append(past)
        new_state = {**state, "conv_past": pasts, "position": offset + length}
        return self.dropout(x), stack_layers(weights), new_state
