"""The Chinese page of `seq2seq-lab context_vector` (`seq2seq.lab.context_vector`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from seq2seq.lab.chinese import nested, outcome
from seq2seq.lab.experiment import ChineseText, Finding
from seq2seq.lab.lab_models import TATOEBA_STEPS

ATTENTIONS = {"additive": "加性注意力", "scaled_dot": "缩放点积注意力"}
ONE_VECTOR = {"final": "最后状态", "mean": "均值", "attention_pool": "注意力池化"}
GROWS = "所以每步一个上下文的优势随源句长度增大，与论断一致"
DOES_NOT_GROW = "所以这里的优势没有随源句长度增大，与论断相反"


def sentences_text(values: Mapping[str, Any], quick: bool) -> str:
    """The short-sentences study: each attention's gain over the one fixed context vector
    in the shortest and in the longest bucket, and its verdict."""
    buckets = values["buckets"]
    where = "在玩具倒序任务的测试集上" if quick else "在 Tatoeba 中→英测试集上"
    unit = "个符号" if quick else "个字符"
    gains = "；".join(
        f"{label} {values[f'gap_shortest_{arm}']:+.1f} → {values[f'gap_longest_{arm}']:+.1f}"
        for arm, label in ATTENTIONS.items()
    )
    verdict = outcome(values["agrees_sentences"], GROWS, DOES_NOT_GROW,
                      "两种注意力的结果不一致，所以这不能判定这条论断")  # fmt: skip
    return (
        f"{where}，按源句长度分成 {len(buckets)} 个区间，从 {buckets[0]} 到 {buckets[-1]} "
        f"{unit}（每种模型 {values['seeds']} 个种子），相对只有一个固定上下文向量的模型，"
        f"BLEU 的增益从最短的区间到最长的区间是：{gains}。{verdict}。"
    )


def documents_text(documents: Mapping[str, Any], agrees: bool | None, quick: bool) -> str:
    """The documents study: its texts, each attention's gain over each one-vector arm in the
    shortest and in the longest bucket, and its verdict (the experiment's)."""
    buckets = documents["buckets"]
    shortest, longest = documents["gain_shortest"], documents["gain_longest"]
    where = ("在生成的中→英文档的测试集上" if quick else
             "在把 Tatoeba 中→英测试集的句子打乱、每 1–6 句拼成一篇的文档上")  # fmt: skip
    gains = "；".join(
        f"{label}相对"
        + "、".join(
            f"{name} {shortest[arm][base]:+.1f} → {longest[arm][base]:+.1f}"
            for base, name in ONE_VECTOR.items()
        )
        for arm, label in ATTENTIONS.items()
    )
    pairs = [(shortest[arm][base], longest[arm][base]) for arm in ATTENTIONS for base in ONE_VECTOR]
    grown = sum(last > first for first, last in pairs)
    undecided = f"各项增益的走向不一致（{len(pairs)} 项中 {grown} 项增大），所以这不能判定这条论断"
    return (
        f"{where}（{documents['documents']} 篇文档，平均每篇 "
        f"{documents['sentences_per_document']:.1f} 个句子、{documents['mean_length']:.0f} 个字符，"
        f"最长 {documents['max_length']} 个字符；每组 {documents['seeds']} 个种子），按长度分成 "
        f"{len(buckets)} 个区间，从 {buckets[0]} 到 {buckets[-1]} 个字符，从最短的区间到最长的区间，"
        f"BLEU 增益为：{gains}。{outcome(agrees, GROWS, DOES_NOT_GROW, undecided)}。"
    )


def summary(finding: Finding, quick: bool) -> str:
    values, agrees = finding.values, finding.agrees
    documents = nested(values, "documents")
    on_sentences = outcome(
        values["agrees_sentences"], "与论断一致", "与论断不一致", "不能判定这条论断"
    )
    return (
        f"**短句。** {sentences_text(values, quick)}\n\n"
        f"**文档。** {documents_text(documents, agrees, quick)}\n\n"
        "下面的结论是文档研究的结论，这才是论断需要的检验（源文本长度是一个句子的好几倍）；"
        f"在短句上，测量{on_sentences}。表中的 `none`（句子）和 `final`（文档）是同一个模型："
        "用最后状态启动解码器，以各状态的均值作为唯一的上下文；其他模型相对它的增益在 "
        "`gain vs last` 列。"
    )


CHINESE = ChineseText(
    title="一个上下文向量，还是每步一个",
    claim=(
        "没有注意力的编码器-解码器必须在写出第一个词之前，把整个源句压进一个固定大小的向量，"
        "句子越长，这个向量就不得不丢掉越多的东西。注意力让解码器回看每一个编码器状态，为它写的"
        "每个词重新构造一个上下文，所以它在长句上应当损失更少：注意力带来的 BLEU 增益应当随源句"
        "长度增大（Bahdanau et al. 2015，图 2）。"
    ),
    default_size=(
        f"对实验室的 GRU 模型做两项研究，每次运行训练 {TATOEBA_STEPS} 次更新，用贪心解码在五个"
        "源句长度区间里评分。短句：Tatoeba 中→英，不用注意力、用加性注意力、用缩放点积注意力，"
        "各两个种子（6 次运行）。文档：把 Tatoeba 的句子打乱，每 1–6 句拼成一篇伪文档"
        "（`data=tatoeba_zh_en_docs data.documents.order=random`），唯一的向量用三种方式得到"
        "（最后状态、均值、注意力池化：`attention=none` 配 `model.summary=auto`、`mean`，或者 "
        "`attention_pool` 加 `attention.context=attention_pool`），与两种注意力对比，各 2 个种子"
        "（10 次运行）。"
    ),
    summary=summary,
)
