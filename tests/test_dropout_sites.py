"""Where a Transformer draws dropout masks: `dropout` on inputs and sublayer outputs,
`ff_dropout` inside the FFN, `model.embed_dropout` on the embeddings; a rate of 0 draws none."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from helpers import compose_config

from seq2seq.config.build import build_model
from seq2seq.models import dropout
from seq2seq.special_tokens import BOS_ID, PAD_ID

WIDTH, FF, LAYERS = 8, 24, 2


def masks_drawn(overrides: list[str], monkeypatch) -> Counter:
    """The last dimension of every tensor given a dropout mask in one training forward."""
    cfg = compose_config(
        ["encoder=transformer", "decoder=transformer", "attention=multihead", "attention.heads=2",
         f"encoder.hidden_size={WIDTH}", f"decoder.hidden_size={WIDTH}", f"model.embed_dim={WIDTH}",
         f"encoder.ff_size={FF}", f"decoder.ff_size={FF}", "encoder.heads=2", "decoder.heads=2",
         f"encoder.num_layers={LAYERS}", f"decoder.num_layers={LAYERS}", *overrides]
    )  # fmt: skip
    model = build_model(cfg, 11, 11).train()
    drawn: Counter = Counter()
    keep_mask = dropout.keep_mask

    def counting(shape, p, device, dtype=torch.bool):
        drawn[shape[-1]] += 1
        return keep_mask(shape, p, device, dtype)

    monkeypatch.setattr(dropout, "keep_mask", counting)
    src = torch.tensor([[5, 6, 7, 3], [8, 3, PAD_ID, PAD_ID]])  # (batch, src_len)
    tgt_in = torch.tensor([[BOS_ID, 4, 5], [BOS_ID, 6, PAD_ID]])  # (batch, tgt_len)
    model(src, src != PAD_ID, tgt_in)
    return drawn


@pytest.mark.parametrize("ff_dropout", [0.1, 0.0])
def test_every_site_draws_its_mask_and_ff_dropout_zero_skips_the_ffn(ff_dropout, monkeypatch):
    drawn = masks_drawn([f"encoder.ff_dropout={ff_dropout}", f"decoder.ff_dropout={ff_dropout}"],
                        monkeypatch)  # fmt: skip
    # width d: 2 embeddings + 2 inputs, 2 sublayers per encoder layer, 3 per decoder layer
    assert drawn[WIDTH] == 2 + 2 + 2 * LAYERS + 3 * LAYERS
    assert drawn[FF] == (2 * LAYERS if ff_dropout else 0)  # one FFN per layer


def test_rates_of_zero_draw_no_mask(monkeypatch):
    zero = ["model.embed_dropout=0", "encoder.dropout=0", "decoder.dropout=0",
            "encoder.ff_dropout=0", "decoder.ff_dropout=0"]  # fmt: skip
    assert masks_drawn(zero, monkeypatch) == Counter()
    embeddings_only = masks_drawn(zero[1:], monkeypatch)
    assert embeddings_only == Counter({WIDTH: 2})
