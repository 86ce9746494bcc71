"""The Chinese page of `seq2seq-lab masks` (`seq2seq.lab.masks`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from seq2seq.lab.chinese import outcome
from seq2seq.lab.experiment import ChineseText, Finding

# The parts of the claim, as `values["checks"]` names them (`seq2seq.lab.masks.verdicts`).
CHECKS = {
    "the loss without the future mask collapses": "不带未来掩码时损失远低于带掩码的模型",
    "generation without it fails": "不带未来掩码时生成失败",
    "no output changes with the padding mask": "带填充掩码时没有输出改变",
    "outputs change without it": "不带填充掩码时输出会改变",
}


def future_text(values: Mapping[str, Any]) -> str:
    return (
        f"不带未来掩码时，教师强制下的验证损失降到每个词元 {values['unmasked_loss']:.3f} 奈特，"
        f"带掩码时是 {values['masked_loss']:.3f}；然而贪心生成完全正确的验证序列只占 "
        f"{values['unmasked_exact']:.0%}，带掩码的模型占 {values['masked_exact']:.0%}（BLEU {values['unmasked_bleu']:.1f} 对 "
        f"{values['masked_bleu']:.1f}）"
    )


def padding_text(values: Mapping[str, Any]) -> str:
    return (
        f"带填充掩码时，句子后面接上至多 {values['most_pads']} 个填充词元，带掩码模型的 "
        f"{values['sentences']} 个测试输出中有 {values['changed_with_mask']} 个改变；"
        f"把填充当作词元来读时，至多有 {values['changed_without_mask']} 个改变"
    )


def not_found(values: Mapping[str, Any]) -> str:
    failed = [claim for claim, holds in values.get("checks", {}).items() if not holds]
    return "；".join(CHECKS.get(claim, claim) for claim in failed)


def summary(finding: Finding, quick: bool) -> str:
    values, agrees = finding.values, finding.agrees
    missing = not_found(values)
    verdict = outcome(
        agrees,
        "论断的两部分都成立",
        "论断在这里并不完全成立" + (f"，没有观察到：{missing}" if missing else ""),
    )
    return f"{future_text(values)}。{padding_text(values)}：{verdict}。"


CHINESE = ChineseText(
    title="掩码：未来与填充",
    claim=(
        "注意力会读取摆在它面前的一切，所以要由掩码（mask）决定它不能读什么。未来掩码（future "
        "mask）对解码器的每个位置遮住它之后的目标词元；不带它训练的解码器会读到它被要求预测的"
        "答案，因此它的教师强制（teacher forcing）损失会远低于一个老老实实的模型，而它却无法生成，"
        "因为生成时并没有下一个词元可读。填充掩码（padding mask）遮住把一个批次补齐的填充词元"
        "（pad）；没有它，一个句子的译文会随着同一批次里其他句子恰好需要的填充而改变。"
    ),
    default_size=(
        "在玩具倒序任务上把一个 2 + 2 层、宽 64、4 个头的 Transformer 训练两次（各 400 次更新，"
        "分别带和不带未来掩码；单核上约一分钟），再把 300 个测试句各接上 0 到 20 个填充词元后"
        "解码，分别带和不带填充掩码。"
    ),
    summary=summary,
)
