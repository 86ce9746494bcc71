"""Any encoder with any decoder and any attention: the combinations build from the composed
config and run forward and backward on a tiny batch.

The contract suite (tests/test_contracts.py) checks each component with fixed partners;
here every encoder preset meets every decoder preset, and every attention preset every
decoder preset (the decoder is what calls the attention: its queries, positions and
cache). An encoder reaches the attention only through the bridge, which makes every
memory the decoder's width, so encoder x attention pairs add nothing beyond these."""

from __future__ import annotations

import pytest
import torch
from helpers import compose_config

from seq2seq import registry
from seq2seq.config.build import build_model
from seq2seq.configs import preset_names
from seq2seq.special_tokens import BOS_ID, PAD_ID

ENCODERS, DECODERS, ATTENTIONS = (preset_names(g) for g in ("encoder", "decoder", "attention"))
COMBINATIONS = sorted(
    {(encoder, decoder, "additive") for encoder in ENCODERS for decoder in DECODERS}
    | {("gru", decoder, attention) for decoder in DECODERS for attention in ATTENTIONS}
)
VOCAB = 11


def tiny_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    src = torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, PAD_ID, PAD_ID]])  # (batch, src_len)
    tgt_in = torch.tensor([[BOS_ID, 4, 5], [BOS_ID, 6, PAD_ID]])  # (batch, tgt_len)
    return src, src != PAD_ID, tgt_in


@pytest.mark.parametrize(("encoder", "decoder", "attention"), COMBINATIONS)
def test_every_combination_builds_and_trains_a_step(encoder, decoder, attention):
    cfg = compose_config(
        [f"encoder={encoder}", f"decoder={decoder}", f"attention={attention}",
         "encoder.hidden_size=8", "decoder.hidden_size=8", "model.embed_dim=8"]
    )  # fmt: skip
    torch.manual_seed(0)
    model = build_model(cfg, VOCAB, VOCAB)
    src, src_mask, tgt_in = tiny_batch()
    logits, weights = model(src, src_mask, tgt_in, need_weights=True)
    assert logits.shape == (2, 3, VOCAB)
    assert (weights is None) == (registry.of_node("attention", cfg.attention).name == "none")
    logits.logsumexp(-1).sum().backward()
    grads = [p.grad for p in model.encoder.parameters() if p.requires_grad]
    assert grads and all(g is not None for g in grads), "the encoder received no gradient"


PRESETS = preset_names("experiment")


@pytest.mark.parametrize("preset", PRESETS)
def test_every_experiment_preset_composes_and_runs(preset):
    cfg = compose_config([f"+experiment={preset}"])
    assert cfg.name == preset
    model = build_model(cfg, VOCAB, VOCAB)
    src, src_mask, tgt_in = tiny_batch()
    logits, _ = model(src, src_mask, tgt_in)
    assert torch.isfinite(logits).all()
