"""A stacked, optionally bidirectional recurrence over right-padded batches, for the CPU.

`torch.nn.GRU` (and LSTM, RNN) on packed sequences runs each step as its own autograd
node on the CPU: the backward computes the recurrent weights' gradient step by step (a
(B, H)ᵀ·(B, g·H) product and an add per step) and the backward of each step's slice of the
packed input writes a zero tensor of the whole input, so the encoder of `gru_additive`
spent about 30% of an update there. Here each layer (both directions at once) is one
`torch.autograd.Function` (cuDNN's plan, written in PyTorch operators):

* forward: the input products of every step and direction in one product before the loop
  (`gi = x Wᵢᵀ + bᵢ`), then per step one batched product for both directions,
  `gh = h_{t-1} W_hᵀ + b_h` of shape (D, B, g·H), and the cell's element-wise gates;
* backward: per step (last to first) the gates' gradients and `dh_{t-1} = dgh_t W_h`;
  after the loop the recurrent weights' gradient of all steps in one product,
  `dW_h = Σ_t dgh_tᵀ h_{t-1}` over the (S·B) rows.

The backward direction reads each sentence reversed within its length
(`reversal_index`), so both directions run left to right over right padding: padding
comes after every real token and never changes a real position's state. A sentence's
final state is its state at its last real token. The cells, for gate pre-activations
a = gi_t + gh_t (PyTorch's gate order and its two biases):

    RNN  (Elman):       h_t = tanh(a)
    GRU  (Cho 2014):    r, z = σ(a_r), σ(a_z);  n = tanh(gi_n + r ⊙ gh_n);
                        h_t = (1 − z) ⊙ n + z ⊙ h_{t-1}
    LSTM (Hochreiter):  i, f, o = σ(a_i), σ(a_f), σ(a_o);  g = tanh(a_g);
                        c_t = f ⊙ c_{t-1} + i ⊙ g;  h_t = o ⊙ tanh(c_t)
"""

from __future__ import annotations

import torch
from torch import nn


def reversal_index(lengths: torch.Tensor, steps: int) -> torch.Tensor:
    """(B, S) positions that reverse each row's first `lengths[b]` positions and leave its
    padding in place; the index is its own inverse."""
    positions = torch.arange(steps, device=lengths.device).unsqueeze(0)  # (1, S)
    reversed_positions = lengths.unsqueeze(1) - 1 - positions  # (B, S)
    return torch.where(reversed_positions >= 0, reversed_positions, positions)


def gather_steps(values: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """values (B, S, W), index (B, S) -> values[b, index[b, s]] (B, S, W)."""
    return values.gather(1, index.unsqueeze(-1).expand(-1, -1, values.size(-1)))


def _recurrent_product(bias: torch.Tensor, h: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """gh = h Wᵀ + b for every direction: bias (D, G), h (D, B, H), weight (D, G, H) -> (D, B, G)."""
    return torch.baddbmm(bias.unsqueeze(1), h, weight.transpose(1, 2))


def _weight_gradients(
    d_gates: torch.Tensor, h_prev: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """dW_h = Σ_t dgh_tᵀ h_{t-1} and db_h = Σ_t dgh_t over all steps and sentences:
    d_gates (D, S, B, G), h_prev (D, S, B, H) -> (D, G, H), (D, G)."""
    directions, gates, hidden = d_gates.size(0), d_gates.size(-1), h_prev.size(-1)
    rows_gates = d_gates.reshape(directions, -1, gates)  # (D, S·B, G)
    rows_hidden = h_prev.reshape(directions, -1, hidden)  # (D, S·B, H)
    return torch.bmm(rows_gates.transpose(1, 2), rows_hidden), rows_gates.sum(dim=1)


def _per_step(gi: torch.Tensor, width: int) -> torch.Tensor:
    """An empty (D, S, B, width) buffer beside gi (D, S, B, G): one row per step and sentence."""
    return gi.new_empty(*gi.shape[:-1], width)


def _previous_states(h0: torch.Tensor, outputs: torch.Tensor) -> torch.Tensor:
    """h_{t-1} for every step: h0 (D, B, H), outputs (D, S, B, H) -> (D, S, B, H)."""
    return torch.cat([h0.unsqueeze(1), outputs[:, :-1]], dim=1)


class ElmanLayer(torch.autograd.Function):
    """h_t = tanh(gi_t + h_{t-1} W_hᵀ + b_h) for every direction at once.

    gi (D, S, B, H) with the input bias, h0 (D, B, H), weight (D, H, H), bias (D, H)
    -> outputs (D, S, B, H)."""

    @staticmethod
    def forward(ctx, gi, h0, weight, bias):
        outputs = torch.empty_like(gi)
        h = h0
        for t in range(gi.size(1)):
            h = torch.tanh(gi[:, t] + _recurrent_product(bias, h, weight), out=outputs[:, t])
        ctx.save_for_backward(h0, weight, outputs)
        return outputs

    @staticmethod
    def backward(ctx, d_outputs):
        h0, weight, outputs = ctx.saved_tensors
        d_pre = torch.empty_like(outputs)  # (D, S, B, H): d a_t
        dh = torch.zeros_like(h0)
        for t in reversed(range(outputs.size(1))):
            dh = dh + d_outputs[:, t]
            h = outputs[:, t]
            torch.mul(dh, 1 - h * h, out=d_pre[:, t])
            dh = torch.bmm(d_pre[:, t], weight)
        d_weight, d_bias = _weight_gradients(d_pre, _previous_states(h0, outputs))
        return d_pre, dh, d_weight, d_bias


class GRULayer(torch.autograd.Function):
    """The GRU for every direction at once; gates in PyTorch's order (reset, update, new).

    gi (D, S, B, 3H) with the input bias, h0 (D, B, H), weight (D, 3H, H), bias (D, 3H)
    -> outputs (D, S, B, H)."""

    @staticmethod
    def forward(ctx, gi, h0, weight, bias):
        hidden = h0.size(-1)
        outputs, reset_update = _per_step(gi, hidden), _per_step(gi, 2 * hidden)  # h; r, z
        candidates = torch.empty_like(outputs)  # n per step
        gh_new = torch.empty_like(outputs)  # gh_n per step
        h = h0
        for t in range(gi.size(1)):
            gh = _recurrent_product(bias, h, weight)  # (D, B, 3H)
            rz = torch.sigmoid(
                gi[:, t, :, : 2 * hidden] + gh[..., : 2 * hidden], out=reset_update[:, t]
            )
            r, z = rz.chunk(2, dim=-1)
            gh_new[:, t] = gh[..., 2 * hidden :]
            n = torch.tanh(gi[:, t, :, 2 * hidden :] + r * gh_new[:, t], out=candidates[:, t])
            h = torch.add(n, z * (h - n), out=outputs[:, t])
        ctx.save_for_backward(h0, weight, outputs, reset_update, candidates, gh_new)
        return outputs

    @staticmethod
    def backward(ctx, d_outputs):
        h0, weight, outputs, reset_update, candidates, gh_new = ctx.saved_tensors
        hidden = h0.size(-1)
        d_gi = _per_step(outputs, 3 * hidden)  # (D, S, B, 3H)
        d_gh = torch.empty_like(d_gi)
        h_prev = _previous_states(h0, outputs)
        dh = torch.zeros_like(h0)
        for t in reversed(range(outputs.size(1))):
            dh = dh + d_outputs[:, t]
            r, z = reset_update[:, t].chunk(2, dim=-1)
            n = candidates[:, t]
            d_r, d_z, d_n = d_gi[:, t].chunk(3, dim=-1)
            torch.mul(dh * (1 - z), 1 - n * n, out=d_n)  # d(gi_n + r ⊙ gh_n), through tanh
            torch.mul(d_n * gh_new[:, t], r * (1 - r), out=d_r)
            torch.mul(dh * (h_prev[:, t] - n), z * (1 - z), out=d_z)
            d_gh[:, t, :, : 2 * hidden] = d_gi[:, t, :, : 2 * hidden]
            torch.mul(d_n, r, out=d_gh[:, t, :, 2 * hidden :])
            dh = torch.baddbmm(dh * z, d_gh[:, t], weight)
        d_weight, d_bias = _weight_gradients(d_gh, h_prev)
        return d_gi, dh, d_weight, d_bias


class LSTMLayer(torch.autograd.Function):
    """The LSTM for every direction at once; gates in PyTorch's order (i, f, g, o); the
    cell state starts at zero.

    gi (D, S, B, 4H) with the input bias, h0 (D, B, H), weight (D, 4H, H), bias (D, 4H)
    -> outputs (D, S, B, H)."""

    @staticmethod
    def forward(ctx, gi, h0, weight, bias):
        outputs = _per_step(gi, h0.size(-1))
        activations = torch.empty_like(gi)  # σ(i), σ(f), tanh(g), σ(o) per step
        cell_states = torch.empty_like(outputs)  # c_t per step
        tanh_cells = torch.empty_like(outputs)  # tanh(c_t) per step
        h, c = h0, torch.zeros_like(h0)
        for t in range(gi.size(1)):
            a = gi[:, t] + _recurrent_product(bias, h, weight)  # (D, B, 4H)
            i, f, g, o = activations[:, t].chunk(4, dim=-1)
            torch.sigmoid(a, out=activations[:, t])
            torch.tanh(a.chunk(4, dim=-1)[2], out=g)  # the candidate: tanh, not σ
            c = torch.addcmul(f * c, i, g, out=cell_states[:, t])
            h = torch.mul(o, torch.tanh(c, out=tanh_cells[:, t]), out=outputs[:, t])
        ctx.save_for_backward(h0, weight, outputs, activations, cell_states, tanh_cells)
        return outputs

    @staticmethod
    def backward(ctx, d_outputs):
        h0, weight, outputs, activations, cell_states, tanh_cells = ctx.saved_tensors
        d_gates = torch.empty_like(activations)  # (D, S, B, 4H)
        dh, dc = torch.zeros_like(h0), torch.zeros_like(h0)
        for t in reversed(range(outputs.size(1))):
            i, f, g, o = activations[:, t].chunk(4, dim=-1)
            d_i, d_f, d_g, d_o = d_gates[:, t].chunk(4, dim=-1)
            dh = dh + d_outputs[:, t]
            tanh_c = tanh_cells[:, t]
            dc = dc + dh * o * (1 - tanh_c * tanh_c)
            c_prev = cell_states[:, t - 1] if t > 0 else torch.zeros_like(dc)
            torch.mul(dh * tanh_c, o * (1 - o), out=d_o)
            torch.mul(dc * g, i * (1 - i), out=d_i)
            torch.mul(dc * c_prev, f * (1 - f), out=d_f)
            torch.mul(dc * i, 1 - g * g, out=d_g)
            dc = dc * f
            dh = torch.bmm(d_gates[:, t], weight)
        d_weight, d_bias = _weight_gradients(d_gates, _previous_states(h0, outputs))
        return d_gates, dh, d_weight, d_bias


LAYERS: dict[type[nn.RNNBase], type[torch.autograd.Function]] = {
    nn.RNN: ElmanLayer,
    nn.GRU: GRULayer,
    nn.LSTM: LSTMLayer,
}


def recur(
    rnn: nn.RNNBase, inputs: torch.Tensor, lengths: torch.Tensor, between_layers: nn.Module
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run `rnn`'s layers with its own parameters over right-padded inputs (B, S, I).

    Returns the top layer's outputs (B, S, D·H), both directions in source order (padded
    positions hold whatever the recurrence wrote there: mask them), and each sentence's
    final top-layer state (B, D·H): [forward after its last real token ; backward after
    its first]. `between_layers` (dropout) is applied to every layer's input but the first.
    """
    _check_supported(rnn)
    index = reversal_index(lengths, inputs.size(1)) if rnn.bidirectional else None
    layer_function = LAYERS[type(rnn)]
    x = inputs
    for layer in range(rnn.num_layers):
        if layer > 0:
            x = between_layers(x)
        outputs = _run_layer(rnn, layer, layer_function, x, index)  # (D, S, B, H)
        x = _source_order(outputs, index)  # (B, S, D·H)
    batch = inputs.size(0)
    final = outputs[:, lengths - 1, torch.arange(batch, device=inputs.device)]  # (D, B, H)
    return x, final.transpose(0, 1).reshape(batch, -1)


def _check_supported(rnn: nn.RNNBase) -> None:
    if type(rnn) not in LAYERS or not rnn.bias or getattr(rnn, "proj_size", 0):
        raise ValueError(f"recur runs nn.RNN, nn.GRU and nn.LSTM with biases only, got {rnn}")
    if isinstance(rnn, nn.RNN) and rnn.nonlinearity != "tanh":
        raise ValueError(f"recur runs the tanh Elman RNN only, got {rnn.nonlinearity!r}")


def _run_layer(
    rnn: nn.RNNBase,
    layer: int,
    layer_function: type[torch.autograd.Function],
    x: torch.Tensor,
    index: torch.Tensor | None,
) -> torch.Tensor:
    """One layer, every direction: x (B, S, I) -> outputs (D, S, B, H) in the order each
    direction reads (the backward direction's sentences reversed within their lengths)."""
    w_ih, b_ih, w_hh, b_hh = _stacked_parameters(rnn, layer)  # (D, G, I), (D, G), (D, G, H), (D, G)
    read = [x] if index is None else [x, gather_steps(x, index)]
    time_major = torch.stack([each.transpose(0, 1) for each in read])  # (D, S, B, I)
    directions, steps, batch, width = time_major.shape
    gi = torch.baddbmm(  # every step's input product at once: (D, S·B, G)
        b_ih.unsqueeze(1),
        time_major.reshape(directions, steps * batch, width),
        w_ih.transpose(1, 2),
    )
    h0 = x.new_zeros(directions, batch, rnn.hidden_size)
    return layer_function.apply(gi.view(directions, steps, batch, -1), h0, w_hh, b_hh)


def _stacked_parameters(rnn: nn.RNNBase, layer: int) -> list[torch.Tensor]:
    """`rnn`'s weight_ih, bias_ih, weight_hh, bias_hh of `layer`, directions stacked first."""
    suffixes = ["", "_reverse"] if rnn.bidirectional else [""]
    names = ("weight_ih", "bias_ih", "weight_hh", "bias_hh")
    return [
        torch.stack([getattr(rnn, f"{name}_l{layer}{suffix}") for suffix in suffixes])
        for name in names
    ]


def _source_order(outputs: torch.Tensor, index: torch.Tensor | None) -> torch.Tensor:
    """outputs (D, S, B, H) in reading order -> (B, S, D·H) in source order."""
    forward = outputs[0].transpose(0, 1)  # (B, S, H)
    if index is None:
        return forward
    backward = gather_steps(outputs[1].transpose(0, 1), index)  # (B, S, H)
    return torch.cat([forward, backward], dim=-1)
