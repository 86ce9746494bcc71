"""The lab's pooling experiment: its quick run on the toy reverse task, the position profile
and the other measures of the pooling weights against hand-computed values."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from helpers import is_png, lab_quick_fixture

from seq2seq.lab.catalogue import experiments
from seq2seq.lab.chinese.pooling import CHINESE
from seq2seq.lab.experiment import LabContext
from seq2seq.lab.lab_models import gru_model
from seq2seq.lab.pooling import (
    ARM_OVERRIDES,
    ARMS,
    EXPERIMENT,
    POOLED,
    POSITION_BINS,
    PooledSentence,
    ends_share,
    entropy,
    pooled_sentences,
    position_shares,
    top_pieces,
    verdict,
    weight_profile,
)
from seq2seq.lab.training import trained
from seq2seq.visualise.pooling_images import pooled_weights

quick = lab_quick_fixture(EXPERIMENT)


def test_the_quick_run_scores_every_arm_overall_and_in_every_bucket(quick):
    buckets = ["all", *quick.values["buckets"]]
    assert len(buckets) >= 3
    assert [(row["arm"], row["source length"]) for row in quick.table] == [
        (arm, bucket) for bucket in buckets for arm in ARMS
    ]
    for row in quick.table:
        assert 0.0 <= row["ci low"] <= row["ci high"] <= 100.0
        if row["arm"] == "final":
            assert row["gap vs final"] == 0.0 and math.isnan(row["p vs final"])
        else:
            assert 0.0 <= row["p vs final"] <= 1.0
    assert sum(row["sentences"] for row in quick.table if row["arm"] == "final") == 2 * 32
    for arm in ARMS:
        assert quick.values[f"test_bleu_{arm}"] == next(
            row["bleu"] for row in quick.table if row["arm"] == arm
        )


def test_the_verdict_is_computed_from_the_overall_bleu(quick):
    expected = quick.values["test_bleu_attention_pool"] >= max(
        quick.values["test_bleu_final"], quick.values["test_bleu_mean"]
    )
    assert quick.agrees is expected
    assert ("as claimed" in quick.summary) is expected


def test_both_poolings_are_profiled_and_drawn(quick):
    for name in ("summary", "context"):  # the decoder's start and its one context
        profile = quick.values[f"weights_{name}"]
        assert len(profile["bin_shares"]) == POSITION_BINS
        assert sum(profile["bin_shares"]) + profile["eos_share"] == pytest.approx(1.0)
        assert sum(profile["uniform_bin_shares"]) + profile["uniform_eos_share"] == (
            pytest.approx(1.0)
        )
        assert 0.0 < profile["entropy"] <= profile["uniform_entropy"] + 1e-9
        assert profile["top_pieces"] and all(row["count"] >= 5 for row in profile["top_pieces"])
    stems = [path.stem for path in quick.figures]
    assert stems == ["bleu_by_length", "pooling_weights", "pooling_example"]
    assert all(is_png(path) for path in quick.figures)


def test_position_shares_by_hand():
    # four pieces and EOS: piece i goes to bin ⌊2 (i + ½) / 4⌋ = 0, 0, 1, 1
    shares, eos = position_shares([0.1, 0.2, 0.3, 0.15, 0.25], bins=2)
    assert shares == pytest.approx([0.3, 0.45]) and eos == 0.25
    # three pieces in five bins: ⌊5 (i + ½) / 3⌋ = 0, 2, 4, the others empty
    shares, eos = position_shares([0.5, 0.2, 0.1, 0.2], bins=5)
    assert shares == pytest.approx([0.5, 0.0, 0.2, 0.0, 0.1]) and eos == 0.2
    assert position_shares([1.0], bins=3) == ([0.0, 0.0, 0.0], 1.0)  # an empty source


def test_weight_profile_by_hand():
    sentences = [
        PooledSentence([7, 8], ["我", "好", "</s>"], [0.5, 0.25, 0.25]),
        PooledSentence([7, 9, 8, 9], ["我", "很", "好", "很", "</s>"], [0.4, 0.1, 0.3, 0.1, 0.1]),
    ]
    profile = weight_profile(sentences, min_count=2)
    # bins ⌊5 (i + ½) / m⌋: m = 2 → 1, 3; m = 4 → 0, 1, 3, 4
    assert profile.bin_shares == pytest.approx([0.2, 0.3, 0.0, 0.275, 0.05])
    assert profile.eos_share == pytest.approx(0.175)
    assert profile.uniform_bin_shares == pytest.approx([0.1, 1 / 6 + 0.1, 0.0, 1 / 6 + 0.1, 0.1])
    assert profile.uniform_eos_share == pytest.approx((1 / 3 + 0.2) / 2)
    assert profile.ends_share == pytest.approx((0.5 + 0.25 + 0.4 + 0.1) / 2)
    assert profile.uniform_ends_share == pytest.approx((2 / 3 + 2 / 5) / 2)
    h1 = -(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25))
    h2 = -(0.4 * math.log(0.4) + 0.3 * math.log(0.3) + 3 * 0.1 * math.log(0.1))
    assert profile.entropy == pytest.approx((h1 + h2) / 2)
    assert profile.uniform_entropy == pytest.approx((math.log(3) + math.log(5)) / 2)
    assert profile.entropy_ratio == pytest.approx((h1 / math.log(3) + h2 / math.log(5)) / 2)
    # × uniform: 我 0.5·3, 0.4·5 → 1.75; 好 0.25·3, 0.3·5 → 1.125; 很 0.1·5 twice → 0.5
    assert [(row["piece"], row["count"]) for row in profile.top_pieces] == [
        ("我", 2), ("好", 2), ("很", 2)
    ]  # fmt: skip
    assert [row["× uniform"] for row in profile.top_pieces] == pytest.approx([1.75, 1.125, 0.5])
    assert profile.top_pieces[0]["mean weight"] == pytest.approx(0.45)
    assert top_pieces(sentences, min_count=3) == []  # none seen three times


def test_ends_share_counts_a_one_piece_source_once():
    assert ends_share([0.1, 0.2, 0.3, 0.4]) == pytest.approx(0.4)  # pieces 0 and 2
    assert ends_share([0.7, 0.3]) == pytest.approx(0.7)
    assert ends_share([1.0]) == 0.0


def test_entropy_of_uniform_and_one_hot_weights():
    assert entropy([0.25] * 4) == pytest.approx(math.log(4))
    assert entropy([0.0, 1.0, 0.0]) == 0.0


def test_the_verdict_needs_pooling_at_least_both_plain_summaries():
    def rows(final, mean, pooled):
        scores = {"final": final, "mean": mean, "attention_pool": pooled, "additive": 30.0}
        return [{"arm": arm, "source length": "all", "bleu": bleu} for arm, bleu in scores.items()]

    assert verdict(rows(5.0, 6.0, 6.0)) is True
    assert verdict(rows(5.0, 6.0, 5.5)) is False
    assert verdict(rows(7.0, 6.0, 6.5)) is False


def test_batched_pooling_weights_are_each_sentences_own_and_sum_to_one(tmp_path):
    context = LabContext(tmp_path / "out", tmp_path / "runs", tmp_path / "data", quick=True,
                         threads=1)  # fmt: skip
    overrides = gru_model(context, *ARM_OVERRIDES[POOLED])
    run = trained(context, overrides, "gru-attention-pool")
    found = pooled_sentences(context, run, overrides)
    assert sorted(found) == ["context", "summary"]
    model = run.translator().model
    for name, sentences in found.items():
        assert len(sentences) == 32  # the toy test split
        for sentence in sentences:
            assert len(sentence.weights) == len(sentence.ids) + 1 == len(sentence.pieces)
            assert sum(sentence.weights) == pytest.approx(1.0, abs=1e-5)
            assert sentence.pieces[-1] == "</s>"
        for sentence in sentences[:3]:  # a batch of one, no padding: the same weights
            names, alone = pooled_weights(model, sentence.ids, torch.device("cpu"))
            assert alone[names.index(name)].tolist() == pytest.approx(sentence.weights, abs=1e-6)


def test_the_catalogue_lists_pooling():
    assert experiments()["pooling"] == replace(EXPERIMENT, zh=CHINESE)  # its Chinese page added
    assert "attention pooling" in EXPERIMENT.claim and EXPERIMENT.default_size


def test_the_chinese_summary_quotes_the_quick_run_s_numbers(quick):
    text = CHINESE.summary(quick, True)
    values = quick.values
    assert text.startswith("在玩具倒序任务的测试集上")
    for arm in ARMS:
        assert f"{values[f'test_bleu_{arm}']:.2f}" in text
    gap = values["test_bleu_attention_pool"] - values["test_bleu_final"]
    assert f"注意力池化相对最后状态 {gap:+.2f}" in text
    assert ("与论断一致" in text) == bool(quick.agrees)
    for key in ("weights_summary", "weights_context"):
        if key in values:
            assert f"它的熵是 {values[key]['entropy']:.2f} 奈特" in text
