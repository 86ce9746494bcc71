"""The lab's heads experiment (`seq2seq.lab.heads`): its quick run and its measures."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from helpers import is_png, lab_quick_fixture

from seq2seq.lab.chinese.heads import CHINESE
from seq2seq.lab.heads import (
    CAN_GO,
    EXPERIMENT,
    KINDS,
    MATTERS,
    head_removed,
    js_divergence,
    row_entropy,
)
from seq2seq.models.attention import Attention
from seq2seq.models.attention.head_maps import merge_heads

QUICK_HEADS = 2  # every attention of the quick model: 1 layer, 2 heads

quick = lab_quick_fixture(EXPERIMENT)


def test_one_entropy_row_per_head_of_every_kind(quick):
    rows = quick.values["entropies"]
    found = sorted((row["kind"], row["layer"], row["head"]) for row in rows)
    expected = sorted((kind, 0, head) for kind in KINDS for head in range(QUICK_HEADS))  # from 0
    assert found == expected


def test_entropies_lie_between_zero_and_ln_keys(quick):
    for row in quick.values["entropies"]:
        assert 0.0 <= row["entropy"] <= row["uniform_entropy"] + 1e-3
        assert row["uniform_entropy"] <= row["max_entropy"] + 1e-3
        assert 0.0 <= row["layer_js"] <= math.log(2) + 1e-3


def test_pruning_table_has_one_row_per_head(quick):
    heads = [row["head"] for row in quick.table]
    assert len(heads) == len(KINDS) * QUICK_HEADS == len(set(heads))
    full = quick.values["full_bleu"]
    for row in quick.table:
        assert row["bleu_lost"] == pytest.approx(full - row["bleu_without"], abs=0.011)
    assert quick.values["heads"] == len(heads)


def test_figures_are_written_as_png(quick):
    assert [path.name for path in quick.figures] == ["heads_entropy.png", "heads_pruning.png"]
    for path in quick.figures:
        assert is_png(path)


def test_entropy_and_js_divergence_have_their_known_values():
    uniform, one_hot = torch.full((4,), 0.25), torch.tensor([1.0, 0.0, 0.0, 0.0])
    other = torch.tensor([0.0, 0.0, 1.0, 0.0])
    assert float(row_entropy(uniform)) == pytest.approx(math.log(4))
    assert float(row_entropy(one_hot)) == 0.0
    assert float(js_divergence(uniform, uniform)) == pytest.approx(0.0, abs=1e-7)
    assert float(js_divergence(one_hot, other)) == pytest.approx(math.log(2))


def test_removing_a_head_zeroes_its_context_and_restores_the_weights():
    torch.manual_seed(0)
    attention = Attention(6, 6, 6, score="scaled_dot", heads=3).eval()
    query, memory = torch.randn(2, 5, 6), torch.randn(2, 7, 6)
    keys, values = attention.project_memory(memory, memory)  # (2, 3, 7, 2) each
    _, weights = attention.attend(query, keys, values)  # (2, 3, 5, 7)
    per_head = weights @ values  # (2, 3, 5, 2): each head's context
    per_head[:, 1] = 0.0  # Michel et al.'s mask on head 2
    expected = attention.output_proj(merge_heads(per_head))
    before = attention.output_proj.weight.clone()
    with head_removed(attention, 1):
        output, _ = attention.attend(query, keys, values)
    torch.testing.assert_close(output, expected)
    assert torch.equal(attention.output_proj.weight, before)


def test_the_chinese_summary_quotes_the_quick_run_s_numbers(quick):
    text = CHINESE.summary(quick, True)
    values = quick.values
    assert text.startswith(f"模型的 {values['heads']} 个头中")
    assert f"验证 BLEU 为 {values['full_bleu']:.2f}）" in text
    assert f"有 {values['heads_under_threshold']} 个单独去掉时损失低于 {CAN_GO} BLEU；" in text
    where = values["most_important_head"].rsplit(" ", 2)[-2:]  # "L0 H1", after the kind
    assert f"{' '.join(where)}（{values['largest_loss']:.2f} BLEU）" in text
    for kind in KINDS:
        assert f" {values['mean_js'][kind]:.2f}" in text
    assert "encoder" not in text and "decoder" not in text  # the kinds are in Chinese
    low, high = values["entropy_range"]
    assert f"各头的平均熵在 {low:.2f} 到 {high:.2f} 奈特之间" in text
    assert ("与论断一致" in text) == bool(quick.agrees)
    assert (f"另一个头明显重要（损失 ≥ {MATTERS} BLEU）" in text) == bool(quick.agrees)
    assert ("这不支持论断" in text) == (quick.agrees is False)
    for agrees in (True, False):  # both verdicts quote the thresholds, whatever the quick run
        text = CHINESE.summary(replace(quick, agrees=agrees), True)
        assert (f"另一个头明显重要（损失 ≥ {MATTERS} BLEU），与论断一致" in text) == agrees
        needs = f"既有去掉后损失低于 {CAN_GO} BLEU 的头，又有去掉后损失至少 {MATTERS} BLEU 的头"
        assert (needs in text) == (not agrees)
