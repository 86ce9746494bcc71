"""The Chinese page of `seq2seq-lab pooling` (`seq2seq.lab.pooling`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from seq2seq.lab.chinese import outcome, p_value
from seq2seq.lab.experiment import ChineseText, Finding
from seq2seq.lab.lab_models import TATOEBA_STEPS

ARMS = {"final": "最后状态", "mean": "均值", "attention_pool": "注意力池化",
        "additive": "加性注意力（参照）"}  # fmt: skip
POOLINGS = {"summary": "起始向量（summary）的池化", "context": "上下文（context）的池化"}


def ends_text(profile: Mapping[str, Any]) -> str:
    ends, uniform = profile["ends_share"], profile["uniform_ends_share"]
    text = f"首尾两个子词上 {ends:.2f}（均匀 {uniform:.2f}）"
    if ends > 2 * uniform:
        text += "，而双向 GRU 编码器在这两处的状态各自已经从一个方向读完了整句：它挑的可能是已经概括了整句的状态，而不是那两个位置上的子词本身"
    return text


def pieces_text(profile: Mapping[str, Any], count: int = 5) -> str:
    pieces = [f"{row['piece']}（{row['× uniform']:.1f} 倍，{row['count']} 次）"
              for row in profile["top_pieces"][:count]]  # fmt: skip
    return "、".join(pieces) or "没有出现得足够多的子词"


def profile_text(name: str, profile: Mapping[str, Any]) -> str:
    first, last = profile["bin_shares"][0], profile["bin_shares"][-1]
    uniform = profile["uniform_bin_shares"]
    return (
        f"{POOLINGS.get(name, name)}把 {first:.2f} 的权重放在源句的前五分之一（均匀为 "
        f"{uniform[0]:.2f}），{last:.2f} 放在最后五分之一（均匀 {uniform[-1]:.2f}），"
        f"{profile['eos_share']:.2f} 放在 EOS 上（均匀 {profile['uniform_eos_share']:.2f}），"
        f"{ends_text(profile)}；它的熵是 {profile['entropy']:.2f} 奈特，ln n 为 "
        f"{profile['uniform_entropy']:.2f}（比值 {profile['entropy_ratio']:.2f}）；权重最高的子词"
        f"（均匀权重的倍数，出现次数）：{pieces_text(profile)}"
    )


def summary(finding: Finding, quick: bool) -> str:
    values, agrees = finding.values, finding.agrees
    bleu = {arm: values[f"test_bleu_{arm}"] for arm in ARMS}
    where = "在玩具倒序任务的测试集上" if quick else "在 Tatoeba 中→英测试集上"
    scores = "；".join(f"{label} {bleu[arm]:.2f}" for arm, label in ARMS.items())
    verdict = outcome(
        agrees, "注意力池化不比两者差，与论断一致", "注意力池化没有同时胜过两者，与论断相反"
    )
    profiles = [
        profile_text(key.removeprefix("weights_"), profile)
        for key, profile in values.items() if key.startswith("weights_")
    ]  # fmt: skip
    return (
        f"{where}（每组 {values['seeds']} 个种子），贪心解码的测试 BLEU：{scores}。注意力池化相对最后状态 "
        f"{bleu['attention_pool'] - bleu['final']:+.2f}（{p_value(values['p_pooled_vs_final'])}），"
        f"相对均值 {bleu['attention_pool'] - bleu['mean']:+.2f}"
        f"（{p_value(values['p_pooled_vs_mean'])}）：{verdict}。在测试句上，"
        + "；".join(profiles)
        + "。"
    )


CHINESE = ChineseText(
    title="N 对 1：最后状态、均值还是注意力池化",
    claim=(
        "没有注意力时，解码器只拿到整个源句的一个向量。编码器的最后状态偏向句子的结尾，简单的均值让"
        "每个子词分量相同；注意力池化（笔记里的“传统注意力”：一个学到的查询给每个编码器状态打分，"
        "Yang et al. 2016）学会哪些位置重要并据此加权，所以它应当比两者更好地概括句子：用注意力池化"
        "来启动并喂给解码器的普通编码器-解码器，翻译得至少应当和用最后状态或均值的一样好，而它的"
        "权重应当显示出哪些位置承载了句子的意思。"
    ),
    default_size=(
        "在 Tatoeba 中→英上训练实验室的 GRU 模型，不带注意力，唯一的向量分别是编码器的最后状态、"
        "各状态的均值或它们的注意力池化，另加一个带加性注意力的模型作参照：每组一个种子（4 次运行，"
        f"各 {TATOEBA_STEPS} 次更新）；对每次运行的贪心测试译文算总分和五个源句长度区间的分数并与最后状态比较，"
        "再读出 1,000 个测试句上的池化权重。"
    ),
    summary=summary,
)
