"""The Chinese page of `seq2seq-lab scaling` (`seq2seq.lab.scaling`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from seq2seq.lab.chinese import outcome
from seq2seq.lab.experiment import ChineseText, Finding
from seq2seq.lab.lab_models import TATOEBA_STEPS
from seq2seq.lab.scaling import GAP_MARGIN, gap_grows


def widths(values: Mapping[str, Any], pattern: str) -> list[int]:
    """The widths of the keys that match `pattern` (its group is the width), smallest first."""
    found = (re.fullmatch(pattern, key) for key in values)
    return sorted(int(match.group(1)) for match in found if match)


def init_text(values: Mapping[str, Any], agrees: bool | None) -> str:
    """Part A: the unscaled variance and saturation from the narrowest to the widest d_k,
    and the range of the scaled variance."""
    dims = widths(values, r"dot_(\d+)_variance")
    low, high = dims[0], dims[-1]
    scaled = [values[f"scaled_dot_{dim}_variance"] for dim in dims]
    held = outcome(agrees is not False, "，与论断一致", "，这不是论断所预言的")
    return (
        f"初始化时，未缩放的分数方差从 d_k = {low} 时的 {values[f'dot_{low}_variance']:.1f} "
        f"增长到 d_k = {high} 时的 {values[f'dot_{high}_variance']:.0f}，最大权重超过 "
        f"{values['saturation_threshold']} 的行所占比例从 {values[f'dot_{low}_saturated']:.0%} "
        f"升到 {values[f'dot_{high}_saturated']:.0%}，而缩放后的分数方差始终在 {min(scaled):.2f} 到 "
        f"{max(scaled):.2f} 之间{held}。"
    )


def gap_verdict(gaps: dict[int, float]) -> str:
    """Whether the BLEU gap grows with the width, decided as the English summary decides it
    (`seq2seq.lab.scaling.gap_grows`: by more than GAP_MARGIN BLEU, narrowest to widest)."""
    if gap_grows(gaps):
        return f"这里差距随宽度增大（增幅超过 {GAP_MARGIN} BLEU）"
    return (
        f"这里差距没有随宽度增大（增幅没有超过 {GAP_MARGIN} BLEU），所以在这样的规模下，"
        "BLEU 上看不出缩放的好处"
    )


def training_text(values: Mapping[str, Any]) -> str:
    """Part B: the GRU model's own unscaled score variance at initialisation, and scaled
    dot's valid BLEU minus dot's after training, per width."""
    model_widths = widths(values, r"dot_w(\d+)_valid_bleu")
    real = "，".join(f"W = {w} 时 {values[f'dot_w{w}_init_variance']:.2g}" for w in model_widths)
    gaps = {
        w: values[f"scaled_dot_w{w}_valid_bleu"] - values[f"dot_w{w}_valid_bleu"]
        for w in model_widths
    }
    gap_text = "，".join(f"W = {w} 时 {gaps[w]:+.1f}" for w in model_widths)
    return (
        f"GRU 模型自己的未缩放分数在初始化时的方差为：{real}（单位方差的向量给出的方差会是 d_k = W）；"
        f"训练之后，缩放点积的验证 BLEU 减去点积的验证 BLEU：{gap_text}。{gap_verdict(gaps)}。"
    )


def summary(finding: Finding, quick: bool) -> str:
    values, agrees = finding.values, finding.agrees
    return init_text(values, agrees) + training_text(values)


CHINESE = ChineseText(
    title="为什么要除以 √d_k",
    claim=(
        "两个向量的各分量相互独立、方差为 1 时，它们点积的方差等于向量的维度 d_k。因此未缩放的"
        "点积分数（score）会随着模型变宽而越来越分散，对它们做 softmax 几乎把全部"
        "权重都给了一个键（key），几乎没有梯度能经由它传回去。把分数除以 √d_k，无论维度多大都能"
        "让方差回到 1 左右，softmax 于是保持平滑、仍然可以训练（Vaswani et al. 2017，§3.2.1）。"
    ),
    default_size=(
        "先在初始化时测量单位方差向量在 d_k = 8 到 512 时的分数（几秒钟），再在 Tatoeba 中→英上分别用"
        "点积注意力和缩放点积注意力（scaled dot-product attention）训练实验室的 GRU 模型，宽度为 "
        f"32、96 和 160（6 次运行，各 {TATOEBA_STEPS} 次更新，宽度 96 的两次与其他实验共用）。"
    ),
    summary=summary,
)
