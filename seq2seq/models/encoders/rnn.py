"""Recurrent encoder (Elman RNN, LSTM or GRU), optionally bidirectional and stacked.

The bidirectional encoder of Bahdanau et al. 2015, §3.2: the annotation of source word j
is the concatenation of the forward and backward hidden states, h_j = [→h_j ; ←h_j].
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seq2seq import registry
from seq2seq.models.base import Encoder, EncoderOutput
from seq2seq.models.dropout import ElementDropout
from seq2seq.models.encoders.inputs import check_encoder_inputs
from seq2seq.models.recurrent import Cell, cell_kind, recurrent_flops, set_forget_bias


@dataclass
class RNNEncoderConfig:
    """`encoder=rnn|lstm|gru`: the keyword arguments of `RNNEncoder` (embed_dim aside)."""

    _target_: str = "seq2seq.models.encoders.RNNEncoder"
    cell: Cell = Cell.gru
    hidden_size: int = 256
    num_layers: int = 1
    bidirectional: bool = True
    dropout: float = 0.0
    forget_bias: float | None = 1.0  # LSTM: forget gates' initial bias; null = PyTorch's


@registry.register("encoder", "rnn", schema=RNNEncoderConfig)
class RNNEncoder(Encoder):
    """Recurrent encoder (Elman RNN, LSTM or GRU), optionally bidirectional and stacked.

    `(src_embedded (B, S, embed_dim), src_mask (B, S)) -> EncoderOutput`.

    * memory `(B, S, hidden_size * directions)`: the top layer's outputs, both directions
      concatenated; padded positions are exactly zero.
    * final `(B, hidden_size * directions)`: the top layer's last hidden state (the LSTM's h,
      not c), [forward state after the last REAL token ; backward state after the first].

    Sources are packed by length (`pack_padded_sequence`), so padding never enters the
    recurrence and never changes the result. Only right padding is accepted (ValueError
    otherwise). Dropout is applied to the embedded input and between stacked layers.
    """

    def __init__(
        self,
        embed_dim: int,
        *,
        cell: str = "gru",
        hidden_size: int = 256,
        num_layers: int = 1,
        bidirectional: bool = True,
        dropout: float = 0.0,
        forget_bias: float | None = 1.0,
    ) -> None:
        super().__init__()
        rnn_module = cell_kind(cell).module
        if num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, got {num_layers}")
        self.embed_dim = embed_dim
        self.input_dropout = ElementDropout(dropout)
        self.rnn = rnn_module(
            embed_dim,
            hidden_size,
            num_layers=num_layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=dropout if num_layers > 1 else 0.0,  # between layers only
        )
        set_forget_bias(self.rnn, forget_bias)
        self.directions = 2 if bidirectional else 1
        self.output_dim = hidden_size * self.directions
        self.final_dim = self.output_dim

    @staticmethod
    def widths(node: Mapping[str, Any]) -> tuple[int, int | None]:
        width = node["hidden_size"] * (2 if node["bidirectional"] else 1)
        return width, width

    @staticmethod
    def flops(node: Mapping[str, Any], embed_dim: int, batch: int, src_len: int) -> int:
        """The stacked (bi)RNN over B·S positions (`recurrent_flops`); packed sources run
        only their real tokens, so with padding this is an upper bound."""
        hidden, layers, cell = node["hidden_size"], node["num_layers"], node["cell"]
        directions = 2 if node["bidirectional"] else 1
        return recurrent_flops(batch * src_len, embed_dim, hidden, layers, directions, cell)

    def forward(self, src_embedded: torch.Tensor, src_mask: torch.Tensor) -> EncoderOutput:
        check_encoder_inputs(src_embedded, src_mask, self.embed_dim)
        lengths = src_mask.sum(dim=1).cpu()  # (B,) pack_padded_sequence wants them on the CPU
        packed = pack_padded_sequence(
            self.input_dropout(src_embedded), lengths, batch_first=True, enforce_sorted=False
        )
        packed_out, last_states = self.rnn(packed)
        memory, _ = pad_packed_sequence(
            packed_out, batch_first=True, total_length=src_mask.size(1)
        )  # (B, S, output_dim), zeros at padded positions
        return EncoderOutput(memory=memory, mask=src_mask, final=self._top_layer_final(last_states))

    def _top_layer_final(self, last_states: torch.Tensor | tuple) -> torch.Tensor:
        """h_n `(layers * directions, B, hidden)` -> top layer, directions joined `(B, final_dim)`."""
        h_n = last_states[0] if isinstance(last_states, tuple) else last_states  # LSTM: (h, c)
        batch = h_n.size(1)
        # (layers, directions, B, hidden)
        per_layer = h_n.view(self.rnn.num_layers, self.directions, batch, -1)
        top = per_layer[-1]  # (directions, B, hidden)
        return top.transpose(0, 1).reshape(batch, self.final_dim)  # (B, directions * hidden)
