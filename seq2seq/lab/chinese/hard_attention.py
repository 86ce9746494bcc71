"""The Chinese page of `seq2seq-lab hard_attention` (`seq2seq.lab.hard_attention`): its
methods and tasks, in the experiment's order, are the experiment's `METHODS` and `TASKS`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from seq2seq.lab.chinese import outcome
from seq2seq.lab.experiment import ChineseText, Finding
from seq2seq.lab.hard_attention import METHODS, TASKS
from seq2seq.lab.lab_models import TATOEBA_STEPS

NAMES = {"soft": "软注意力", "straight_through": "直通估计", "reinforce": "REINFORCE"}
PLACES = {"toy": "在玩具倒序任务上", "tatoeba": "在 Tatoeba 中→英上"}


def ratio(values: Mapping[str, Any], task: str, method: str, when: str) -> float:
    """The score gradient's noise-to-signal ratio of `method` on `task` (`init`/`trained`)."""
    return values[f"{task}_{method}_noise_ratio_{when}"]


def noise_text(values: Mapping[str, Any], task: str) -> str:
    """The noise-to-signal ratios at initialisation, and whether REINFORCE is the noisier."""
    ratios = "，".join(f"{NAMES[m]} {ratio(values, task, m, 'init'):.3g}" for m in METHODS[1:])
    soft = ratio(values, task, "soft", "init")
    soft_text = "软注意力恰为 0" if soft == 0 else f"软注意力 {soft:.3g}"
    noisier = all(
        ratio(values, task, "reinforce", when) > ratio(values, task, "straight_through", when)
        for when in ("init", "trained")
    )
    compared = "都比直通估计大" if noisier else "并非都比直通估计大"
    return (
        f"初始化时注意力分数梯度的噪声信号比为：{ratios}（{soft_text}）；"
        f"REINFORCE 的噪声在初始化时和训练后{compared}"
    )


def task_text(values: Mapping[str, Any], task: str) -> str:
    """One task's gradient noise, mean training loss and test BLEU, from its `task_*` values."""
    loss = {method: values[f"{task}_{method}_mean_loss"] for method in METHODS}
    fastest = loss["soft"] < min(loss["straight_through"], loss["reinforce"])
    losses = "，".join(f"{NAMES[m]} {loss[m]:.3f}" for m in METHODS)
    bleu = "、".join(f"{values[f'{task}_{m}_test_bleu']:.1f}" for m in METHODS)
    order = "、".join(NAMES[m] for m in METHODS)
    return (
        f"{PLACES[task]}，{noise_text(values, task)}；平均训练损失：{losses}，所以软注意力"
        f"{'学得最快' if fastest else '并没有学得最快'}；测试 BLEU（{order}）：{bleu}。"
    )


def summary(finding: Finding, quick: bool) -> str:
    values, agrees = finding.values, finding.agrees
    tasks = [task for task in TASKS if f"{task}_soft_mean_loss" in values]
    verdict = outcome(agrees, "这支持论断。", "这并不完全支持论断（哪一部分不成立见上文）。")
    return "".join(task_text(values, task) for task in tasks) + verdict


CHINESE = ChineseText(
    title="用强化学习训练硬注意力",
    claim=(
        "硬注意力（hard attention）只读源句的一个位置。读哪一个是随机选出来的，而选择没有导数，"
        "所以通常的反向传播无法告诉分数该怎样变化。教科书给出的办法是强化学习：REINFORCE 按照"
        "选择之后整句预测得有多好来给每次采样的选择打分，由此得到无偏但噪声很大的梯度。直通估计器"
        "（straight-through estimator）则在反向传播时假装这次选择是一个 softmax：有偏，但噪声小得"
        "多。软注意力（soft attention）本身可微，两种技巧都不需要，而且通常学得最快。"
    ),
    default_size=(
        "在玩具倒序任务（各 300 次更新）和 Tatoeba 中→英（实验室的 GRU 模型，各 "
        f"{TATOEBA_STEPS} 次更新；软注意力和直通估计两组与 mechanisms 实验共用）上分别训练软注意力、"
        "直通估计和 REINFORCE 三种注意力，然后测量分数梯度在 20 次采样上的噪声、测试 BLEU，以及"
        "对齐准确率或人工标注对齐上的 AER。"
    ),
    summary=summary,
)
