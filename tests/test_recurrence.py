"""The CPU recurrence of the RNN encoders (`seq2seq.models.stacked_rnn`): its values and
gradients against PyTorch's own packed modules, its hand-written backward against finite
differences, and the encoder's two paths against each other."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seq2seq.models.encoders import RNNEncoder
from seq2seq.models.stacked_rnn import ElmanLayer, GRULayer, LSTMLayer, recur, reversal_index

LENGTHS = [7, 3, 5, 1, 6]  # right-padded to 8: every sentence has padding after it
STEPS = 8
EMBED, HIDDEN = 6, 4


def padded_batch(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inputs (B, S, EMBED) with garbage at padded positions, lengths (B,), mask (B, S)."""
    lengths = torch.tensor(LENGTHS)
    inputs = torch.randn(len(LENGTHS), STEPS, EMBED, dtype=dtype, requires_grad=True)
    mask = torch.arange(STEPS).unsqueeze(0) < lengths.unsqueeze(1)
    return inputs, lengths, mask


def packed_reference(
    rnn: nn.RNNBase, inputs: torch.Tensor, lengths: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """PyTorch's module over packed sentences: outputs (B, S, D·H) and the top layer's
    final states (B, D·H)."""
    packed = pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False)
    outputs, last = rnn(packed)
    outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=inputs.size(1))
    h_n = last[0] if isinstance(last, tuple) else last  # (layers·D, B, H)
    directions = 2 if rnn.bidirectional else 1
    top = h_n.view(rnn.num_layers, directions, inputs.size(0), -1)[-1]  # (D, B, H)
    return outputs, top.transpose(0, 1).reshape(inputs.size(0), -1)


MODULES = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("cell", sorted(MODULES))
def test_recur_equals_the_packed_module_in_values_and_gradients(
    cell: str, bidirectional: bool, layers: int
) -> None:
    torch.manual_seed(0)
    rnn = MODULES[cell](
        EMBED, HIDDEN, num_layers=layers, batch_first=True, bidirectional=bidirectional
    ).double()
    inputs, lengths, mask = padded_batch(torch.float64)
    expected_outputs, expected_final = packed_reference(rnn, inputs, lengths)
    outputs, final = recur(rnn, inputs, lengths, nn.Identity())
    outputs = outputs * mask.unsqueeze(-1)  # recur leaves padded positions to the caller
    torch.testing.assert_close(outputs, expected_outputs, rtol=0, atol=1e-12)
    torch.testing.assert_close(final, expected_final, rtol=0, atol=1e-12)

    weights_out, weights_final = torch.randn_like(outputs), torch.randn_like(final)
    wrt = [inputs, *rnn.parameters()]

    def gradients(out: torch.Tensor, fin: torch.Tensor) -> tuple[torch.Tensor, ...]:
        loss = (out * weights_out).sum() + (fin * weights_final).sum()
        return torch.autograd.grad(loss, wrt, retain_graph=True)

    for got, want in zip(gradients(outputs, final), gradients(expected_outputs, expected_final)):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("layer, gates", [(ElmanLayer, 1), (GRULayer, 3), (LSTMLayer, 4)])
def test_hand_written_backward_matches_finite_differences(
    layer: type[torch.autograd.Function], gates: int
) -> None:
    torch.manual_seed(1)
    directions, steps, batch, hidden = 2, 3, 2, 3
    shapes = [
        (directions, steps, batch, gates * hidden),  # gi
        (directions, batch, hidden),  # h0
        (directions, gates * hidden, hidden),  # W_h
        (directions, gates * hidden),  # b_h
    ]
    arguments = [torch.randn(s, dtype=torch.float64, requires_grad=True) for s in shapes]
    assert torch.autograd.gradcheck(layer.apply, arguments)


def test_reversal_index_reverses_real_positions_and_keeps_padding() -> None:
    index = reversal_index(torch.tensor([3, 1, 4]), 4)
    assert index.tolist() == [[2, 1, 0, 3], [0, 1, 2, 3], [3, 2, 1, 0]]
    assert torch.equal(index.gather(1, index), torch.arange(4).expand(3, 4))  # its own inverse


@pytest.mark.parametrize("cell", sorted(MODULES))
def test_the_encoder_gives_the_same_values_with_and_without_gradients(cell: str) -> None:
    """With gradients on the CPU the encoder runs `recur`; without, the packed module."""
    torch.manual_seed(2)
    encoder = RNNEncoder(EMBED, cell=cell, hidden_size=HIDDEN, num_layers=2).double().eval()
    inputs, _, mask = padded_batch(torch.float64)
    assert encoder._recurs_here(inputs)
    trained = encoder(inputs, mask)
    with torch.no_grad():
        assert not encoder._recurs_here(inputs)
        evaluated = encoder(inputs, mask)
    torch.testing.assert_close(trained.memory, evaluated.memory, rtol=0, atol=1e-12)
    torch.testing.assert_close(trained.final, evaluated.final, rtol=0, atol=1e-12)
    assert trained.memory[~mask].eq(0).all()


def test_runs_in_float32_under_bf16_autocast() -> None:
    torch.manual_seed(3)
    encoder = RNNEncoder(EMBED, cell="gru", hidden_size=HIDDEN)
    inputs, _, mask = padded_batch(torch.float32)
    expected = encoder(inputs, mask)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = encoder(inputs, mask)
    assert out.memory.dtype == torch.float32
    torch.testing.assert_close(out.memory, expected.memory)


def test_recur_refuses_what_it_does_not_compute() -> None:
    lengths = torch.tensor([2])
    inputs = torch.randn(1, 2, EMBED)
    unsupported = [
        nn.RNN(EMBED, HIDDEN, batch_first=True, nonlinearity="relu"),
        nn.LSTM(EMBED, HIDDEN, batch_first=True, proj_size=2),
        nn.GRU(EMBED, HIDDEN, batch_first=True, bias=False),
    ]
    for rnn in unsupported:
        with pytest.raises(ValueError, match="recur runs"):
            recur(rnn, inputs, lengths, nn.Identity())
