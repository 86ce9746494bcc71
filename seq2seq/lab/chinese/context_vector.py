"""The Chinese page of `seq2seq-lab context_vector` (`seq2seq.lab.context_vector`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from seq2seq.lab.chinese import nested, outcome
from seq2seq.lab.context_vector import (
    ATTENTIONS,
    BUCKETS,
    DOC_ARMS,
    DOC_SEEDS,
    MECHANISMS,
    ONE_VECTOR,
    SEEDS,
    ratios,
)
from seq2seq.lab.experiment import ChineseText, Finding
from seq2seq.lab.lab_models import TATOEBA_STEPS

NAMES = {"none": "不用注意力的模型", "final": "最后状态", "mean": "均值",
         "attention_pool": "注意力池化", "additive": "加性注意力",
         "scaled_dot": "缩放点积注意力"}  # fmt: skip
GROWS = "所以每步一个上下文的优势随源句长度增大，与论断一致"
DOES_NOT_GROW = "所以这里的优势没有随源句长度增大，与论断相反"


def study_rows(table: list[dict[str, Any]], study: str) -> list[dict[str, Any]]:
    """The table's rows of one study ("sentences" or "documents"), in their order."""
    return [row for row in table if row["study"] == study]


def mechanism_rows(table: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The sentences study's rows as the English summary reads them (`bucket_row`s, whose
    arm is their `mechanism`)."""
    return [{**row, "mechanism": row["arm"]} for row in study_rows(table, "sentences")]


def bleu_by_arm(rows: list[dict[str, Any]], arms: tuple[str, ...]) -> dict[str, list[float]]:
    """Each arm's BLEU in every bucket, the shortest first."""
    return {arm: [row["bleu"] for row in rows if row["arm"] == arm] for arm in arms}


def times(ratio: float) -> str:
    """A ratio of two BLEU scores, `—` where it is undefined (the plain model scored 0)."""
    return "—" if math.isnan(ratio) else f"{ratio:.2f} 倍"


def lengths_text(table: list[dict[str, Any]]) -> str:
    """Whether every model's BLEU is lower in the longest bucket than in the shortest, and
    each attention's BLEU relative to the plain model's there (`ratios`, as the English)."""
    rows = mechanism_rows(table)
    bleu = bleu_by_arm(rows, MECHANISMS)
    rising = "、".join(NAMES[m] for m in MECHANISMS if bleu[m][-1] >= bleu[m][0])
    falls = ("每个模型的 BLEU 都随长度下降" if not rising else
             f"并非每个模型的 BLEU 都随长度下降（{rising}在最长的区间不低于最短的区间）")  # fmt: skip
    relative = "；".join(
        f"{NAMES[m]} {times(ratios(rows, m)[0])} → {times(ratios(rows, m)[1])}" for m in ATTENTIONS
    )
    undefined = any(math.isnan(r) for m in ATTENTIONS for r in ratios(rows, m))
    note = "；“—”表示不用注意力的模型在那个区间得 0 分" if undefined else ""
    return (
        f"{falls}；注意力模型的 BLEU 与不用注意力的模型之比，从最短的区间到最长的区间为："
        f"{relative}（这个度量是在运行之后才选的，所以只是提示，不是检验{note}）"
    )


def sentences_text(values: Mapping[str, Any], table: list[dict[str, Any]], quick: bool) -> str:
    """The short-sentences study: each attention's gain over the one fixed context vector
    in the shortest and in the longest bucket, its verdict, and the BLEU against length."""
    buckets = values["buckets"]
    where = "在玩具倒序任务的测试集上" if quick else "在 Tatoeba 中→英测试集上"
    unit = "个符号" if quick else "个字符"
    gains = "；".join(
        f"{NAMES[arm]} {values[f'gap_shortest_{arm}']:+.1f} → {values[f'gap_longest_{arm}']:+.1f}"
        for arm in ATTENTIONS
    )
    verdict = outcome(values["agrees_sentences"], GROWS, DOES_NOT_GROW,
                      "两种注意力的结果不一致，所以这不能判定这条论断")  # fmt: skip
    return (
        f"{where}，按源句长度分成 {len(buckets)} 个区间，从 {buckets[0]} 到 {buckets[-1]} "
        f"{unit}（每种模型 {values['seeds']} 个种子），相对只有一个固定上下文向量的模型，"
        f"BLEU 的增益从最短的区间到最长的区间是：{gains}。{verdict}。{lengths_text(table)}。"
    )


def documents_text(
    documents: Mapping[str, Any], table: list[dict[str, Any]], agrees: bool | None, quick: bool
) -> str:
    """The documents study: its texts, each arm's BLEU and each attention's gain over each
    one-vector arm in the shortest and in the longest bucket, and its verdict (the
    experiment's)."""
    buckets = documents["buckets"]
    bleu = bleu_by_arm(study_rows(table, "documents"), DOC_ARMS)
    scores = "；".join(f"{NAMES[arm]} {bleu[arm][0]:.1f} → {bleu[arm][-1]:.1f}" for arm in DOC_ARMS)
    shortest, longest = documents["gain_shortest"], documents["gain_longest"]
    where = ("在生成的中→英文档的测试集上" if quick else
             "在把 Tatoeba 中→英测试集的句子打乱、每 1–6 句拼成一篇的文档上")  # fmt: skip
    gains = "；".join(
        f"{NAMES[arm]}相对"
        + "、".join(
            f"{NAMES[base]} {shortest[arm][base]:+.1f} → {longest[arm][base]:+.1f}"
            for base in ONE_VECTOR
        )
        for arm in ATTENTIONS
    )
    pairs = [(shortest[arm][base], longest[arm][base]) for arm in ATTENTIONS for base in ONE_VECTOR]
    grown = sum(last > first for first, last in pairs)
    undecided = f"各项增益的走向不一致（{len(pairs)} 项中 {grown} 项增大），所以这不能判定这条论断"
    return (
        f"{where}（{documents['documents']} 篇文档，平均每篇 "
        f"{documents['sentences_per_document']:.1f} 个句子、{documents['mean_length']:.0f} 个字符，"
        f"最长 {documents['max_length']} 个字符；每组 {documents['seeds']} 个种子），按长度分成 "
        f"{len(buckets)} 个区间，从 {buckets[0]} 到 {buckets[-1]} 个字符，从最短的区间到最长的区间，"
        f"BLEU 依次为：{scores}。BLEU 增益为：{gains}。"
        f"{outcome(agrees, GROWS, DOES_NOT_GROW, undecided)}。"
    )


def summary(finding: Finding, quick: bool) -> str:
    values, agrees, table = finding.values, finding.agrees, finding.table
    documents = nested(values, "documents")
    on_sentences = outcome(
        values["agrees_sentences"], "与论断一致", "与论断不一致", "不能判定这条论断"
    )
    return (
        f"**短句。** {sentences_text(values, table, quick)}\n\n"
        f"**文档。** {documents_text(documents, table, agrees, quick)}\n\n"
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
        f"对实验室的 GRU 模型做两项研究，每次运行训练 {TATOEBA_STEPS} 次更新，用贪心解码在 "
        f"{BUCKETS} 个源句长度区间里评分。短句：Tatoeba 中→英，不用注意力、用加性注意力、用缩放"
        f"点积注意力，各 {SEEDS} 个种子（{len(MECHANISMS) * SEEDS} 次运行）。文档：把 Tatoeba 的"
        "句子打乱，每 1–6 句拼成一篇伪文档（`data=tatoeba_zh_en_docs "
        "data.documents.order=random`），唯一的向量用三种方式得到（最后状态、均值、注意力池化："
        "`attention=none` 配 `model.summary=auto`、`mean`，或者 `attention_pool` 加 "
        "`attention.context=attention_pool`），与两种注意力对比，各 "
        f"{DOC_SEEDS} 个种子（{len(DOC_ARMS) * DOC_SEEDS} 次运行）。"
    ),
    summary=summary,
)
