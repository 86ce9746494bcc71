"""The LSTM's forget-gate bias: where it starts (Jozefowicz et al. 2015) and what it leaves."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import compose_config
from torch import nn

from seq2seq.config.build import ConfigError, build_model
from seq2seq.config.value_checks import check_settings
from seq2seq.models.attention import Attention
from seq2seq.models.decoders import RNNDecoder
from seq2seq.models.encoders import RNNEncoder
from seq2seq.models.rnn_cells import set_forget_bias


def gate_sums(rnn: nn.RNNBase) -> dict[str, torch.Tensor]:
    """bias_ih + bias_hh per layer and direction (what the gates see), `(gates * hidden,)`."""
    params = dict(rnn.named_parameters())
    return {
        name[len("bias_ih") :]: params[name] + params["bias_hh" + name[len("bias_ih") :]]
        for name in params
        if name.startswith("bias_ih")
    }


def test_forget_chunk_sums_to_the_value_and_the_other_gates_keep_torch_init():
    torch.manual_seed(0)
    encoder = RNNEncoder(12, cell="lstm", hidden_size=8, num_layers=2, forget_bias=1.0)
    sums = gate_sums(encoder.rnn)
    assert sorted(sums) == ["_l0", "_l0_reverse", "_l1", "_l1_reverse"]
    bound = 2 / math.sqrt(8)  # two biases, each uniform in ±1/√hidden
    for total in sums.values():
        input_gate, forget_gate, cell, output_gate = total.detach().chunk(4)
        assert torch.equal(forget_gate, torch.ones(8))
        for other in (input_gate, cell, output_gate):
            assert other.abs().max() <= bound and other.std() > 0


def test_none_leaves_pytorch_init_and_other_cells_are_untouched():
    torch.manual_seed(0)
    lstm = nn.LSTM(6, 8)
    before = {k: v.clone() for k, v in lstm.state_dict().items()}
    set_forget_bias(lstm, None)
    assert all(torch.equal(before[k], v) for k, v in lstm.state_dict().items())
    gru = nn.GRU(6, 8)
    before = {k: v.clone() for k, v in gru.state_dict().items()}
    set_forget_bias(gru, 1.0)
    assert all(torch.equal(before[k], v) for k, v in gru.state_dict().items())


def test_the_decoder_and_the_built_model_start_with_the_configured_bias():
    decoder = RNNDecoder(
        16, attention=lambda **dims: Attention(score="additive", **dims), cell="lstm",
        hidden_size=8, num_layers=2, forget_bias=2.0,
    )  # fmt: skip
    for total in gate_sums(decoder.rnn).values():
        assert torch.equal(total.detach().chunk(4)[1], torch.full((8,), 2.0))
    cfg = compose_config(["+experiment=compare_lstm", "decoder.forget_bias=null"])
    model = build_model(cfg, src_vocab_size=50, tgt_vocab_size=60)
    encoder_forget = [t.detach().chunk(4)[1] for t in gate_sums(model.encoder.rnn).values()]
    assert all(torch.equal(f, torch.ones_like(f)) for f in encoder_forget)  # the preset's 1.0
    decoder_forget = [t.detach().chunk(4)[1] for t in gate_sums(model.decoder.rnn).values()]
    assert all(f.std() > 0 for f in decoder_forget)  # null: PyTorch's random init


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_bad_forget_bias_is_refused_naming_the_key(value):
    cfg = compose_config(["+experiment=compare_lstm", f"encoder.forget_bias={value}"])
    with pytest.raises(ConfigError, match="encoder.forget_bias must be a finite number"):
        check_settings(cfg)
