"""Decoders: incremental == full, causality, padding, reorder_state, shapes, the equations."""

from __future__ import annotations

import itertools
from functools import partial

import pytest
import torch
import torch.nn.functional as F

from seq2seq.models.attention import Attention, NoAttention
from seq2seq.models.base import reorder_state
from seq2seq.models.decoders import CNNDecoder, RNNDecoder, TransformerDecoder
from seq2seq.models.decoders.rnn import STYLES
from seq2seq.models.positional import sinusoid_table
from seq2seq.models.rnn_cells import RNN_CELLS

EMBED, HIDDEN, BATCH, SRC_LEN, TGT_LEN = 5, 8, 3, 7, 6
ATOL = 1e-5

ATTENTIONS = {
    "additive": partial(Attention, score="additive", region="soft"),
    "multihead": partial(Attention, score="scaled_dot", region="soft", heads=2),
    "local_m": partial(
        Attention, score="general", region={"name": "local", "mode": "monotonic", "window": 2}
    ),
    "local_p": partial(
        Attention, score="general", region={"name": "local", "mode": "predictive", "window": 2}
    ),
    "none": NoAttention,
}
RNN_VARIANTS = list(itertools.product(RNN_CELLS, STYLES, [True, False]))


def rnn_decoder(attention: str, cell="gru", style="bahdanau", input_feeding=True, num_layers=2):
    return RNNDecoder(
        EMBED,
        attention=ATTENTIONS[attention],
        cell=cell,
        hidden_size=HIDDEN,
        num_layers=num_layers,
        dropout=0.3,
        style=style,
        input_feeding=input_feeding,
    )


def cnn_decoder(attention: str, num_layers=2, kernel_size=3):
    return CNNDecoder(
        EMBED,
        attention=ATTENTIONS[attention],
        hidden_size=HIDDEN,
        num_layers=num_layers,
        kernel_size=kernel_size,
        dropout=0.3,
        max_positions=16,
    )


def transformer_decoder(attention: str, num_layers=2, positional="sinusoidal"):
    return TransformerDecoder(
        EMBED,
        attention=ATTENTIONS[attention],
        hidden_size=HIDDEN,
        num_layers=num_layers,
        heads=2,
        ff_size=16,
        dropout=0.3,
        positional=positional,
        max_positions=16,
    )


DECODERS = {
    **{
        f"{cell}-{style}-{'feed' if feed else 'nofeed'}": partial(
            rnn_decoder, cell=cell, style=style, input_feeding=feed
        )
        for cell, style, feed in RNN_VARIANTS
    },
    "cnn": cnn_decoder,
    "cnn-k1": partial(cnn_decoder, kernel_size=1),
    "transformer": transformer_decoder,
    "transformer-learned": partial(transformer_decoder, positional="learned"),
}


def make(decoder: str, attention: str, seed: int = 0):
    torch.manual_seed(seed)
    return DECODERS[decoder](attention).eval()


def source(batch=BATCH, seed=1):
    """Memory (B, S, hidden), a right-padded mask with lengths S, S-2, S-4, init_hidden."""
    generator = torch.Generator().manual_seed(seed)
    memory = torch.randn(batch, SRC_LEN, HIDDEN, generator=generator)
    lengths = torch.tensor([SRC_LEN, SRC_LEN - 2, SRC_LEN - 4, 1][:batch])
    src_mask = torch.arange(SRC_LEN).unsqueeze(0) < lengths.unsqueeze(1)  # (B, S)
    memory = memory * src_mask.unsqueeze(-1)
    init_hidden = torch.tanh(torch.randn(batch, HIDDEN, generator=generator))
    return memory, src_mask, init_hidden


def target(batch=BATCH, length=TGT_LEN, seed=2):
    return torch.randn(batch, length, EMBED, generator=torch.Generator().manual_seed(seed))


def run_steps(decoder, tgt, state, need_weights=True):
    """Step through tgt one position at a time -> hidden (B, T, D), attn (B, L, H, T, S)."""
    outputs, weights = [], []
    for t in range(tgt.size(1)):
        output, attn, state = decoder.step(tgt[:, t : t + 1], state, need_weights)
        outputs.append(output)
        weights.append(attn)
    attn = None if weights[0] is None else torch.cat(weights, dim=3)
    return torch.cat(outputs, dim=1), attn, state


def assert_same_attention(actual, expected):
    assert (actual is None) == (expected is None)
    if expected is not None:
        torch.testing.assert_close(actual, expected, atol=ATOL, rtol=0)


# ----------------------------------------------------------------- incremental == full


@pytest.mark.parametrize("attention", list(ATTENTIONS))
@pytest.mark.parametrize("decoder", list(DECODERS))
@torch.no_grad()
def test_step_by_step_equals_teacher_forcing(decoder, attention):
    model = make(decoder, attention)
    tgt = target()
    state = model.init_state(*source())
    full, full_attn = model(tgt, state)
    stepped, stepped_attn, _ = run_steps(model, tgt, state)
    torch.testing.assert_close(stepped, full, atol=ATOL, rtol=0)
    assert_same_attention(stepped_attn, full_attn)
    assert (full_attn is None) == (attention == "none")


@pytest.mark.parametrize(
    "decoder", ["gru-luong-nofeed", "lstm-bahdanau-feed", "cnn", "transformer"]
)
@torch.no_grad()
def test_forward_continues_after_steps(decoder):
    """forward() from a state that already stepped equals stepping on (offsets, caches)."""
    model = make(decoder, "local_m")
    tgt = target()
    state = model.init_state(*source())
    full, full_attn = model(tgt, state)
    _, _, middle = run_steps(model, tgt[:, :2], state)
    rest, rest_attn = model(tgt[:, 2:], middle)
    torch.testing.assert_close(rest, full[:, 2:], atol=ATOL, rtol=0)
    torch.testing.assert_close(rest_attn, full_attn[:, :, :, 2:], atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    "decoder", ["gru-bahdanau-feed", "lstm-luong-nofeed", "cnn", "transformer"]
)
@torch.no_grad()
def test_need_weights_false_gives_same_output(decoder):
    model = make(decoder, "multihead")
    tgt = target()
    state = model.init_state(*source())
    with_weights, _ = model(tgt, state, need_weights=True)
    without, attn = model(tgt, state, need_weights=False)
    torch.testing.assert_close(without, with_weights, atol=ATOL, rtol=0)
    assert attn is None  # the fused kernel returns no weights


@torch.no_grad()
def test_forward_leaves_state_unchanged():
    model = make("transformer", "additive")
    state = model.init_state(*source())
    model(target(), state)
    assert state["position"] == 0 and all(keys is None for keys in state["self_keys"])


# ----------------------------------------------------------------- causality


@pytest.mark.parametrize("decoder", ["transformer", "transformer-learned", "cnn"])
@pytest.mark.parametrize("changed", [0, 2, 5])
@torch.no_grad()
def test_changing_a_target_changes_no_earlier_output(decoder, changed):
    model = make(decoder, "additive")
    state = model.init_state(*source())
    tgt = target()
    edited = tgt.clone()
    edited[:, changed] += 1.0
    before, _ = model(tgt, state)
    after, _ = model(edited, state)
    torch.testing.assert_close(after[:, :changed], before[:, :changed], atol=0, rtol=0)
    assert (after[:, changed] - before[:, changed]).abs().min() > 1e-4


@pytest.mark.parametrize("kernel_size", [2, 3])
@torch.no_grad()
def test_cnn_receptive_field_is_causal_window(kernel_size):
    """One layer of width k: output i depends on targets i-k+1 .. i and on no other."""
    torch.manual_seed(0)
    model = cnn_decoder("additive", num_layers=1, kernel_size=kernel_size).eval()
    state = model.init_state(*source())
    tgt = target()
    edited = tgt.clone()
    edited[:, 1] += 1.0
    changed = (model(edited, state)[0] - model(tgt, state)[0]).abs().amax(dim=(0, 2)) > 1e-6
    expected = torch.zeros(TGT_LEN, dtype=torch.bool)
    expected[1 : 1 + kernel_size] = True
    assert torch.equal(changed, expected)


# ----------------------------------------------------------------- source padding


@pytest.mark.parametrize("attention", list(ATTENTIONS))
@pytest.mark.parametrize(
    "decoder", ["gru-bahdanau-feed", "lstm-luong-nofeed", "cnn", "transformer"]
)
@torch.no_grad()
def test_source_padding_changes_nothing(decoder, attention):
    model = make(decoder, attention)
    memory, src_mask, init_hidden = source()
    padded_memory = torch.cat([memory, torch.randn(BATCH, 3, HIDDEN)], dim=1)  # junk, masked
    padded_mask = torch.cat([src_mask, torch.zeros(BATCH, 3, dtype=torch.bool)], dim=1)
    tgt = target()
    hidden, attn = model(tgt, model.init_state(memory, src_mask, init_hidden))
    padded_hidden, padded_attn = model(
        tgt, model.init_state(padded_memory, padded_mask, init_hidden)
    )
    torch.testing.assert_close(padded_hidden, hidden, atol=ATOL, rtol=0)
    if attn is not None:
        torch.testing.assert_close(padded_attn[..., :SRC_LEN], attn, atol=ATOL, rtol=0)
        assert torch.equal(padded_attn[..., SRC_LEN:], torch.zeros_like(padded_attn[..., SRC_LEN:]))
        masked = ~src_mask[:, None, None, None, :].expand_as(attn)
        assert torch.equal(attn[masked], torch.zeros_like(attn[masked]))


# ----------------------------------------------------------------- reorder_state


@pytest.mark.parametrize(
    "decoder", ["lstm-luong-feed", "gru-bahdanau-nofeed", "cnn", "transformer"]
)
@torch.no_grad()
def test_reordered_state_steps_like_the_original_rows(decoder):
    model = make(decoder, "local_p")
    memory, src_mask, init_hidden = source(batch=2)
    tgt = target(batch=2)
    _, _, state = run_steps(model, tgt[:, :2], model.init_state(memory, src_mask, init_hidden))
    expand = torch.tensor([0, 0, 1, 1])
    expanded = reorder_state(state, expand)
    original, original_attn, _ = run_steps(model, tgt[:, 2:], state)
    beamed, beamed_attn, _ = run_steps(model, tgt[expand, 2:], expanded)
    torch.testing.assert_close(beamed, original[expand], atol=ATOL, rtol=0)
    torch.testing.assert_close(beamed_attn, original_attn[expand], atol=ATOL, rtol=0)


# ----------------------------------------------------------------- shapes


@pytest.mark.parametrize(
    ("decoder", "layers"),
    [("gru-luong-feed", 1), ("rnn-bahdanau-nofeed", 1), ("cnn", 2), ("transformer", 2)],
)
@pytest.mark.parametrize(("attention", "heads"), [("additive", 1), ("multihead", 2)])
@torch.no_grad()
def test_attention_shape_is_batch_layers_heads_tgt_src(decoder, layers, attention, heads):
    model = make(decoder, attention)
    state = model.init_state(*source())
    hidden, attn = model(target(), state)
    assert hidden.shape == (BATCH, TGT_LEN, model.output_dim) and model.output_dim == HIDDEN
    assert attn.shape == (BATCH, layers, heads, TGT_LEN, SRC_LEN)
    torch.testing.assert_close(attn.sum(-1), torch.ones(attn.shape[:-1]), atol=ATOL, rtol=0)
    _, step_attn, _ = model.step(target()[:, :1], state)
    assert step_attn.shape == (BATCH, layers, heads, 1, SRC_LEN)


# ----------------------------------------------------------------- devices

DEVICES = ["meta"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "decoder", ["lstm-luong-feed", "gru-bahdanau-nofeed", "cnn", "transformer"]
)
@torch.no_grad()
def test_new_tensors_follow_the_input_device(decoder, device):
    """On the meta device a tensor made on the CPU by mistake raises; on CUDA step == full."""
    model = make(decoder, "local_m").to(device)
    memory, src_mask, init_hidden = (tensor.to(device) for tensor in source())
    tgt = target().to(device)
    state = model.init_state(memory, src_mask, init_hidden)
    full, full_attn = model(tgt, state)
    stepped, stepped_attn, _ = run_steps(model, tgt, state)
    assert full.device.type == stepped.device.type == stepped_attn.device.type == device
    if device != "meta":
        torch.testing.assert_close(stepped, full, atol=ATOL, rtol=0)
        torch.testing.assert_close(stepped_attn, full_attn, atol=ATOL, rtol=0)


# ----------------------------------------------------------------- the equations


def dot_attention(query, memory, src_mask):
    """softmax(q·m) over real keys, written out: (B, T, D), (B, S, D) -> context, weights."""
    scores = torch.einsum("btd,bsd->bts", query, memory)
    scores = scores.masked_fill(~src_mask[:, None, :], float("-inf"))
    weights = scores.softmax(dim=-1)  # (B, T, S)
    return weights @ memory, weights


def gru_cell(rnn, x, h):
    """One step of a one-layer nn.GRU from its weights (PyTorch's GRU equations)."""
    gates_x = x @ rnn.weight_ih_l0.T + rnn.bias_ih_l0
    gates_h = h @ rnn.weight_hh_l0.T + rnn.bias_hh_l0
    reset_x, update_x, new_x = gates_x.chunk(3, dim=-1)
    reset_h, update_h, new_h = gates_h.chunk(3, dim=-1)
    reset = torch.sigmoid(reset_x + reset_h)
    update = torch.sigmoid(update_x + update_h)
    candidate = torch.tanh(new_x + reset * new_h)
    return (1 - update) * candidate + update * h


@torch.no_grad()
def test_luong_without_input_feeding_follows_eq5():
    """h̃_t = tanh(W_c [c_t; s_t]), c_t from attending with s_t (Luong et al. 2015, eq. 5)."""
    torch.manual_seed(0)
    model = RNNDecoder(
        EMBED,
        attention=partial(Attention, score="dot"),
        hidden_size=HIDDEN,
        style="luong",
        input_feeding=False,
    ).eval()
    memory, src_mask, init_hidden = source()
    tgt = target()
    hidden, attn = model(tgt, model.init_state(memory, src_mask, init_hidden))
    state, expected_states = init_hidden, []
    for t in range(TGT_LEN):
        state = gru_cell(model.rnn, tgt[:, t], state)
        expected_states.append(state)
    states = torch.stack(expected_states, dim=1)  # (B, T, hidden)
    context, weights = dot_attention(states, memory, src_mask)
    expected = torch.tanh(
        F.linear(
            torch.cat([context, states], -1), model.output_layer.weight, model.output_layer.bias
        )
    )
    torch.testing.assert_close(hidden, expected, atol=ATOL, rtol=0)
    torch.testing.assert_close(attn[:, 0, 0], weights, atol=ATOL, rtol=0)


@torch.no_grad()
def test_bahdanau_attends_with_previous_state_and_feeds_context():
    """c_t = attend(s_{t-1}); s_t = GRU([y_{t-1}; c_t], s_{t-1}); o_t = tanh(W [s_t; c_t; y])."""
    torch.manual_seed(0)
    model = RNNDecoder(EMBED, attention=partial(Attention, score="dot"), hidden_size=HIDDEN).eval()
    memory, src_mask, init_hidden = source()
    tgt = target()
    hidden, attn = model(tgt, model.init_state(memory, src_mask, init_hidden))
    state = init_hidden
    for t in range(TGT_LEN):
        context, weights = dot_attention(state.unsqueeze(1), memory, src_mask)
        context = context.squeeze(1)
        state = gru_cell(model.rnn, torch.cat([tgt[:, t], context], -1), state)
        combined = torch.cat([state, context, tgt[:, t]], -1)
        expected = torch.tanh(
            F.linear(combined, model.output_layer.weight, model.output_layer.bias)
        )
        torch.testing.assert_close(hidden[:, t], expected, atol=ATOL, rtol=0)
        torch.testing.assert_close(attn[:, 0, 0, t], weights[:, 0], atol=ATOL, rtol=0)


@torch.no_grad()
def test_luong_input_feeding_feeds_previous_attentional_vector():
    """With input feeding the RNN input at step t is [y_{t-1}; h̃_{t-1}], h̃_0 = 0."""
    torch.manual_seed(0)
    model = RNNDecoder(
        EMBED, attention=partial(Attention, score="dot"), hidden_size=HIDDEN, style="luong"
    ).eval()
    memory, src_mask, init_hidden = source()
    tgt = target()
    hidden, _ = model(tgt, model.init_state(memory, src_mask, init_hidden))
    state, attentional = init_hidden, torch.zeros(BATCH, HIDDEN)
    for t in range(TGT_LEN):
        state = gru_cell(model.rnn, torch.cat([tgt[:, t], attentional], -1), state)
        context, _ = dot_attention(state.unsqueeze(1), memory, src_mask)
        combined = torch.cat([context.squeeze(1), state], -1)
        attentional = torch.tanh(
            F.linear(combined, model.output_layer.weight, model.output_layer.bias)
        )
        torch.testing.assert_close(hidden[:, t], attentional, atol=ATOL, rtol=0)


@torch.no_grad()
def test_every_lstm_layer_starts_from_init_hidden():
    torch.manual_seed(0)
    model = rnn_decoder("additive", cell="lstm", num_layers=3).eval()
    memory, src_mask, init_hidden = source()
    state = model.init_state(memory, src_mask, init_hidden)
    for name in ("hidden", "cell"):
        assert state[name].shape == (BATCH, 3, HIDDEN)
        torch.testing.assert_close(state[name], init_hidden.unsqueeze(1).expand(-1, 3, -1))


@torch.no_grad()
def test_no_attention_context_is_the_masked_mean():
    """With NoAttention a one-layer Luong decoder combines s_t with the mean of real memory."""
    torch.manual_seed(0)
    model = RNNDecoder(
        EMBED, attention=NoAttention, hidden_size=HIDDEN, style="luong", input_feeding=False
    ).eval()
    memory, src_mask, init_hidden = source()
    tgt = target()
    hidden, attn = model(tgt, model.init_state(memory, src_mask, init_hidden))
    states, _ = model.rnn(tgt, init_hidden.unsqueeze(0))
    mean = memory.sum(1) / src_mask.sum(1, keepdim=True)  # padded rows of memory are zero
    combined = torch.cat([mean.unsqueeze(1).expand(-1, TGT_LEN, -1), states], -1)
    expected = torch.tanh(F.linear(combined, model.output_layer.weight, model.output_layer.bias))
    assert attn is None
    torch.testing.assert_close(hidden, expected, atol=ATOL, rtol=0)


def causal_conv(conv, x, kernel_size):
    """out_i = b + Σ_j W[:, :, j] x_{i-k+1+j}, with x_{<0} = 0, written as a sum over taps."""
    padded = F.pad(x, (0, 0, kernel_size - 1, 0))  # (B, k-1+T, D)
    taps = [padded[:, j : j + x.size(1)] @ conv.weight[:, :, j].T for j in range(kernel_size)]
    return sum(taps) + conv.bias  # (B, T, 2D)


@torch.no_grad()
def test_cnn_follows_convs2s_equations():
    """e = w + p, g = W_in e; per layer z = GLU(conv), d = (W_d z + g)√½, c = attend(d),
    h^l = ((z + c)√½ + h^{l-1})√½ (Gehring et al. 2017, §3.2-3.3)."""
    torch.manual_seed(0)
    model = CNNDecoder(
        EMBED,
        attention=partial(Attention, score="dot"),
        hidden_size=HIDDEN,
        num_layers=2,
        kernel_size=3,
    ).eval()
    memory, src_mask, _ = source()
    tgt = target()
    hidden, attn = model(tgt, model.init_state(memory, src_mask, None))
    embedded = tgt + model.positions.positions[:TGT_LEN]
    g = F.linear(embedded, model.input_proj.weight, model.input_proj.bias)
    x, half = g, 0.5**0.5
    for index, layer in enumerate(model.layers):
        a, b = causal_conv(layer.conv, x, 3).chunk(2, dim=-1)
        z = a * torch.sigmoid(b)
        d = (F.linear(z, layer.query_proj.weight, layer.query_proj.bias) + g) * half
        context, weights = dot_attention(d, memory, src_mask)
        x = ((z + context) * half + x) * half
        torch.testing.assert_close(attn[:, index, 0], weights, atol=ATOL, rtol=0)
    torch.testing.assert_close(hidden, x, atol=ATOL, rtol=0)


def copy_multihead(reference: torch.nn.MultiheadAttention, ours: Attention) -> None:
    projections = (ours.query_proj, ours.key_proj, ours.value_proj)
    reference.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
    reference.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
    reference.out_proj.weight.copy_(ours.output_proj.weight)
    reference.out_proj.bias.copy_(ours.output_proj.bias)


@torch.no_grad()
def test_transformer_matches_torch_pre_ln_decoder_layer():
    """One block equals nn.TransformerDecoderLayer(norm_first=True) with the same weights."""
    torch.manual_seed(0)
    model = TransformerDecoder(
        HIDDEN,
        attention=ATTENTIONS["multihead"],
        hidden_size=HIDDEN,
        num_layers=1,
        heads=2,
        ff_size=16,
        dropout=0.0,
        max_positions=16,
    ).eval()
    layer = model.layers[0]
    reference = torch.nn.TransformerDecoderLayer(
        HIDDEN, 2, 16, dropout=0.0, batch_first=True, norm_first=True
    ).eval()
    copy_multihead(reference.self_attn, layer.self_attention)
    copy_multihead(reference.multihead_attn, layer.cross_attention)
    for theirs, ours in [
        (reference.linear1, layer.feed_forward.expand),
        (reference.linear2, layer.feed_forward.contract),
        (reference.norm1, layer.self_norm),
        (reference.norm2, layer.cross_norm),
        (reference.norm3, layer.ff_norm),
    ]:
        theirs.load_state_dict(ours.state_dict())
    memory, src_mask, _ = source()
    tgt = torch.randn(BATCH, TGT_LEN, HIDDEN)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(TGT_LEN)
    x = tgt + sinusoid_table(16, HIDDEN)[:TGT_LEN]
    expected = model.final_norm(
        reference(x, memory, tgt_mask=causal, memory_key_padding_mask=~src_mask)
    )
    hidden, _ = model(tgt, model.init_state(memory, src_mask, None))
    torch.testing.assert_close(hidden, expected, atol=ATOL, rtol=0)


# ----------------------------------------------------------------- training mode and errors


@pytest.mark.parametrize("decoder", ["gru-luong-feed", "cnn", "transformer"])
def test_gradients_reach_every_parameter(decoder):
    torch.manual_seed(0)
    model = DECODERS[decoder]("multihead").train()
    memory, src_mask, init_hidden = source()
    memory.requires_grad_(True)
    hidden, _ = model(target(), model.init_state(memory, src_mask, init_hidden), need_weights=False)
    hidden.sum().backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None or not p.grad.any()]
    assert not missing
    assert memory.grad[src_mask].abs().sum() > 0


@pytest.mark.parametrize("decoder", ["gru-bahdanau-feed", "cnn", "transformer"])
def test_bad_inputs_raise_value_error(decoder):
    model = make(decoder, "additive")
    memory, src_mask, init_hidden = source()
    with pytest.raises(ValueError, match="memory"):
        model.init_state(torch.randn(BATCH, SRC_LEN, HIDDEN + 1), src_mask, init_hidden)
    with pytest.raises(ValueError, match="src_mask"):
        model.init_state(memory, src_mask.long(), init_hidden)
    state = model.init_state(memory, src_mask, init_hidden)
    with pytest.raises(ValueError, match="tgt_embedded"):
        model.step(target()[:, :2], state)
    with pytest.raises(ValueError, match="tgt_embedded"):
        model(torch.randn(BATCH, TGT_LEN, EMBED + 1), state)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (partial(rnn_decoder, "additive", cell="tree"), "cell"),
        (partial(rnn_decoder, "additive", style="vaswani"), "style"),
        (partial(cnn_decoder, "additive", kernel_size=0), "kernel_size"),
        (
            partial(TransformerDecoder, EMBED, attention=NoAttention, positional="rotary"),
            "positional",
        ),
    ],
)
def test_bad_options_raise_value_error(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_rnn_init_hidden_of_wrong_width_is_rejected():
    model = make("gru-luong-feed", "additive")
    memory, src_mask, _ = source()
    with pytest.raises(ValueError, match="init_hidden"):
        model.init_state(memory, src_mask, torch.zeros(BATCH, HIDDEN + 1))
