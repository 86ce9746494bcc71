"""Recurrent encoder (Elman RNN, LSTM or GRU), optionally bidirectional and stacked.

The bidirectional encoder of Bahdanau et al. 2015, §3.2: the annotation of source word j
is the concatenation of the forward and backward hidden states, h_j = [→h_j ; ←h_j].
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seq2seq.models.base import Encoder, EncoderOutput
from seq2seq.models.encoders.inputs import check_encoder_inputs

RNN_CELLS: dict[str, type[nn.RNNBase]] = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}


class RNNEncoder(Encoder):
    """`(src_embedded (B, S, embed_dim), src_mask (B, S)) -> EncoderOutput`.

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
    ) -> None:
        super().__init__()
        if cell not in RNN_CELLS:
            raise ValueError(f"cell must be one of {sorted(RNN_CELLS)}, got {cell!r}")
        if num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, got {num_layers}")
        self.embed_dim = embed_dim
        self.input_dropout = nn.Dropout(dropout)
        self.rnn = RNN_CELLS[cell](
            embed_dim,
            hidden_size,
            num_layers=num_layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=dropout if num_layers > 1 else 0.0,  # between layers only
        )
        self.directions = 2 if bidirectional else 1
        self.output_dim = hidden_size * self.directions
        self.final_dim = self.output_dim

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
