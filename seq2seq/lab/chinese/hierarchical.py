"""The Chinese page of `seq2seq-lab hierarchical` (`seq2seq.lab.hierarchical`).

The English summary also quotes the p-value of the per-sentence BLEU (hierarchical against
general, a paired bootstrap over the first seed's sentences); neither the finding's values
nor its table record it, and it cannot be computed again without the outputs, so it is left
out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from seq2seq.lab.chinese import nested, outcome
from seq2seq.lab.experiment import ChineseText, Finding
from seq2seq.lab.hierarchical import HIERARCHICAL, SEEDS
from seq2seq.lab.lab_models import TATOEBA_STEPS

LABELS = {"general": "扁平（general）", "scaled_dot": "扁平（缩放点积）", "hierarchical": "层次"}


def spaced(label: str) -> str:
    """The space between a label and the number after it: none after a closing "）"."""
    return "" if label.endswith("）") else " "


def largest_p(p_values: list[float | None], missing: float = math.nan) -> float:
    """The largest p-value over the seeds; `missing` stands for a seed without one."""
    found = [missing if p is None else p for p in p_values]
    found = [p for p in found if not math.isnan(p)]
    return max(found) if found else math.nan


def longest_bucket(table: list[dict[str, Any]]) -> dict[str, Any]:
    """The hierarchical arm's row of the longest source-length bucket, as the English summary
    takes it: the arm's last row (the table lists "all", then the buckets, shortest first)."""
    return [row for row in table if row["attention"] == HIERARCHICAL][-1]


def quality_text(values: Mapping[str, Any], table: list[dict[str, Any]], where: str) -> str:
    seeds = values["seeds"]
    note = "，为各种子中最大者" if seeds > 1 else ""
    longest = longest_bucket(table)
    return (
        f"{where}（每组 {seeds} 个种子），扁平 general 注意力的文档 BLEU 是 "
        f"{values['test_bleu_general']:.1f}，层次注意力是 {values['test_bleu_hierarchical']:.1f}"
        f"（p = {largest_p(values['p_hierarchical_vs_flat']):.3f}{note}）；在最长的一档源文"
        f"（{longest['source length']} 个字符）上，层次注意力与扁平 general 注意力的 BLEU 之差为 "
        f"{longest['gap vs flat']:+.1f}。"
    )


def accuracy_text(values: Mapping[str, Any], agrees: bool | None) -> str:
    verdict = outcome(agrees, "与论断一致", "与论断相反", "各种子的结果不一致，所以这不能判定论断")
    return (
        "在参考译文上做教师强制时，最大的句子权重落在正确源句上的目标子词比例：扁平 "
        f"{values['sentence_accuracy_general']:.2f}，层次 "
        f"{values['sentence_accuracy_hierarchical']:.2f}（随机猜测 {values['chance']:.2f}，"
        f"取相同相对位置 {values['baseline_position']:.2f}，取最长的句子 "
        f"{values['baseline_longest']:.2f}；只计 2 句及以上的文档）：{verdict}。"
    )


def control_text(values: Mapping[str, Any]) -> str:
    held = sum(values["holds_against_scaled_dot_per_seed"])
    return (
        "与扁平的缩放点积注意力（只有 1/√d 缩放，没有 W）相比：它的 BLEU 是 "
        f"{values['test_bleu_scaled_dot']:.1f}（层次注意力对它：p = "
        f"{largest_p(values['p_hierarchical_vs_scaled_dot'], 1.0):.3f}），句子准确率 "
        f"{values['sentence_accuracy_scaled_dot']:.2f}；判定所用的检验对它在 "
        f"{values['seeds']} 个种子中的 {held} 个上成立。"
    )


def sentence_text(values: Mapping[str, Any]) -> str:
    level = values["sentence_level"][0]
    counts = "、".join(
        f"{label}{spaced(label)}{level['matched'][arm]} 篇" for arm, label in LABELS.items()
    )
    if level["bleu"] is None:
        return (
            f"输出与参考译文句数相同的文档（共 {level['documents']} 篇）：{counts}；"
            "没有各组共同的文档，所以没有逐句 BLEU。"
        )
    bleus = "、".join(
        f"{label}{spaced(label)}{level['bleu'][arm]:.1f}" for arm, label in LABELS.items()
    )
    return (
        f"逐句来看（第一个种子）：{level['documents']} 篇文档中，输出与参考译文句数相同的有"
        f"{counts}；在各组都相同的 {level['both']} 篇上，逐句 BLEU 为{bleus}。"
    )


def cost_text(values: Mapping[str, Any]) -> str:
    ratios, scaled = values["cost_ratios"], values["cost_ratios_vs_scaled_dot"]
    pace = "、".join(
        f"{label}{spaced(label)}{nested(values, 'run_seconds_per_update', arm):.2f} 秒"
        for arm, label in LABELS.items()
    )
    return (
        f"在 K = {ratios['sentences']} 时，层次注意力一步训练的前向 FLOPs 是 general 的 "
        f"{ratios['flops']:.2f} 倍（是缩放点积的 {scaled['flops']:.2f} 倍），实测时间是它的 "
        f"{ratios['time']:.2f} 倍（对缩放点积是 {scaled['time']:.2f} 倍；float32 矩阵乘法上限 "
        f"{values['ceiling_gflops']:.0f} GFLOP/s）；训练时每次更新平均用时：{pace}（含验证）。"
    )


def summary(finding: Finding, quick: bool) -> str:
    values, agrees = finding.values, finding.agrees
    where = "在玩具文档上" if quick else "在 Tatoeba 中→英的测试伪文档上"
    parts = (quality_text(values, finding.table, where), accuracy_text(values, agrees),
             control_text(values), sentence_text(values), cost_text(values))  # fmt: skip
    return "".join(parts)


CHINESE = ChineseText(
    title="文档上的层次注意力：先词，后句",
    claim=(
        "在由多个句子组成的长输入上，两层的注意力（多层 attention）先给每个句子内部的词加权，"
        "再给句子本身加权，两层都由解码器发出查询（Yang et al. 2016；Miculicchio et al. 2018）。"
        "句子这一层应当让模型看向源文中正确的那个句子，在长输入上帮到它，而代价只比在所有词上"
        "做一次扁平的 softmax 多一点。"
    ),
    default_size=(
        "在 Tatoeba 中→英的伪文档（1 到 6 个句子，按随机顺序拼接）上训练实验室的 GRU 模型，"
        "注意力分别用扁平的 `general`、层次的 `hierarchical`，以及作为第二个扁平组的 "
        f"`scaled_dot`，每组 {SEEDS} 个种子（{3 * SEEDS} 次运行，各 {TATOEBA_STEPS} 次更新）；"
        "对贪心解码的测试译文整篇打分、按源文长度打分并逐句打分，在参考译文上（教师强制）测量"
        "最大的句子权重有多常落在正确的源句上，并在 2、4、6 个句子的随机文档上给一步训练计时。"
        "若对每个种子，层次模型的句子准确率都高于 general 模型，而且它的 BLEU 没有显著更低"
        "（p < 0.05），就认为与论断一致；对 scaled dot 的同一检验也一并报告。"
    ),
    summary=summary,
)
