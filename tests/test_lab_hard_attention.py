"""The lab's hard-attention experiment: its quick run on the toy task trains soft,
straight-through and REINFORCE attention, and the gradient noise it measures is what the
estimators imply (soft draws nothing, so exactly 0; REINFORCE noisier than straight-through)."""

from __future__ import annotations

import pytest
import torch
from helpers import is_png, lab_quick_fixture

from seq2seq.lab.chinese.hard_attention import CHINESE
from seq2seq.lab.hard_attention import EXPERIMENT, LABELS, METHODS, gradient_noise

quick = lab_quick_fixture(EXPERIMENT)



def test_soft_has_no_gradient_noise_and_reinforce_has_the_most(quick):
    values = quick.values
    for when in ("init", "trained"):
        assert values[f"toy_soft_variance_{when}"] == 0.0
        assert values[f"toy_reinforce_variance_{when}"] > 0
        assert values[f"toy_straight_through_variance_{when}"] > 0
    ratio = {method: values[f"toy_{method}_noise_ratio_init"] for method in METHODS}
    assert ratio["reinforce"] > ratio["straight_through"]


def test_three_rows_for_the_toy_task_and_two_figures(quick):
    assert [(row["task"], row["attention"]) for row in quick.table] == [
        ("toy reverse", LABELS[method]) for method in METHODS
    ]
    assert len({tuple(row) for row in quick.table}) == 1  # the same keys in every row
    assert all(0 <= row["alignment accuracy"] <= 1 for row in quick.table)
    assert len(quick.figures) == 2
    for figure in quick.figures:
        assert is_png(figure)
    assert isinstance(quick.agrees, bool) and quick.summary.count(".") >= 2


def test_identical_gradients_have_exactly_zero_noise():
    same = torch.tensor([[0.1, -0.3, 1e-8]]).repeat(5, 1)
    assert gradient_noise(same)[0] == 0.0 and gradient_noise(same)[1] == 0.0
    varied = torch.tensor([[1.0, 0.0], [3.0, 0.0]])
    assert gradient_noise(varied) == pytest.approx((1.0, 2.0 / 4.0))


def test_the_chinese_summary_quotes_the_quick_run_s_numbers(quick):
    text = CHINESE.summary(quick, True)
    values = quick.values
    assert text.startswith("在玩具倒序任务上，") and "Tatoeba" not in text  # the toy task only
    for method in ("straight_through", "reinforce"):
        assert f" {values[f'toy_{method}_noise_ratio_init']:.3g}" in text
    assert "（软注意力恰为 0）" in text
    noisier = all(values[f"toy_reinforce_noise_ratio_{when}"]
                  > values[f"toy_straight_through_noise_ratio_{when}"]
                  for when in ("init", "trained"))  # fmt: skip
    compared = "都比直通估计大" if noisier else "并非都比直通估计大"
    assert f"REINFORCE 的噪声在初始化时和训练后{compared}；" in text
    for method in METHODS:
        assert f" {values[f'toy_{method}_mean_loss']:.3f}" in text
    bleu = "、".join(f"{values[f'toy_{method}_test_bleu']:.1f}" for method in METHODS)
    assert f"测试 BLEU（软注意力、直通估计、REINFORCE）：{bleu}。" in text
    assert text.endswith("这支持论断。") == quick.agrees
