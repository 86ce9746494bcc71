"""The Chinese page of `seq2seq-lab vanishing_gradients` (`seq2seq.lab.vanishing_gradients`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from seq2seq.lab.experiment import ChineseText, Finding
from seq2seq.lab.vanishing_gradients import CELLS, DEFAULT, LEARNED, QUICK, VOCAB

GATED = ("gru", "lstm")


def per_cell(values: Mapping[str, Any], key: str, form: str, unit: str = "") -> str:
    """`values[f"{cell}_{key}"]` of every cell, formatted, with the cell's name."""
    return "、".join(f"{values[f'{cell}_{key}']:{form}}{unit}（{cell.upper()}）" for cell in CELLS)


def summary(finding: Finding, quick: bool) -> str:
    values = finding.values
    low, high = values["distances"][0], values["distances"][-1]
    decay = {cell: values[f"{cell}_init_decay"] for cell in CELLS}
    longest = {cell: values[f"{cell}_longest_learned"] for cell in CELLS}
    accuracy = {cell: values[f"{cell}_accuracy"][-1] for cell in CELLS}
    accuracies = "、".join(f"{accuracy[cell]:.0%}（{cell.upper()}）" for cell in CELLS)
    fastest = all(decay["rnn"] < decay[cell] for cell in GATED)
    shortest = all(longest[cell] > longest["rnn"] for cell in GATED)
    lowest = accuracy["rnn"] < min(accuracy[cell] for cell in GATED)
    falls = "衰减得最快" if fastest else "并不是衰减得最快的"
    reach = "比两种门控单元都短" if shortest else "并不比两种门控单元都短"
    seeds = (QUICK if quick else DEFAULT).train_seeds  # the run's size, as the English
    return (
        f"初始化时（LSTM 的遗忘门偏置为 {values['forget_bias']}），K = {high} 处的 ‖∂L/∂x_{{t−K}}‖ "
        f"分别只有它在 K = {low} 处的值的 {per_cell(values, 'init_decay', '.1e', ' 倍')}：RNN 的梯度"
        f"{falls}。在每个 K 上各做 {values['steps']} 次 Adam 更新之后（准确率取 {seeds} 个种子的"
        f"均值），学会了的最长距离（这个距离和所有更短的距离上准确率都达到 {LEARNED:.0%}；0 表示"
        f"一个也没学会）是 K = {per_cell(values, 'longest_learned', 'd')}，所以 RNN 能学会的距离"
        f"{reach}；在 K = {high} 处，准确率为 {accuracies}，随机水平是 {1 / VOCAB:.1%}，其中 RNN 的"
        f"{'最低' if lowest else '并不是最低的'}。"
    )


CHINESE = ChineseText(
    title="梯度消失：RNN、GRU 与 LSTM",
    claim=(
        "在普通的循环网络里，传到 K 步之前某个输入的梯度是 K 个雅可比矩阵（Jacobian）的乘积，"
        "所以它大致随 K 按几何级数缩小，网络学不会利用很久以前的信息。LSTM 的细胞状态（cell "
        "state）和 GRU 的插值状态都靠带门控的加法来更新，这给了梯度一条每步的因子是一个门的"
        "通路，而门可以一直接近 1，所以它们能学会更长距离上的依赖。"
    ),
    default_size=(
        "先在 K = 2 到 80 上测量初始化时的梯度（3 个种子），再在随机符号序列上，对六个距离中的"
        "每一个，用 3 个种子把宽度 32 的 RNN、GRU 和 LSTM 各训练 600 次 Adam 更新（在 CPU 上共 "
        "54 次小规模运行，不用 Tatoeba）。"
    ),
    summary=summary,
)
