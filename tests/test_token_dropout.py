"""Token-level dropout (`seq2seq.models.dropout`): one draw per token, shared by its features."""

from __future__ import annotations

import pytest
import torch
from helpers import compose_config

from seq2seq.config.build import build_model
from seq2seq.models.dropout import ElementDropout, TokenDropout, dropout_layer


def test_a_token_is_kept_whole_or_dropped_whole_and_the_mean_is_kept():
    torch.manual_seed(0)
    layer = TokenDropout(0.25).train()
    x = torch.rand(64, 50, 16) + 0.5  # no zeros of its own
    y = layer(x)
    dropped = (y == 0).all(dim=-1)  # (64, 50)
    kept = ~dropped
    assert torch.equal((y == 0).any(dim=-1), dropped)  # never a part of a token
    assert torch.allclose(y[kept], x[kept] / 0.75)
    assert dropped.float().mean().item() == pytest.approx(0.25, abs=0.02)


def test_token_dropout_is_the_identity_in_eval_mode_and_at_zero():
    x = torch.randn(3, 4, 5)
    assert torch.equal(TokenDropout(0.5).eval()(x), x)
    assert torch.equal(TokenDropout(0.0).train()(x), x)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        TokenDropout(1.0)


def test_dropout_layer_names_its_units():
    assert isinstance(dropout_layer(0.1), ElementDropout)
    assert isinstance(dropout_layer(0.1, "token"), TokenDropout)
    with pytest.raises(ValueError, match="element.*token"):
        dropout_layer(0.1, "feature")


def test_config_puts_token_dropout_on_every_transformer_site_and_word_dropout_on_embeddings():
    cfg = compose_config(["encoder=transformer", "decoder=transformer", "attention=multihead",
                          "encoder.dropout_unit=token", "decoder.dropout_unit=token",
                          "model.word_dropout=0.2", "data=toy_reverse"])  # fmt: skip
    model = build_model(cfg, 20, 20)
    sites = [m for name, m in model.named_modules() if name.endswith("dropout")
             and not name.endswith("ff_dropout") and "feed_forward" not in name
             and "embed" not in name]  # fmt: skip
    assert sites and all(isinstance(site, TokenDropout) for site in sites)
    assert model.src_embed.word_dropout.p == model.tgt_embed.word_dropout.p == 0.2
    assert isinstance(model.encoder.layers[0].feed_forward.dropout, ElementDropout)  # in the FFN


def test_word_dropout_is_checked_like_every_dropout():
    from seq2seq.config.value_checks import check_settings

    cfg = compose_config(["data=toy_reverse", "model.word_dropout=1.5"])
    with pytest.raises(Exception, match="model.word_dropout"):
        check_settings(cfg)
