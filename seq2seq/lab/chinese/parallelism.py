"""The Chinese page of `seq2seq-lab parallelism` (`seq2seq.lab.parallelism`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from seq2seq.lab.chinese import outcome
from seq2seq.lab.experiment import ChineseText, Finding
from seq2seq.lab.parallelism import FAMILIES, of_family


def per_family(values: Mapping[str, Any], key: str) -> str:
    """The growth `values[f"{family}_{key}"]` of every family, with the family's name."""
    return "、".join(f"{values[f'{family}_{key}']:.1f} 倍（{family}）" for family in FAMILIES)


def summary(finding: Finding, quick: bool) -> str:
    values, agrees = finding.values, finding.agrees
    lengths, _ = of_family(finding.table, FAMILIES[0], "train step ms")  # the lengths timed
    low, high = lengths[0], lengths[-1]
    longest = "、".join(
        f"{values[f'{family}_train_ms'][-1]:.0f} ms（{family}）" for family in FAMILIES
    )
    verdict = outcome(
        agrees,
        "增长得最快，与论断的预测一致",
        "在这里并没有增长得最快，与论断相反（核数不多的 CPU 很少把一层的各个位置并行计算）",
    )
    return (
        f"从 n = {low} 到 n = {high} 个词元（句长是原来的 {high // low} 倍），训练步的时间分别变为原来的 "
        f"{per_family(values, 'train_growth')}，在 n = {high} 时达到 {longest}；这台设备的 float32 "
        f"矩阵乘法上限是 {values['ceiling_gflops']:.0f} GFLOP/s：RNN 的训练步时间{verdict}。RNN 每层要"
        "顺序执行 n 步，而 CNN 和 Transformer 只需一步；但贪心解码在三者中都是顺序的，每句的解码"
        f"时间分别变为原来的 {per_family(values, 'decode_growth')}。"
    )


CHINESE = ChineseText(
    title="并行性：RNN、CNN 与 Transformer 随句长的变化",
    claim=(
        "循环层必须一个位置接一个位置地计算它的状态，因为每个状态都要用到前一个状态。卷积层和"
        "自注意力层则由下面一层一次算出所有位置，所以在能同时执行大量运算的硬件上，句子变长时"
        "它们的训练步变慢得更少。到了生成阶段，哪个模型族都逃不开顺序：每个新词元都依赖前一个"
        "词元。"
    ),
    default_size=(
        "在随机词元上给 compare_gru、compare_cnn 和 compare_transformer 三个模型计时（0.84 M 到 "
        "0.89 M 个参数，三者都用缩放点积交叉注意力）：对 32 个长度为 n = 8 到 128 个词元的句子"
        "计时一个训练步和贪心解码，取 7 次重复的中位数；不训练，不用 Tatoeba。"
    ),
    summary=summary,
)
