"""Convolutional encoder of ConvS2S (Gehring et al. 2017, "Convolutional Sequence to Sequence
Learning", §3): learned positions, stacked 1-D convolutions with gated linear units and
scaled residual connections.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from seq2seq import registry
from seq2seq.models.base import Encoder, EncoderOutput
from seq2seq.models.costs import linear
from seq2seq.models.dropout import ElementDropout
from seq2seq.models.encoders.inputs import check_encoder_inputs
from seq2seq.models.family_fields import ConvS2SConfig
from seq2seq.models.positional import LearnedPositions

RESIDUAL_SCALE = math.sqrt(0.5)  # keeps the variance of (block(h) + h) equal to that of h


def linear_for_convs2s(in_features: int, out_features: int, dropout: float) -> nn.Linear:
    """A linear layer initialised as in Gehring et al. 2017, §3.5: W ~ N(0, sqrt(p / n_in)),
    p = 1 - dropout the retain probability of the dropout on its input; bias 0."""
    layer = nn.Linear(in_features, out_features)
    nn.init.normal_(layer.weight, mean=0.0, std=math.sqrt((1.0 - dropout) / in_features))
    nn.init.zeros_(layer.bias)
    return layer


class ConvGLUBlock(nn.Module):
    """One encoder layer of Gehring et al. 2017, §3.2 (eq. in the notation of the paper):

        [A ; B] = W * (mask ⊙ h) + b_w          1-D convolution, width k, 2·d output channels
        h'      = (A ⊗ σ(B) + h) · √0.5          gated linear unit, scaled residual

    Padded positions are zeroed before the convolution, so with "same" zero padding a real
    position sees exactly what it would see if the padding were not there at all.
    Weights ~ N(0, sqrt(4p / (k · d))) (§3.5, a GLU halves the variance twice).
    """

    def __init__(self, hidden_size: int, kernel_size: int, dropout: float) -> None:
        super().__init__()
        self.dropout = ElementDropout(dropout)
        self.conv = nn.Conv1d(hidden_size, 2 * hidden_size, kernel_size, padding=kernel_size // 2)
        std = math.sqrt(4.0 * (1.0 - dropout) / (kernel_size * hidden_size))
        nn.init.normal_(self.conv.weight, mean=0.0, std=std)
        nn.init.zeros_(self.conv.bias)

    def forward(self, hidden: torch.Tensor, channel_mask: torch.Tensor) -> torch.Tensor:
        """hidden `(B, hidden_size, S)`, channel_mask `(B, 1, S)` 1.0 = real -> `(B, hidden_size, S)`."""
        conv_in = self.dropout(hidden * channel_mask)  # (B, d, S), padding zeroed
        gated = F.glu(self.conv(conv_in), dim=1)  # (B, 2d, S) -> A ⊗ σ(B): (B, d, S)
        return (gated + hidden) * RESIDUAL_SCALE


@dataclass
class CNNEncoderConfig(ConvS2SConfig):
    """`encoder=cnn`: the keyword arguments of `CNNEncoder` (embed_dim aside)."""

    _target_: str = "seq2seq.models.encoders.CNNEncoder"


@registry.register("encoder", "cnn", schema=CNNEncoderConfig)
class CNNEncoder(Encoder):
    """Convolutional encoder of ConvS2S (Gehring et al. 2017, "Convolutional Sequence to
    Sequence Learning", §3).

    `(src_embedded (B, S, embed_dim), src_mask (B, S)) -> EncoderOutput`.

        e = dropout(w + p)                       token embedding + learned position (§3.1)
        h⁰ = W_in e                              linear to hidden_size
        hˡ = ConvGLUBlock(hˡ⁻¹),  l = 1..L        see `ConvGLUBlock`
        z = W_out hᴸ                             linear out; memory = z, padding zeroed

    Each output position sees `num_layers * (kernel_size - 1) / 2` source positions on each
    side. final is None. The paper also feeds the decoder z + e as attention values; the
    `EncoderOutput` interface carries one memory tensor, so that variant is left out.
    Only right padding is accepted (positions are numbered from the left).
    """

    def __init__(
        self,
        embed_dim: int,
        *,
        hidden_size: int = 256,
        num_layers: int = 4,
        kernel_size: int = 3,
        dropout: float = 0.1,
        max_positions: int = 1024,
    ) -> None:
        super().__init__()
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be a positive odd number, got {kernel_size}")
        if num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, got {num_layers}")
        self.embed_dim = embed_dim
        self.positions = LearnedPositions(embed_dim, max_positions)
        self.embed_dropout = ElementDropout(dropout)
        self.input_projection = linear_for_convs2s(embed_dim, hidden_size, dropout)
        self.blocks = nn.ModuleList(
            ConvGLUBlock(hidden_size, kernel_size, dropout) for _ in range(num_layers)
        )
        self.output_projection = linear_for_convs2s(hidden_size, hidden_size, 0.0)
        self.output_dim = hidden_size
        self.final_dim = None

    @staticmethod
    def flops(node: Mapping[str, Any], embed_dim: int, batch: int, src_len: int) -> int:
        """`lin(B·S, E, H) + L·lin(B·S, k·H, 2H) + lin(B·S, H, H)`: W_in, each layer's
        width-k convolution to the GLU's 2H channels, W_out."""
        tokens, hidden = batch * src_len, node["hidden_size"]
        blocks = node["num_layers"] * linear(tokens, node["kernel_size"] * hidden, 2 * hidden)
        return linear(tokens, embed_dim, hidden) + blocks + linear(tokens, hidden, hidden)

    def forward(self, src_embedded: torch.Tensor, src_mask: torch.Tensor) -> EncoderOutput:
        check_encoder_inputs(src_embedded, src_mask, self.embed_dim)
        embedded = self.embed_dropout(self.positions(src_embedded))  # (B, S, embed_dim)
        hidden = self.input_projection(embedded).transpose(1, 2)  # (B, d, S), channels first
        channel_mask = src_mask.unsqueeze(1).to(hidden.dtype)  # (B, 1, S)
        for block in self.blocks:
            hidden = block(hidden, channel_mask)  # (B, d, S)
        memory = self.output_projection(hidden.transpose(1, 2))  # (B, S, d)
        memory = memory * src_mask.unsqueeze(-1).to(memory.dtype)  # zero the padding
        return EncoderOutput(memory=memory, mask=src_mask, final=None)
