"""`seq2seq.lab.attention_diagnostics`: entropy, masking, saturation, and a run on a tiny model."""

from __future__ import annotations

import math

import pytest
import torch

from seq2seq.config.build import build_model
from seq2seq.data.prepare import prepare
from seq2seq.lab import attention_diagnostics as diagnostics
from seq2seq.runs.assemble import data_config
from tests.helpers import compose_config


def test_entropy_of_uniform_and_one_hot_rows():
    n = 5
    uniform = torch.full((1, 1, n), 1.0 / n)
    one_hot = torch.zeros(1, 1, n)
    one_hot[..., 2] = 1.0
    mask = torch.ones(1, n, dtype=torch.bool)
    assert diagnostics.attention_entropy(uniform, mask).item() == pytest.approx(math.log(n))
    assert diagnostics.attention_entropy(one_hot, mask).item() == pytest.approx(0.0, abs=1e-6)


def test_padded_source_positions_do_not_count():
    # Row 0: 3 real positions of 5, uniform over them; the padded weights are junk that
    # would raise the entropy and the maximum if they counted.
    weights = torch.tensor([[[1 / 3, 1 / 3, 1 / 3, 0.5, 0.5]], [[0.95, 0.05, 0.0, 0.0, 0.0]]])
    src_mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0]], dtype=torch.bool)
    tgt_mask = torch.ones(2, 1, dtype=torch.bool)
    entropy = diagnostics.attention_entropy(weights, src_mask)
    assert entropy[0, 0].item() == pytest.approx(math.log(3))
    stats = diagnostics.row_statistics(weights, src_mask, tgt_mask)
    second = -(0.95 * math.log(0.95) + 0.05 * math.log(0.05))
    assert stats["entropy"] == pytest.approx((math.log(3) + second) / 2)
    assert stats["entropy_norm"] == pytest.approx((1.0 + second / math.log(2)) / 2)
    assert stats["saturated"] == pytest.approx(0.5)  # only row 1 (0.95); row 0's 0.5s are padding


def test_saturation_share_and_padded_target_rows():
    # (B=1, T=4, S=2): rows with max 0.95, 0.91, 0.6; the 4th target position is padding.
    weights = torch.tensor([[[0.95, 0.05], [0.09, 0.91], [0.6, 0.4], [1.0, 0.0]]])
    src_mask = torch.ones(1, 2, dtype=torch.bool)
    tgt_mask = torch.tensor([[1, 1, 1, 0]], dtype=torch.bool)
    stats = diagnostics.row_statistics(weights, src_mask, tgt_mask)
    assert stats["rows"] == 3
    assert stats["saturated"] == pytest.approx(2 / 3)


def test_one_token_sources_are_left_out_of_the_normalised_entropy():
    weights = torch.tensor([[[1.0, 0.0]], [[0.5, 0.5]]])
    src_mask = torch.tensor([[1, 0], [1, 1]], dtype=torch.bool)
    stats = diagnostics.row_statistics(weights, src_mask, torch.ones(2, 1, dtype=torch.bool))
    assert stats["entropy_norm"] == pytest.approx(1.0)
    assert stats["normalisable_rows"] == 1


@pytest.mark.parametrize(
    "overrides",
    [
        ["encoder=gru", "decoder=gru", "attention=dot"],
        ["encoder=lstm", "decoder=lstm", "attention=additive"],
        ["encoder=gru", "decoder=gru", "attention=general", "decoder.input_feeding=false"],
        ["encoder=rnn", "decoder=rnn", "attention=none"],
    ],
)
def test_diagnose_runs_on_a_tiny_model(tmp_path, overrides):
    cfg = compose_config([
        "data=toy_reverse", "data.source.train_size=64", "data.source.valid_size=16",
        "data.source.test_size=16", f"data.root={tmp_path / 'data'}", "encoder.hidden_size=8",
        "decoder.hidden_size=8", "model.embed_dim=8", *overrides,
    ])  # fmt: skip
    data = prepare(data_config(cfg))
    torch.manual_seed(0)
    model = build_model(cfg, data.src_tokenizer.vocab_size, data.tgt_tokenizer.vocab_size)
    result = diagnostics.diagnose(model, diagnostics.valid_batches(data, 16, 5))
    numbers = {key: value for key, value in result.items() if isinstance(value, float)}
    assert all(math.isfinite(value) for value in numbers.values()), numbers
    assert numbers["encoder_norm"] > 0
    if "attention=none" in overrides:
        assert "entropy" not in numbers and "score_mean" not in numbers
    else:
        for key in ("entropy", "entropy_norm", "saturated", "score_std", "query_norm", "key_norm"):
            assert key in numbers
        assert 0.0 <= numbers["entropy_norm"] <= 1.0 + 1e-6
    gates = {row["gate"] for row in result["gates"]}
    cell = overrides[0].split("=")[1]
    expected = {"lstm": {"input", "forget", "cell", "output"}, "gru": {"reset", "update", "new"}}
    assert gates == expected.get(cell, set())
    assert "| model |" in diagnostics.markdown([{**result, "name": "tiny"}])
