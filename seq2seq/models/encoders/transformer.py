"""Transformer encoder (Vaswani et al. 2017, §3.1) with pre-layer-norm blocks.

Pre-norm (Wang et al. 2019, "Learning Deep Transformer Models for Machine Translation";
Xiong et al. 2020) puts the LayerNorm inside the residual branch, which trains stably
without a long learning-rate warm-up; a final LayerNorm normalises the last block's output.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from seq2seq import registry
from seq2seq.models.attention import self_attention, self_attention_flops
from seq2seq.models.base import Encoder, EncoderOutput
from seq2seq.models.costs import width_change
from seq2seq.models.dropout import dropout_layer
from seq2seq.models.encoders.inputs import check_encoder_inputs
from seq2seq.models.family_fields import TransformerConfig
from seq2seq.models.feed_forward import FeedForward
from seq2seq.models.positional import position_table


class PreNormEncoderLayer(nn.Module):
    """One encoder block, `(B, S, d) -> (B, S, d)`:

    x = x + dropout(SelfAttention(LN(x)))     multi-head scaled dot-product, padding keys masked
    x = x + dropout(FFN(LN(x)))               FFN with `ff_dropout` after its ReLU
    """

    def __init__(
        self,
        hidden_size: int,
        heads: int,
        ff_size: int,
        dropout: float,
        attention_dropout: float = 0.0,
        ff_dropout: float = 0.1,
        dropout_unit: str = "element",
    ) -> None:
        super().__init__()
        self.attention_norm = nn.LayerNorm(hidden_size)
        self.self_attention = self_attention(hidden_size, heads, attention_dropout)
        self.feed_forward_norm = nn.LayerNorm(hidden_size)
        self.feed_forward = FeedForward(hidden_size, ff_size, ff_dropout)
        self.dropout = dropout_layer(dropout, dropout_unit)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        normed = self.attention_norm(x)  # (B, S, d)
        context, _ = self.self_attention(normed, normed, normed, src_mask, need_weights=False)
        x = x + self.dropout(context)  # (B, S, d)
        return x + self.dropout(self.feed_forward(self.feed_forward_norm(x)))


@dataclass
class TransformerEncoderConfig(TransformerConfig):
    """`encoder=transformer`: the keyword arguments of `TransformerEncoder` (embed_dim aside)."""

    _target_: str = "seq2seq.models.encoders.TransformerEncoder"


@registry.register("encoder", "transformer", schema=TransformerEncoderConfig)
class TransformerEncoder(Encoder):
    """Transformer encoder (Vaswani et al. 2017, §3.1) with pre-layer-norm blocks.

    `(src_embedded (B, S, embed_dim), src_mask (B, S)) -> EncoderOutput`.

        h⁰ = dropout(P(W_in x))          W_in only when embed_dim != hidden_size; P adds positions
        hˡ = PreNormEncoderLayer(hˡ⁻¹)   l = 1..num_layers
        memory = LN(hᴸ), padding zeroed

    Padding keys are masked in every self-attention, so padding never changes real
    positions. final is None. Only right padding is accepted (positions count from the left).
    With `heads=1` the project's `Attention` has no Q/K/V/output projections (classic
    single-head attention, softmax(x xᵀ/√d) x on LN(x)); use heads >= 2 for the block of
    Vaswani et al.
    """

    def __init__(
        self,
        embed_dim: int,
        *,
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
        if hidden_size % heads != 0:
            raise ValueError(f"hidden_size ({hidden_size}) must be divisible by heads ({heads})")
        self.embed_dim = embed_dim
        same_width = embed_dim == hidden_size
        self.input_projection = nn.Identity() if same_width else nn.Linear(embed_dim, hidden_size)
        self.positions = position_table(positional, hidden_size, max_positions)
        self.dropout = dropout_layer(dropout, dropout_unit)
        self.layers = nn.ModuleList(
            PreNormEncoderLayer(
                hidden_size, heads, ff_size, dropout, attention_dropout, ff_dropout, dropout_unit
            )
            for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(hidden_size)
        self.output_dim = hidden_size
        self.final_dim = None

    @staticmethod
    def flops(node: Mapping[str, Any], embed_dim: int, batch: int, src_len: int) -> int:
        """`W_in` when E ≠ H, then per layer self-attention (S over S) and the FFN."""
        tokens, hidden = batch * src_len, node["hidden_size"]
        layer = self_attention_flops(batch, src_len, hidden, node["heads"])
        layer += FeedForward.flops(tokens, hidden, node["ff_size"])
        return width_change(tokens, embed_dim, hidden) + node["num_layers"] * layer

    def forward(self, src_embedded: torch.Tensor, src_mask: torch.Tensor) -> EncoderOutput:
        check_encoder_inputs(src_embedded, src_mask, self.embed_dim)
        hidden = self.dropout(self.positions(self.input_projection(src_embedded)))  # (B, S, d)
        for layer in self.layers:
            hidden = layer(hidden, src_mask)  # (B, S, d)
        normed = self.final_norm(hidden)  # (B, S, d)
        memory = normed * src_mask.unsqueeze(-1).to(normed.dtype)  # zero the padding
        return EncoderOutput(memory=memory, mask=src_mask, final=None)
