"""Recurrent decoder with attention, in Bahdanau et al. 2015 or Luong et al. 2015 style.

Both styles share one RNN (vanilla, LSTM or GRU, stacked), one pluggable attention module
and one output layer; they differ in WHEN the decoder attends and what it feeds back.

Bahdanau et al. 2015 (§3.1, appendix A.2): attend with the previous top hidden state,
then update the RNN with the context::

    c_t = attend(s_{t-1}, memory)                  (s_0 = initial hidden state)
    s_t = RNN([y_{t-1}; c_t], s_{t-1})
    o_t = tanh(W [s_t; c_t; y_{t-1}])              (the paper uses maxout; we use tanh)

Luong et al. 2015 (§3, eq. 5, "input feeding" §3.3): update the RNN first, then attend
with the new state and combine; the attentional vector h̃ is fed to the next step::

    s_t = RNN([y_{t-1}; h̃_{t-1}], s_{t-1})         (h̃_0 = 0)
    c_t = attend(s_t, memory)
    h̃_t = tanh(W_c [c_t; s_t])                     (eq. 5)
    o_t = h̃_t

`input_feeding=False` drops the fed-back vector from the RNN input (c_t for Bahdanau,
h̃_{t-1} for Luong). The RNN then no longer depends on attention, so `forward` runs the
whole target through the RNN in one call and attends with all T queries in one batched
call, which is much faster on a CPU than a Python loop over positions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

import torch
from torch import nn

from seq2seq import registry
from seq2seq.models.base import Decoder, DecoderState
from seq2seq.models.costs import linear
from seq2seq.models.decoders.common import (
    check_memory,
    check_target,
    concat_steps,
    segment_keyword,
    target_positions,
    with_segments,
)
from seq2seq.models.dropout import ElementDropout
from seq2seq.models.rnn_cells import Cell, cell_kind, recurrent_flops, set_forget_bias

STYLES = ("bahdanau", "luong")
RNNStyle = Enum("RNNStyle", {style: style for style in STYLES})  # the schema's choice


@dataclass
class RNNDecoderConfig:
    """`decoder=rnn|lstm|gru`: the keyword arguments of `RNNDecoder` (embed_dim and the
    attention factory aside)."""

    _target_: str = "seq2seq.models.decoders.RNNDecoder"
    cell: Cell = Cell.gru
    hidden_size: int = 256
    num_layers: int = 1
    dropout: float = 0.1
    style: RNNStyle = RNNStyle.bahdanau
    input_feeding: bool = True
    forget_bias: float | None = 1.0  # LSTM: forget gates' initial bias; null = PyTorch's


@registry.register("decoder", "rnn", schema=RNNDecoderConfig)
class RNNDecoder(Decoder):
    """Recurrent decoder with attention, in Bahdanau et al. 2015 or Luong et al. 2015 style.

    A stacked RNN decoder with one attention layer; `output_dim == hidden_size`.

    Every layer's initial hidden state (and an LSTM's initial cell state) is the bridge's
    `init_hidden`. Dropout is applied between stacked RNN layers and to the input of the
    output layer. The state holds `hidden` (and `cell`) batch first, `(B, layers, hidden)`.
    """

    source_state = frozenset(("proj_keys", "proj_values", "src_mask"))

    def __init__(
        self,
        embed_dim: int,
        *,
        attention: Callable[..., nn.Module],
        cell: str = "gru",
        hidden_size: int = 256,
        num_layers: int = 1,
        dropout: float = 0.1,
        style: str = "bahdanau",
        input_feeding: bool = True,
        forget_bias: float | None = 1.0,
    ) -> None:
        super().__init__()
        _check_options(cell, style, num_layers)
        self.embed_dim = embed_dim
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.cell = cell
        self.style = style
        self.target_read_lag = 2 if style == "bahdanau" else 1  # attends before reading
        self.input_feeding = input_feeding
        self.output_dim = hidden_size
        self.attention = attention(
            query_dim=hidden_size, key_dim=hidden_size, value_dim=hidden_size
        )
        context_dim = self.attention.output_dim
        fed_dim = (context_dim if style == "bahdanau" else hidden_size) if input_feeding else 0
        self.rnn = cell_kind(cell).module(
            embed_dim + fed_dim,
            hidden_size,
            num_layers,
            batch_first=True,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        set_forget_bias(self.rnn, forget_bias)
        combined_dim = hidden_size + context_dim + (embed_dim if style == "bahdanau" else 0)
        self.output_layer = nn.Linear(combined_dim, hidden_size)
        self.dropout = ElementDropout(dropout)

    @staticmethod
    def flops(node: Mapping[str, Any], embed_dim: int, batch: int, tgt_len: int) -> tuple[int, int]:
        """The RNN stack over B·T steps, its input the embedding plus the fed-back vector
        (c_t for Bahdanau, h̃_{t-1} for Luong: H either way, 0 without input feeding), and
        the output layer on [s_t; c_t; y_{t-1}] (Bahdanau) or [c_t; s_t] (Luong); one
        attention layer."""
        tokens, hidden = batch * tgt_len, node["hidden_size"]
        fed = hidden if node["input_feeding"] else 0
        rnn = recurrent_flops(tokens, embed_dim + fed, hidden, node["num_layers"], 1, node["cell"])
        combined = 2 * hidden + (embed_dim if node["style"] == "bahdanau" else 0)
        return rnn + linear(tokens, combined, hidden), 1

    def init_state(
        self,
        memory: torch.Tensor,
        src_mask: torch.Tensor,
        init_hidden: torch.Tensor | None,
        segments: torch.Tensor | None = None,
    ) -> DecoderState:
        """Project the attention keys once and set every layer's state to `init_hidden`.

        `init_hidden (B, hidden_size)`; None starts from zeros. `segments (B, S)`: the
        source's sentence of each position, for an attention that reads them.
        """
        check_memory(memory, src_mask, self.hidden_size)
        batch = memory.size(0)
        if init_hidden is None:
            init_hidden = memory.new_zeros(batch, self.hidden_size)
        if init_hidden.shape != (batch, self.hidden_size):
            raise ValueError(
                f"init_hidden must be ({batch}, {self.hidden_size}), got {tuple(init_hidden.shape)}"
            )
        proj_keys, proj_values = self.attention.project_memory(memory, memory)  # (B, H, S, *)
        hidden = init_hidden.unsqueeze(1).repeat(1, self.num_layers, 1)  # (B, layers, hidden)
        state = {
            "proj_keys": proj_keys,
            "proj_values": proj_values,
            "src_mask": src_mask,
            "hidden": hidden,
            "position": 0,
        }
        state = with_segments(state, segments)
        if self.cell == "lstm":
            state["cell"] = hidden.clone()  # (B, layers, hidden)
        if self.style == "luong":
            state["attentional"] = memory.new_zeros(batch, self.hidden_size)  # h̃_0 = 0
        return state

    def forward(
        self, tgt_embedded: torch.Tensor, state: DecoderState, need_weights: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Teacher forcing: `(B, T, embed_dim)` -> hidden `(B, T, hidden)`, attn `(B, 1, H, T, S)`."""
        check_target(tgt_embedded, self.embed_dim, single_step=False)
        if self.input_feeding:
            return self._forward_stepwise(tgt_embedded, state, need_weights)
        return self._forward_parallel(tgt_embedded, state, need_weights)

    def step(
        self, tgt_embedded: torch.Tensor, state: DecoderState, need_weights: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None, DecoderState]:
        """One position: `(B, 1, embed_dim)` -> `(B, 1, hidden)`, attn `(B, 1, H, 1, S)`, state."""
        check_target(tgt_embedded, self.embed_dim, single_step=True)
        output, weights, new_state = self._advance(tgt_embedded, state, need_weights)
        attn = None if weights is None else weights.unsqueeze(1)  # (B, 1, H, 1, S)
        return output, attn, new_state

    def _forward_stepwise(
        self, tgt_embedded: torch.Tensor, state: DecoderState, need_weights: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Input feeding makes step t depend on step t-1's attention: loop over positions.
        Bahdanau's output layer feeds nothing back, so it runs once over all T after the loop
        (one (B·T)-row product instead of T small ones); Luong's h̃_t is fed back, so it
        runs inside."""
        states, contexts, outputs, weights = [], [], [], []
        # split, not tgt_embedded[:, t : t + 1]: the backward of T slices would write T
        # zero-filled (B, T, embed_dim) gradients; split's backward concatenates once.
        for step_input in tgt_embedded.split(1, dim=1):  # (B, 1, embed_dim) each
            if self.style == "bahdanau":
                step_states, context, step_weights, state = self._recur_bahdanau(
                    step_input, state, need_weights
                )
                states.append(step_states)  # s_t: (B, 1, hidden)
                contexts.append(context)  # c_t: (B, 1, ctx)
            else:
                output, step_weights, state = self._advance(step_input, state, need_weights)
                outputs.append(output)  # (B, 1, hidden)
            weights.append(step_weights)  # (B, H, 1, S) or None
        attn = concat_steps(weights)  # (B, H, T, S) or None
        if self.style == "bahdanau":
            contexts_all = torch.cat(contexts, dim=1)  # (B, T, ctx)
            output = self._combine(torch.cat(states, dim=1), contexts_all, tgt_embedded)
        else:
            output = torch.cat(outputs, dim=1)  # (B, T, hidden)
        return output, None if attn is None else attn.unsqueeze(1)

    def _forward_parallel(
        self, tgt_embedded: torch.Tensor, state: DecoderState, need_weights: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Without input feeding: one RNN call over all T positions, one attention call."""
        states, _ = self._run_rnn(tgt_embedded, state)  # (B, T, hidden)
        if self.style == "bahdanau":
            previous = state["hidden"][:, -1:]  # s_0: (B, 1, hidden)
            queries = torch.cat([previous, states[:, :-1]], dim=1)  # s_{t-1}: (B, T, hidden)
        else:
            queries = states  # s_t
        context, weights = self._attend(queries, state, need_weights)  # (B, T, ctx), (B, H, T, S)
        output = self._combine(states, context, tgt_embedded)  # (B, T, hidden)
        return output, None if weights is None else weights.unsqueeze(1)

    def _advance(
        self, tgt_embedded: torch.Tensor, state: DecoderState, need_weights: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None, DecoderState]:
        """One position of either style -> output (B, 1, hidden), weights (B, H, 1, S), state."""
        if self.style == "bahdanau":
            states, context, weights, new_state = self._recur_bahdanau(
                tgt_embedded, state, need_weights
            )
            return self._combine(states, context, tgt_embedded), weights, new_state
        fed = [state["attentional"].unsqueeze(1)] if self.input_feeding else []  # h̃_{t-1}
        states, recurrent = self._run_rnn(torch.cat([tgt_embedded, *fed], dim=-1), state)
        context, weights = self._attend(states, state, need_weights)  # (B, 1, ctx)
        output = self._combine(states, context, tgt_embedded)  # (B, 1, hidden)
        new_state = {**state, **recurrent, "position": state["position"] + 1}
        new_state["attentional"] = output.squeeze(1)  # h̃_t: (B, hidden)
        return output, weights, new_state

    def _recur_bahdanau(
        self, tgt_embedded: torch.Tensor, state: DecoderState, need_weights: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, DecoderState]:
        """Bahdanau's recurrence for one position: c_t from s_{t-1}, then the RNN over
        [y_{t-1}; c_t] -> s_t (B, 1, hidden), c_t (B, 1, ctx), weights (B, H, 1, S), state."""
        query = state["hidden"][:, -1:]  # s_{t-1}: (B, 1, hidden)
        context, weights = self._attend(query, state, need_weights)  # (B, 1, ctx)
        fed = [context] if self.input_feeding else []
        states, recurrent = self._run_rnn(torch.cat([tgt_embedded, *fed], dim=-1), state)
        return states, context, weights, {**state, **recurrent, "position": state["position"] + 1}

    def _run_rnn(
        self, rnn_input: torch.Tensor, state: DecoderState
    ) -> tuple[torch.Tensor, DecoderState]:
        """Run the RNN from the state's (B, layers, hidden) tensors; return the top layer's
        outputs (B, T, hidden) and the new batch-first recurrent state."""
        hidden = state["hidden"].transpose(0, 1).contiguous()  # (layers, B, hidden)
        if self.cell == "lstm":
            cell = state["cell"].transpose(0, 1).contiguous()  # (layers, B, hidden)
            outputs, (hidden, cell) = self.rnn(rnn_input, (hidden, cell))
            return outputs, {"hidden": hidden.transpose(0, 1), "cell": cell.transpose(0, 1)}
        outputs, hidden = self.rnn(rnn_input, hidden)
        return outputs, {"hidden": hidden.transpose(0, 1)}

    def _attend(
        self, queries: torch.Tensor, state: DecoderState, need_weights: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Queries (B, T, hidden) for target positions position .. position + T - 1."""
        positions = target_positions(state["position"], queries.size(1), queries.device)  # (T,)
        return self.attention.attend(
            queries,
            state["proj_keys"],
            state["proj_values"],
            state["src_mask"],
            query_positions=positions,
            need_weights=need_weights,
            **segment_keyword(state.get("segments")),
        )

    def _combine(
        self, states: torch.Tensor, context: torch.Tensor, tgt_embedded: torch.Tensor
    ) -> torch.Tensor:
        """Bahdanau: tanh(W [s_t; c_t; y_{t-1}]); Luong: tanh(W_c [c_t; s_t]). (B, T, hidden)."""
        if self.style == "bahdanau":
            combined = torch.cat([states, context, tgt_embedded], dim=-1)
        else:
            combined = torch.cat([context, states], dim=-1)
        return torch.tanh(self.output_layer(self.dropout(combined)))


def _check_options(cell: str, style: str, num_layers: int) -> None:
    cell_kind(cell)  # a ValueError naming the cells
    if style not in STYLES:
        raise ValueError(f"style must be one of {list(STYLES)}, got {style!r}")
    if num_layers < 1:
        raise ValueError(f"num_layers must be at least 1, got {num_layers}")
