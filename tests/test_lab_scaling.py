"""The lab's √d_k experiment: part A at initialisation is deterministic (a fixed generator),
so its quick run must show what the claim predicts; part B only has to run."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from helpers import is_png, lab_quick_fixture

from seq2seq.lab.chinese.scaling import CHINESE
from seq2seq.lab.scaling import (
    EXPERIMENT,
    GAP_MARGIN,
    INIT_WIDTHS,
    KEYS,
    QUICK_TRAIN_WIDTHS,
    SCORES,
    gap_grows,
    softmax_jacobian_norms,
    uniform_reference,
)

quick = lab_quick_fixture(EXPERIMENT)



def init_column(finding, score: str, key: str) -> list[float]:
    return [row[key] for row in finding.table if row["part"] == "A init" and row["score"] == score]


def test_scaled_variance_stays_near_one_and_unscaled_grows_with_d_k(quick):
    for variance in init_column(quick, "scaled_dot", "score variance"):
        assert 0.8 <= variance <= 1.25
    unscaled = init_column(quick, "dot", "score variance")
    for variance, width in zip(unscaled, INIT_WIDTHS, strict=True):
        assert variance == pytest.approx(width, rel=0.2)


def test_unscaled_scores_saturate_more_and_pass_less_gradient_as_d_k_grows(quick):
    saturated = init_column(quick, "dot", "saturated")
    assert saturated == sorted(saturated) and saturated[-1] > saturated[0] + 0.5
    assert init_column(quick, "scaled_dot", "saturated") == [0.0] * len(INIT_WIDTHS)
    entropy = init_column(quick, "dot", "entropy")
    assert entropy == sorted(entropy, reverse=True) and entropy[0] < math.log(KEYS)
    gradient = init_column(quick, "dot", "softmax grad norm")
    scaled_gradient = init_column(quick, "scaled_dot", "softmax grad norm")
    assert gradient[-1] < 0.5 * min(scaled_gradient)
    assert quick.values[f"dot_{INIT_WIDTHS[-1]}_saturated"] == saturated[-1]


def test_part_b_trains_both_scores_at_each_width(quick):
    trained = [(row["score"], row["d_k"]) for row in quick.table if row["part"] == "B trained"]
    assert trained == [(score, width) for width in QUICK_TRAIN_WIDTHS for score in SCORES]
    for row in quick.table:
        if row["part"] == "B trained":
            assert 0.0 <= row["valid BLEU"] <= 100.0
            assert row["score variance"] > 0.0 and row["variance trained"] > 0.0
        else:
            assert math.isnan(row["valid BLEU"]) and math.isnan(row["variance trained"])
    assert quick.agrees in (True, None)  # part A holds, so never False


def test_both_figures_are_pngs(quick):
    assert [path.name for path in quick.figures] == ["scaling_init.png", "scaling_training.png"]
    for path in quick.figures:
        assert is_png(path)


def test_the_softmax_jacobian_norm_matches_its_closed_form():
    # J = diag(α) − ααᵀ; at the uniform over n keys ‖J‖_F² = (n − 1) / n²
    assert uniform_reference()["softmax grad norm"] == pytest.approx(math.sqrt(KEYS - 1) / KEYS)
    scores = torch.tensor([[0.3, -1.2, 2.0]])
    weights = torch.softmax(scores, dim=-1)[0]
    jacobian = torch.diag(weights) - torch.outer(weights, weights)
    assert softmax_jacobian_norms(scores).item() == pytest.approx(jacobian.norm().item(), rel=1e-5)
    one_hot = softmax_jacobian_norms(torch.tensor([[60.0, 0.0, 0.0]]))
    assert one_hot.item() < 1e-10


def test_the_chinese_summary_quotes_the_quick_run_s_numbers(quick):
    text = CHINESE.summary(quick, True)
    values = quick.values
    low, high = INIT_WIDTHS[0], INIT_WIDTHS[-1]
    assert text.startswith(f"初始化时，未缩放的分数方差从 d_k = {low} 时的 ")
    assert f"{values[f'dot_{low}_variance']:.1f} 增长到 d_k = {high} 时的 " in text
    assert f"d_k = {high} 时的 {values[f'dot_{high}_variance']:.0f}" in text
    saturated = [values[f"dot_{width}_saturated"] for width in (low, high)]
    assert f"从 {saturated[0]:.0%} 升到 {saturated[1]:.0%}" in text
    scaled = [values[f"scaled_dot_{width}_variance"] for width in INIT_WIDTHS]
    assert f"始终在 {min(scaled):.2f} 到 {max(scaled):.2f} 之间" in text
    gaps = {}
    for width in QUICK_TRAIN_WIDTHS:
        assert f"W = {width} 时 {values[f'dot_w{width}_init_variance']:.2g}" in text
        gaps[width] = values[f"scaled_dot_w{width}_valid_bleu"] - values[f"dot_w{width}_valid_bleu"]
        assert f"W = {width} 时 {gaps[width]:+.1f}" in text
    assert ("与论断一致" in text) == (quick.agrees is not False)
    grows = f"差距随宽度增大（增幅超过 {GAP_MARGIN} BLEU）"
    assert (grows in text) == gap_grows(gaps)  # the English code's decision, its margin quoted
    assert ("BLEU 上看不出缩放的好处" in text) == (not gap_grows(gaps))
    # Both ways, whatever the quick run gave, and whatever part A's verdict: the widest
    # model's gap made larger, then smaller, than the narrowest's by twice the margin.
    narrow, wide = QUICK_TRAIN_WIDTHS[0], QUICK_TRAIN_WIDTHS[-1]
    for sign, agrees in ((1, False), (-1, None)):
        wide_gap = {f"dot_w{wide}_valid_bleu": 10.0,
                    f"scaled_dot_w{wide}_valid_bleu": 10.0 + gaps[narrow] + sign * 2 * GAP_MARGIN}
        varied = replace(quick, values={**values, **wide_gap}, agrees=agrees)
        text = CHINESE.summary(varied, True)
        assert (grows in text) == (sign > 0)
        assert (f"差距没有随宽度增大（增幅没有超过 {GAP_MARGIN} BLEU）" in text) == (sign < 0)
        assert ("这不是论断所预言的" in text) == (agrees is False)
