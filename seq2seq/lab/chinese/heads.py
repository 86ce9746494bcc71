"""The Chinese page of `seq2seq-lab heads` (`seq2seq.lab.heads`).

The two pruning thresholds the summary quotes (a head "can go" under CAN_GO BLEU lost and
"clearly matters" from MATTERS) are the experiment's constants, not recorded values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from seq2seq.lab.chinese import outcome
from seq2seq.lab.experiment import ChineseText, Finding
from seq2seq.lab.heads import CAN_GO, MATTERS

KINDS = {"encoder self": "编码器自注意力", "decoder self": "解码器自注意力",
         "decoder cross": "解码器交叉注意力"}  # fmt: skip


def head_name(label: str) -> str:
    """A head's label ("decoder cross L1 H0") with its kind of attention in Chinese."""
    for kind, name in KINDS.items():
        if label.startswith(f"{kind} "):
            return name + label.removeprefix(kind)
    return label


def pruning_text(values: Mapping[str, Any], agrees: bool | None) -> str:
    """How many heads can go, the costliest to remove, and what that says of the claim."""
    verdict = outcome(
        agrees,
        f"有的头可以去掉，而另一个头明显重要（损失 ≥ {MATTERS} BLEU），与论断一致",
        f"这不支持论断，因为论断要求既有去掉后损失低于 {CAN_GO} BLEU 的头，又有去掉后损失"
        f"至少 {MATTERS} BLEU 的头",
    )
    return (
        f"模型的 {values['heads']} 个头中（贪心解码的验证 BLEU 为 {values['full_bleu']:.2f}），"
        f"有 {values['heads_under_threshold']} 个单独去掉时损失低于 {CAN_GO} BLEU；"
        f"去掉代价最大的是{head_name(values['most_important_head'])}"
        f"（{values['largest_loss']:.2f} BLEU）：{verdict}。"
    )


def divergence_text(values: Mapping[str, Any]) -> str:
    """The mean pairwise JS divergence of each kind of attention, and the entropy range."""
    js = "，".join(
        f"{KINDS.get(kind, kind)} {value:.2f}" for kind, value in values["mean_js"].items()
    )
    low, high = values["entropy_range"]
    return (
        f"同一层内各头的权重两两之间的平均 Jensen–Shannon 散度为：{js}（单位奈特；0 表示权重相同，"
        f"ln 2 = {math.log(2):.2f} 表示完全不重叠），各头的平均熵在 {low:.2f} 到 {high:.2f} 奈特之间。"
    )


def summary(finding: Finding, quick: bool) -> str:
    values, agrees = finding.values, finding.agrees
    return pruning_text(values, agrees) + divergence_text(values)


CHINESE = ChineseText(
    title="各个注意力头在做什么",
    claim=(
        "多头注意力（multi-head attention）让每一层都有几个注意力，各带自己的投影，所以每个头都"
        "可以去看不同的东西：一个看前一个词，一个看对齐的源词，一个分散在整个句子上。但训练好的"
        "模型并不需要所有的头：Michel et al.（2019）一次去掉一个头，发现大多数头去掉后只损失一点，"
        "而少数几个头承担了翻译的大部分。"
    ),
    default_size=(
        "在 Tatoeba 中→英上把 `make train` 的 Transformer（编码器和解码器各 2 层，宽度 256，"
        "六个注意力层各 4 个头：共 24 个头，475 万参数）训练 500 次更新，然后在 300 个验证句上"
        "测量每个头，并用贪心解码把这些句子翻译 25 次（完整模型一次，再每去掉一个头各一次）。"
    ),
    summary=summary,
)
