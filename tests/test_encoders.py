"""Encoders: padding invariance, final states, receptive fields, explicit formulas, errors."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from helpers import compose_config

from seq2seq import registry
from seq2seq.config.build import instantiate_part
from seq2seq.configs import preset_names
from seq2seq.models.base import Encoder
from seq2seq.models.encoders import CNNEncoder, RNNEncoder, TransformerEncoder

EMBED = 5
HIDDEN = 8
LENGTHS = [5, 2, 4]  # a batch of three right-padded sources

ENCODERS: dict[str, Callable[[], Encoder]] = {
    "rnn-uni": lambda: RNNEncoder(EMBED, cell="rnn", hidden_size=7, bidirectional=False),
    "rnn-bi": lambda: RNNEncoder(EMBED, cell="rnn", hidden_size=7),
    "lstm-uni": lambda: RNNEncoder(EMBED, cell="lstm", hidden_size=7, bidirectional=False),
    "lstm-bi-stacked": lambda: RNNEncoder(
        EMBED, cell="lstm", hidden_size=7, num_layers=2, dropout=0.3
    ),
    "gru-uni": lambda: RNNEncoder(EMBED, cell="gru", hidden_size=7, bidirectional=False),
    "gru-bi": lambda: RNNEncoder(EMBED, cell="gru", hidden_size=7, dropout=0.3),
    "gru-bi-stacked": lambda: RNNEncoder(EMBED, cell="gru", hidden_size=7, num_layers=3),
    "cnn": lambda: CNNEncoder(EMBED, hidden_size=HIDDEN, num_layers=3, kernel_size=3, dropout=0.2),
    "cnn-k5": lambda: CNNEncoder(EMBED, hidden_size=HIDDEN, num_layers=2, kernel_size=5),
    "transformer": lambda: TransformerEncoder(
        EMBED, hidden_size=HIDDEN, num_layers=2, heads=2, ff_size=16, dropout=0.2
    ),
    "transformer-learned": lambda: TransformerEncoder(
        EMBED, hidden_size=EMBED, num_layers=1, heads=1, ff_size=7, positional="learned"
    ),
}


def make_encoder(name: str) -> Encoder:
    torch.manual_seed(0)
    return ENCODERS[name]().eval()


def make_batch(lengths: list[int], extra_padding: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random embeddings (padding positions hold garbage too) and the right-padded mask."""
    src_len = max(lengths) + extra_padding
    src_embedded = torch.randn(len(lengths), src_len, EMBED)  # (B, S, EMBED)
    src_mask = torch.arange(src_len).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)  # (B, S)
    return src_embedded, src_mask


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_output_widths_and_zeroed_padding(name: str) -> None:
    encoder = make_encoder(name)
    src_embedded, src_mask = make_batch(LENGTHS, extra_padding=2)
    out = encoder(src_embedded, src_mask)
    assert out.memory.shape == (3, 7, encoder.output_dim)
    assert out.mask is src_mask
    assert out.memory[~src_mask].eq(0).all()
    assert out.memory[src_mask].abs().sum(-1).gt(0).all()
    if encoder.final_dim is None:
        assert out.final is None
    else:
        assert out.final.shape == (3, encoder.final_dim)


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_appending_padding_changes_nothing(name: str) -> None:
    encoder = make_encoder(name)
    torch.manual_seed(1)
    src_embedded, src_mask = make_batch(LENGTHS)
    longer_embedded, longer_mask = make_batch(LENGTHS, extra_padding=4)
    longer_embedded[:, : src_embedded.size(1)] = src_embedded  # same tokens, 4 more garbage pads
    with torch.no_grad():
        short, long = encoder(src_embedded, src_mask), encoder(longer_embedded, longer_mask)
    torch.testing.assert_close(
        long.memory[:, : src_embedded.size(1)], short.memory, atol=1e-5, rtol=0
    )
    assert long.memory[:, src_embedded.size(1) :].eq(0).all()
    if short.final is not None:
        torch.testing.assert_close(long.final, short.final, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_batched_equals_each_sentence_alone(name: str) -> None:
    encoder = make_encoder(name)
    torch.manual_seed(2)
    src_embedded, src_mask = make_batch(LENGTHS)
    with torch.no_grad():
        batched = encoder(src_embedded, src_mask)
        for row, length in enumerate(LENGTHS):
            alone_mask = torch.ones(1, length, dtype=torch.bool)
            alone = encoder(src_embedded[row : row + 1, :length], alone_mask)
            torch.testing.assert_close(
                batched.memory[row, :length], alone.memory[0], atol=1e-5, rtol=0
            )
            if alone.final is not None:
                torch.testing.assert_close(batched.final[row], alone.final[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["gru-bi", "gru-bi-stacked", "lstm-bi-stacked", "rnn-bi"])
def test_bidirectional_final_is_last_forward_and_first_backward_output(name: str) -> None:
    encoder = make_encoder(name)
    src_embedded, src_mask = make_batch(LENGTHS, extra_padding=1)
    out = encoder(src_embedded, src_mask)
    hidden = encoder.output_dim // 2
    for row, length in enumerate(LENGTHS):
        forward_last = out.memory[row, length - 1, :hidden]  # →h after the last real token
        backward_first = out.memory[row, 0, hidden:]  # ←h after reading back to the first
        torch.testing.assert_close(out.final[row], torch.cat([forward_last, backward_first]))


def test_unidirectional_final_is_the_last_real_output() -> None:
    encoder = make_encoder("lstm-uni")
    src_embedded, src_mask = make_batch(LENGTHS)
    out = encoder(src_embedded, src_mask)
    for row, length in enumerate(LENGTHS):
        torch.testing.assert_close(out.final[row], out.memory[row, length - 1])


def test_gru_matches_an_explicit_cell_loop() -> None:
    """Forward direction of a bi-GRU == GRUCell with the same weights run over the real tokens."""
    encoder = make_encoder("gru-bi")
    src_embedded, src_mask = make_batch(LENGTHS)
    cell = torch.nn.GRUCell(EMBED, 7)
    rnn = encoder.rnn
    cell.load_state_dict(
        {
            "weight_ih": rnn.weight_ih_l0,
            "weight_hh": rnn.weight_hh_l0,
            "bias_ih": rnn.bias_ih_l0,
            "bias_hh": rnn.bias_hh_l0,
        }
    )
    out = encoder(src_embedded, src_mask)
    for row, length in enumerate(LENGTHS):
        state = torch.zeros(1, 7)
        for position in range(length):
            state = cell(src_embedded[row : row + 1, position], state)  # (1, 7)
            torch.testing.assert_close(out.memory[row, position, :7], state[0])


def test_rnn_dropout_only_in_training() -> None:
    torch.manual_seed(0)
    encoder = RNNEncoder(EMBED, hidden_size=7, dropout=0.5)
    src_embedded, src_mask = make_batch(LENGTHS)
    first, second = encoder(src_embedded, src_mask), encoder(src_embedded, src_mask)
    assert not torch.allclose(first.memory, second.memory)
    encoder.eval()
    torch.testing.assert_close(
        encoder(src_embedded, src_mask).memory, encoder(src_embedded, src_mask).memory
    )


@pytest.mark.parametrize(("num_layers", "kernel_size"), [(2, 3), (3, 5), (1, 7)])
def test_cnn_change_stays_within_the_receptive_field(num_layers: int, kernel_size: int) -> None:
    torch.manual_seed(0)
    encoder = CNNEncoder(
        EMBED, hidden_size=HIDDEN, num_layers=num_layers, kernel_size=kernel_size
    ).eval()
    src_embedded, src_mask = make_batch([25])
    changed = src_embedded.clone()
    position = 12
    changed[0, position] += 1.0
    with torch.no_grad():
        difference = (encoder(changed, src_mask).memory - encoder(src_embedded, src_mask).memory)[0]
    reach = num_layers * (kernel_size - 1) // 2
    moved = difference.abs().amax(dim=-1) > 1e-6  # (25,)
    expected = (torch.arange(25) - position).abs() <= reach
    assert torch.equal(moved, expected), (moved.nonzero().flatten(), reach)


def test_cnn_one_layer_matches_the_explicit_equations() -> None:
    """z = W_out ((A ⊗ σ(B) + h) √0.5), [A; B] = conv(h), h = W_in (w + p), written out by hand."""
    torch.manual_seed(0)
    encoder = CNNEncoder(EMBED, hidden_size=4, num_layers=1, kernel_size=3).eval()
    src_embedded, src_mask = make_batch([5])
    e = src_embedded[0] + encoder.positions.positions[:5]  # (5, EMBED)
    h = e @ encoder.input_projection.weight.T + encoder.input_projection.bias  # (5, 4)
    padded = torch.cat([torch.zeros(1, 4), h, torch.zeros(1, 4)])  # (7, 4): "same" zero padding
    conv = encoder.blocks[0].conv
    ab = torch.stack(
        [torch.einsum("okt,tk->o", conv.weight, padded[i : i + 3]) + conv.bias for i in range(5)]
    )  # (5, 8): window (3, 4) against weight (8, 4, 3)
    gated = ab[:, :4] * torch.sigmoid(ab[:, 4:])  # (5, 4)
    expected = ((gated + h) * math.sqrt(0.5)) @ encoder.output_projection.weight.T
    expected = expected + encoder.output_projection.bias
    torch.testing.assert_close(
        encoder(src_embedded, src_mask).memory[0], expected, atol=1e-5, rtol=0
    )


def test_cnn_initialisation_follows_gehring_et_al() -> None:
    torch.manual_seed(0)
    encoder = CNNEncoder(EMBED, hidden_size=64, num_layers=1, kernel_size=3, dropout=0.2)
    conv_std = encoder.blocks[0].conv.weight.std().item()
    assert conv_std == pytest.approx(math.sqrt(4 * 0.8 / (3 * 64)), rel=0.05)
    assert encoder.positions.positions.std().item() == pytest.approx(0.1, rel=0.1)


def test_cnn_rejects_even_kernels() -> None:
    with pytest.raises(ValueError, match="kernel_size"):
        CNNEncoder(EMBED, kernel_size=4)


def test_cnn_rejects_sources_longer_than_max_positions() -> None:
    encoder = CNNEncoder(EMBED, hidden_size=HIDDEN, max_positions=4)
    with pytest.raises(ValueError, match="max_positions"):
        encoder(*make_batch([5]))


def test_rnn_rejects_unknown_cells() -> None:
    with pytest.raises(ValueError, match="cell"):
        RNNEncoder(EMBED, cell="transformer")


@pytest.mark.parametrize("name", ["gru-bi", "cnn", "transformer"])
def test_bad_inputs_raise(name: str) -> None:
    encoder = make_encoder(name)
    src_embedded, src_mask = make_batch(LENGTHS)
    with pytest.raises(ValueError, match="right-padded"):
        encoder(src_embedded, src_mask.flip(1))  # left padding
    with pytest.raises(ValueError, match="bool"):
        encoder(src_embedded, src_mask.long())
    with pytest.raises(ValueError, match="src_embedded"):
        encoder(src_embedded[..., :3], src_mask)
    empty_mask = src_mask.clone()
    empty_mask[1] = False
    with pytest.raises(ValueError, match="at least one real token"):
        encoder(src_embedded, empty_mask)


@pytest.mark.parametrize("name", ["transformer", "transformer-learned"])
def test_transformer_changing_a_real_token_changes_every_real_output(name: str) -> None:
    encoder = make_encoder(name)
    src_embedded, src_mask = make_batch([4], extra_padding=2)
    changed = src_embedded.clone()
    changed[0, 1] = torch.randn(EMBED)  # not a constant shift, which LayerNorm would remove
    with torch.no_grad():
        before, after = encoder(src_embedded, src_mask).memory, encoder(changed, src_mask).memory
    moved = (after - before)[0].abs().amax(dim=-1)  # (6,)
    assert moved[:4].gt(1e-4).all()  # self-attention spreads the change to every real position
    assert moved[4:].eq(0).all()  # padding stays exactly zero


def test_transformer_knows_positions() -> None:
    """Without positions self-attention is permutation-equivariant; with them it is not."""
    encoder = make_encoder("transformer")
    src_embedded, src_mask = make_batch([5])
    order = torch.tensor([4, 2, 0, 1, 3])
    with torch.no_grad():
        straight = encoder(src_embedded, src_mask).memory[:, order]
        permuted = encoder(src_embedded[:, order], src_mask).memory
    assert not torch.allclose(straight, permuted, atol=1e-3)


def test_transformer_block_is_pre_layer_norm() -> None:
    """memory = LN_f(h + FFN(LN₂(h))), h = x + Attn(LN₁(x)), x = W_in e + PE, written out."""
    encoder = make_encoder("transformer")
    encoder.layers = encoder.layers[:1]
    layer = encoder.layers[0]
    src_embedded, src_mask = make_batch([4], extra_padding=1)
    x = encoder.input_projection(src_embedded)[:, :4]  # (1, 4, HIDDEN), real positions only
    x = x + encoder.positions.positions[:4]
    normed = F.layer_norm(x, (HIDDEN,), layer.attention_norm.weight, layer.attention_norm.bias)
    context, _ = layer.self_attention(normed, normed, normed)  # no padding left to mask
    h = x + context
    ffn_in = F.layer_norm(
        h, (HIDDEN,), layer.feed_forward_norm.weight, layer.feed_forward_norm.bias
    )
    ffn = layer.feed_forward
    ffn_out = F.relu(ffn_in @ ffn.expand.weight.T + ffn.expand.bias) @ ffn.contract.weight.T
    h = h + ffn_out + ffn.contract.bias
    expected = F.layer_norm(h, (HIDDEN,), encoder.final_norm.weight, encoder.final_norm.bias)
    memory = encoder(src_embedded, src_mask).memory  # (1, 5, HIDDEN)
    torch.testing.assert_close(memory[:, :4], expected, atol=1e-5, rtol=0)


def test_transformer_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="positional"):
        TransformerEncoder(EMBED, positional="rotary")
    with pytest.raises(ValueError, match="heads"):
        TransformerEncoder(EMBED, hidden_size=HIDDEN, heads=3)


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_follows_the_input_dtype(name: str) -> None:
    encoder = make_encoder(name).double()
    src_embedded, src_mask = make_batch(LENGTHS, extra_padding=1)
    out = encoder(src_embedded.double(), src_mask)
    assert out.memory.dtype == torch.float64
    assert out.memory[~src_mask].eq(0).all()


RNN_MODES = {"rnn": "RNN_TANH", "lstm": "LSTM", "gru": "GRU"}  # torch's name of each cell


@pytest.mark.parametrize("preset", preset_names("encoder"))
def test_every_preset_composes_to_the_constructor_arguments_and_builds(preset: str) -> None:
    config = compose_config([f"encoder={preset}"]).encoder
    component = registry.of_node("encoder", config)
    arguments = set(inspect.signature(component.builder).parameters) - {"embed_dim"}
    assert set(config) - {"_target_"} == arguments
    encoder = instantiate_part(config, "encoder", embed_dim=EMBED)
    assert type(encoder) is component.builder
    if "cell" in config:  # a recurrent preset is named after its cell
        assert encoder.rnn.mode == RNN_MODES[preset]
