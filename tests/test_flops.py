"""Analytic FLOPs (`seq2seq.flops`) of whole models against torch's own count, `FlopCounterMode`.

Each registered component's formula is checked alone and in a tiny model by the contract
suite (`seq2seq.testing.flops`, run on every built-in by tests/test_contracts.py); here
the variants of the families (stacked, Luong without input feeding, a wider embedding,
multi-head attention on a recurrent decoder) are counted the same way
(`seq2seq.testing.flops.counted_flops`: oneDNN off and the MATH attention backend, whose
products torch sees), and the parts are written out by hand.
"""

from __future__ import annotations

import pytest
import torch
from helpers import compose_config

from seq2seq.config.build import build_model, plain
from seq2seq.flops import flops_breakdown, forward_flops, training_flops
from seq2seq.testing.flops import counted_flops

VOCAB, BATCH, SRC_LEN, TGT_LEN = 13, 3, 5, 7
TINY = ["model.embed_dim=8", "encoder.hidden_size=8", "decoder.hidden_size=8"]
TRANSFORMER = [
    "encoder=transformer",
    "decoder=transformer",
    "attention=multihead",
    "attention.heads=2",
    "encoder.heads=2",
    "decoder.heads=2",
    "encoder.num_layers=2",
    "decoder.num_layers=2",
    "encoder.ff_size=16",
    "decoder.ff_size=16",
]
MODELS = {
    "transformer": TRANSFORMER,
    "gru_additive": ["encoder=gru", "decoder=gru", "attention=additive"],
    "lstm_general": ["encoder=lstm", "decoder=lstm", "attention=general", "decoder.style=luong"],
    "convs2s": ["encoder=cnn", "decoder=cnn", "attention=dot", "encoder.num_layers=2"],
    "rnn_stacked_no_feeding": [
        "encoder=rnn",
        "decoder=rnn",
        "encoder.num_layers=2",
        "decoder.num_layers=2",
        "decoder.style=luong",
        "decoder.input_feeding=false",
    ],
    "transformer_wider_embedding": TRANSFORMER
    + ["model.embed_dim=16", "model.tie_embeddings=false", "attention=additive"],
    # the summaries that start the decoder (model.summary), and a pooled attention=none
    "gru_pooled_summary": ["encoder=gru", "decoder=gru", "attention=additive",
                           "model.summary=attention_pool"],
    "lstm_mean_summary": ["encoder=lstm", "decoder=lstm", "attention=dot", "model.summary=mean"],
    "transformer_pooled_none": ["encoder=transformer", "decoder=transformer", "encoder.heads=2",
                                "decoder.heads=2", "attention=none",
                                "attention.context=attention_pool"],
}  # fmt: skip


def counted(overrides: list[str]) -> tuple[int, int]:
    """(forward, forward + backward) FLOPs that `FlopCounterMode` sees for one batch."""
    torch.manual_seed(0)
    model = build_model(compose_config(TINY + overrides), VOCAB, VOCAB)
    src = torch.randint(4, VOCAB, (BATCH, SRC_LEN))
    tgt = torch.randint(4, VOCAB, (BATCH, TGT_LEN))
    src_mask = torch.ones(BATCH, SRC_LEN, dtype=torch.bool)  # no padding: packed == padded
    return counted_flops(lambda: model(src, src_mask, tgt)[0])  # logits (batch, tgt_len, vocab)


def analytic(overrides: list[str]) -> tuple[int, int]:
    cfg = plain(compose_config(TINY + overrides))
    shape = (BATCH, SRC_LEN, TGT_LEN, VOCAB, VOCAB)
    return forward_flops(cfg, *shape), training_flops(cfg, *shape)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_family_matches_flop_counter(name):
    counted_forward, counted_training = counted(MODELS[name])
    forward, training = analytic(MODELS[name])
    assert forward == counted_forward  # the formulas cover every product of the forward pass
    assert training == pytest.approx(counted_training, rel=0.10)


def test_multihead_attention_on_a_recurrent_decoder_matches_flop_counter():
    overrides = ["encoder=gru", "decoder=gru", "attention=multihead", "attention.heads=2"]
    assert analytic(overrides)[0] == counted(overrides)[0]


def test_hand_computed_parts_of_a_unidirectional_gru():
    """Every term written out for E = H = 8, V = 13, B = 3, S = 5, T = 7."""
    cfg = compose_config(
        TINY + ["encoder=gru", "decoder=gru", "attention=dot", "encoder.bidirectional=false"]
    )
    parts = flops_breakdown(plain(cfg), BATCH, SRC_LEN, TGT_LEN, VOCAB, VOCAB)
    assert parts["encoder"] == 2 * (3 * 5) * (8 + 8) * (3 * 8)  # GRU: 3 gates over [x; h]
    assert parts["bridge"] == 2 * 3 * 8 * 8  # only h₀ = tanh(W s): memory already 8 wide
    # decoder GRU input [y; c] = 16 wide, then tanh(W [s; c; y]) with 24 inputs
    assert parts["decoder"] == 2 * (3 * 7) * (16 + 8) * (3 * 8) + 2 * (3 * 7) * 24 * 8
    assert parts["attention"] == 2 * (2 * 3 * 7 * 5 * 8)  # scores qᵀk and context Σ α v
    assert parts["generator"] == 2 * (3 * 7) * 8 * VOCAB


def test_flops_scale_with_the_batch_and_training_is_three_forwards():
    cfg = plain(compose_config(TINY + TRANSFORMER))
    one = forward_flops(cfg, 1, SRC_LEN, TGT_LEN, VOCAB, VOCAB)
    assert forward_flops(cfg, 4, SRC_LEN, TGT_LEN, VOCAB, VOCAB) == 4 * one
    assert training_flops(cfg, 1, SRC_LEN, TGT_LEN, VOCAB, VOCAB) == 3 * one


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ((0, 5, 7, 13, 13), "batch_size"),
        ((3, 5, 7, 13, -1), "tgt_vocab"),
        ((3, 5.0, 7, 13, 13), "src_len"),
    ],
)
def test_bad_shapes_are_refused_by_name(shape, message):
    cfg = plain(compose_config(TINY))
    with pytest.raises(ValueError, match=message):
        forward_flops(cfg, *shape)


def test_an_unknown_encoder_is_refused():
    cfg = compose_config(TINY)
    cfg.encoder._target_ = "seq2seq.models.encoders.MysteryEncoder"
    with pytest.raises(ValueError, match="MysteryEncoder"):
        forward_flops(plain(cfg), BATCH, SRC_LEN, TGT_LEN, VOCAB, VOCAB)
