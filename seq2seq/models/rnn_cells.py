"""The recurrent cells that RNN encoders and decoders share: one table of the cells, their
torch modules and the gate blocks each computes per step.

An Elman RNN has one block, `h_t = tanh(W x_t + U h_{t-1} + b)`; a GRU three (reset,
update, candidate; Cho et al. 2014); an LSTM four (input, forget, output gates and the
candidate cell; Hochreiter & Schmidhuber 1997).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import torch
from torch import nn

from seq2seq.models.costs import linear


@dataclass(frozen=True)
class CellKind:
    module: type[nn.RNNBase]
    gates: int  # weight blocks of width hidden per step: W, U are (input, gates·hidden)


RNN_CELLS = {"rnn": CellKind(nn.RNN, 1), "lstm": CellKind(nn.LSTM, 4), "gru": CellKind(nn.GRU, 3)}
Cell = Enum("Cell", {name: name for name in RNN_CELLS})  # the schemas' choice of cell


def cell_kind(cell: str) -> CellKind:
    """The table entry of `cell`; ValueError naming the known cells otherwise."""
    if cell not in RNN_CELLS:
        raise ValueError(f"cell must be one of {sorted(RNN_CELLS)}, got {cell!r}")
    return RNN_CELLS[cell]


def set_forget_bias(rnn: nn.RNNBase, value: float | None) -> None:
    """Start an LSTM's forget gates at `value` (Gers et al. 2000; Jozefowicz et al. 2015
    recommend 1): with f_t = σ(W_f x_t + U_f h_{t-1} + b_f), b_f = 1 keeps σ near 0.73 at
    the start, so the cell state carries through time instead of halving at every step.

    PyTorch adds two biases per layer and direction, `bias_ih` and `bias_hh`, each with the
    gate chunks (input, forget, cell, output): the forget chunk of `bias_ih` becomes `value`
    and that of `bias_hh` zero, so their sum is `value`. With `value=None`, and for other
    cells, PyTorch's initialisation stays: every bias uniform in ±1/√hidden.
    """
    if value is None or not isinstance(rnn, nn.LSTM):
        return
    hidden = rnn.hidden_size
    with torch.no_grad():
        for name, bias in rnn.named_parameters():
            if name.startswith("bias_ih"):
                bias[hidden : 2 * hidden].fill_(value)
            elif name.startswith("bias_hh"):
                bias[hidden : 2 * hidden].zero_()


def recurrent_flops(
    steps: int, input_dim: int, hidden: int, layers: int, directions: int, cell: str
) -> int:
    """A stacked (bi)RNN over `steps` positions: per layer and direction
    `lin(steps, I + H, g·H)`, the input and recurrent products of g gate blocks; the input
    width I is `input_dim` at layer 1 and `directions·H` above it."""
    gates = cell_kind(cell).gates
    total = 0
    for layer in range(layers):
        width = input_dim if layer == 0 else hidden * directions
        total += directions * linear(steps, width + hidden, gates * hidden)
    return total
