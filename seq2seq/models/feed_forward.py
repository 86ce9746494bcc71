"""The position-wise feed-forward block shared by Transformer encoder and decoder layers."""

from __future__ import annotations

import torch
from torch import nn

from seq2seq.models.costs import linear
from seq2seq.models.dropout import ElementDropout


class FeedForward(nn.Module):
    """Position-wise feed-forward network (Vaswani et al. 2017, §3.3, eq. 2):

        FFN(x) = W₂ dropout(ReLU(W₁ x + b₁)) + b₂

    applied to every position independently, `(B, T, hidden_size) -> (B, T, hidden_size)`.
    """

    def __init__(self, hidden_size: int, ff_size: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.expand = nn.Linear(hidden_size, ff_size)
        self.activation = nn.ReLU()
        self.dropout = ElementDropout(dropout)
        self.contract = nn.Linear(ff_size, hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inner = self.dropout(self.activation(self.expand(x)))  # (B, T, ff_size)
        return self.contract(inner)  # (B, T, hidden_size)

    @staticmethod
    def flops(tokens: int, hidden_size: int, ff_size: int) -> int:
        """Its two linear layers on `tokens` positions: `lin(N, d, F) + lin(N, F, d)`."""
        return linear(tokens, hidden_size, ff_size) + linear(tokens, ff_size, hidden_size)
