"""The Chinese page of `seq2seq-lab rnn_forms` (`seq2seq.lab.rnn_forms`)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from seq2seq.lab.experiment import ChineseText, Finding
from seq2seq.lab.rnn_forms import DEFAULT, QUICK

UNREAD_AT_CHANCE = "N vs N at chance on reverse's unread half"  # a key of `predictions`


def fitted_cells(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The (form, task) cells the claim says fit, in the order the record names them
    (`predictions`: "FORM fits TASK")."""
    cells = [key.split(" fits ", 1) for key in values["predictions"] if " fits " in key]
    return [(form, task) for form, task in cells]


def prediction_text(key: str, fits: float) -> str:
    if key == UNREAD_AT_CHANCE:
        return "N vs N 在 reverse 还没读到所需输入的那些位置上停留在随机水平"
    if " fits " in key:
        form, task = key.split(" fits ", 1)
        return f"{form} 胜任 {task}（逐词元准确率至少 {fits}）"
    return key


def reverse_accuracies(values: Mapping[str, Any]) -> tuple[float, float, float]:
    """N vs N's mean accuracy on reverse at the output positions whose input it has not read
    yet, chance's there, and N vs N's at the other positions."""
    by_position = values["reverse_by_position"]["N vs N"]
    unread = values["unread_positions"]
    read = [i for i in range(len(by_position)) if i not in unread]
    chance = values["reverse_chance_by_position"]
    return (statistics.fmean(by_position[i] for i in unread),
            statistics.fmean(chance[i] for i in unread),
            statistics.fmean(by_position[i] for i in read))  # fmt: skip


def summary(finding: Finding, quick: bool) -> str:
    values = finding.values
    cells, token = fitted_cells(values), values["token_accuracy"]
    fits = "，".join(f"{form} 做 {task} {token[form][task]:.2f}" for form, task in cells)
    chances = "、".join(f"{values['chance_token'][task]:.2f}" for _, task in cells)
    unread, chance, read = reverse_accuracies(values)
    exact = values["sequence_accuracy"]
    failed = [prediction_text(key, values["fits"])
              for key, held in values["predictions"].items() if not held]  # fmt: skip
    failures = f"未成立的预测：{'；'.join(failed)}。" if failed else ""
    scored = (QUICK if quick else DEFAULT).eval_examples  # the run's size, as the English
    return (
        f"各形式在与自身形状相同的任务上的逐词元准确率：{fits}（随机水平依次为 {chances}；"
        f"达到 {values['fits']} 才算胜任）。reverse（倒序）的形状是 N vs N，但 N vs N 在所需输入"
        f"还没读到的输出位置上只有 {unread:.2f}（随机水平 {chance:.2f}），在其余位置上是 "
        f"{read:.2f}，所以在 {values['length']} 个字母的倒序上，它整句写对的比例只有 "
        f"{exact['N vs N']['reverse']:.2f}，N vs M（编码器-解码器）则有 "
        f"{exact['N vs M']['reverse']:.2f}。每一格是 {values['seeds']} 个模型的均值，每个模型训练 "
        f"{values['steps']} 次更新，在 {scored} 个新抽取的样本上评分；表中给出逐词元准确率 / 整序列准确率，"
        "“—”表示这种形式表达不了该任务的形状，chance 一行是不看输入所能给出的最好答案。" + failures
    )


CHINESE = ChineseText(
    title="RNN 的四种形式：N vs N、N vs 1、1 vs N、N vs M",
    claim=(
        "循环神经网络（RNN）可以把一个序列映射成等长的序列（N vs N），把一个序列映射成一个输出"
        "（N vs 1），把一个输入映射成一个序列（1 vs N），或者把一个序列映射成另一长度的序列"
        "（N vs M，即编码器-解码器），每种形式适合输入和输出恰好是它那种形状的任务。输出长度与"
        "输入不同的任务，或者第 i 步的输出依赖 i 之后输入的任务，需要 N vs M：编码器先把整个"
        "输入读进一个向量 c，解码器再开始写。翻译正是这样的任务，所以它需要一个编码器和一个解码器。"
    ),
    default_size=(
        "五个合成任务，序列长 7 个字母：tag（标出每个字母是元音还是辅音）、reverse（倒序）、"
        "majority（元音是否占多数）、spell（由单词编号拼出单词）、consonants（按顺序取出辅音）。"
        "对每种形式能表达的每个任务，训练这种形式的单层、宽度 64 的 GRU（共 9 个“形式 × 任务”组合，"
        "各 2 个种子，每个模型做 1500 次 Adam 更新、每次 64 个样本，在 CPU 上），再在 1000 个"
        "新抽取的样本上评分。"
    ),
    summary=summary,
)
