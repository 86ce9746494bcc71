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
from seq2seq.models.rnn_cells import Cell, cell_kind, recurrent_flops, set_forget_bias
from seq2seq.models.stacked_rnn import LAYERS, recur


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

    Padding never changes the result. In training on the CPU the recurrence is `recur`
    (seq2seq/models/stacked_rnn.py): one autograd node per layer whose backward does the
    weights' products over all steps at once, with the backward direction reading each
    sentence reversed within its length, so padding only follows real tokens. Otherwise
    (CUDA, no gradients, or the int8 modules of `seq2seq.quantization`) sources are packed
    by length (`pack_padded_sequence`) for the module's own kernel. Both use the same parameters
    (`self.rnn`) and give the same values. Only right padding is accepted (ValueError
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
        self.between_layers = ElementDropout(dropout if num_layers > 1 else 0.0)  # for `recur`
        self.directions = 2 if bidirectional else 1
        self.output_dim = hidden_size * self.directions
        self.final_dim = self.output_dim

    @staticmethod
    def widths(node: Mapping[str, Any]) -> tuple[int, int | None]:
        width = node["hidden_size"] * (2 if node["bidirectional"] else 1)
        return width, width

    @staticmethod
    def flops(node: Mapping[str, Any], embed_dim: int, batch: int, src_len: int) -> int:
        """The stacked (bi)RNN over B·S positions (`recurrent_flops`): what `recur` runs in
        training on the CPU; packed sources (CUDA, evaluation) run only their real tokens."""
        hidden, layers, cell = node["hidden_size"], node["num_layers"], node["cell"]
        directions = 2 if node["bidirectional"] else 1
        return recurrent_flops(batch * src_len, embed_dim, hidden, layers, directions, cell)

    def forward(self, src_embedded: torch.Tensor, src_mask: torch.Tensor) -> EncoderOutput:
        check_encoder_inputs(src_embedded, src_mask, self.embed_dim)
        inputs = self.input_dropout(src_embedded)
        if self._recurs_here(inputs):
            memory, final = self._recur(inputs, src_mask)
        else:
            memory, final = self._run_packed(inputs, src_mask)
        return EncoderOutput(memory=memory, mask=src_mask, final=final)

    def _recurs_here(self, inputs: torch.Tensor) -> bool:
        """`recur` for training on the CPU: its gain is the backward (without gradients the
        module's own kernel is faster), and int8-quantised modules have their own."""
        plain_module = type(self.rnn) in LAYERS
        return inputs.device.type == "cpu" and plain_module and torch.is_grad_enabled()

    def _recur(
        self, inputs: torch.Tensor, src_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The CPU path, in the parameters' dtype whatever the autocast: memory
        (B, S, output_dim) with zeros at padded positions, final (B, final_dim)."""
        lengths = src_mask.sum(dim=1)  # (B,)
        inputs = inputs.to(self.rnn.weight_hh_l0.dtype)
        with torch.autocast("cpu", enabled=False):
            memory, final = recur(self.rnn, inputs, lengths, self.between_layers)
        return memory * src_mask.unsqueeze(-1), final

    def _run_packed(
        self, inputs: torch.Tensor, src_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The module's own kernel over packed sources: memory and final as `_recur`."""
        lengths = src_mask.sum(dim=1).cpu()  # (B,) pack_padded_sequence wants them on the CPU
        packed = pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False)
        packed_out, last_states = self.rnn(packed)
        memory, _ = pad_packed_sequence(
            packed_out, batch_first=True, total_length=src_mask.size(1)
        )  # (B, S, output_dim), zeros at padded positions
        return memory, self._top_layer_final(last_states)

    def _top_layer_final(self, last_states: torch.Tensor | tuple) -> torch.Tensor:
        """h_n `(layers * directions, B, hidden)` -> top layer, directions joined `(B, final_dim)`."""
        h_n = last_states[0] if isinstance(last_states, tuple) else last_states  # LSTM: (h, c)
        batch = h_n.size(1)
        # (layers, directions, B, hidden)
        per_layer = h_n.view(self.rnn.num_layers, self.directions, batch, -1)
        top = per_layer[-1]  # (directions, B, hidden)
        return top.transpose(0, 1).reshape(batch, self.final_dim)  # (B, directions * hidden)
