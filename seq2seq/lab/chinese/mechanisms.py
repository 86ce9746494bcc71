"""The Chinese page of `seq2seq-lab mechanisms` (`seq2seq.lab.mechanisms`).

The finding records each mechanism's numbers under its name (`zero_share.sparsemax`); its
region is in the table (`region`), and a mechanism is one of the softmax models when that
region is the experiment's `SOFT`, as the English summary decides it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from seq2seq.lab.chinese import outcome
from seq2seq.lab.experiment import ChineseText, Finding
from seq2seq.lab.lab_models import TATOEBA_STEPS
from seq2seq.lab.mechanisms import SOFT, percent_range


def softmax_text(shares: list[float]) -> str:
    if max(shares) >= 0.001:
        return f"softmax 模型至多 {100 * max(shares):.1f}%"
    return "softmax 模型不到 0.1%" if max(shares) > 0 else "softmax 模型则一个零权重也没有"


def sparsity_text(values: Mapping[str, Any], table: list[dict[str, Any]]) -> str:
    """The share of exactly zero weights of the non-soft regions, and of the softmax models;
    empty when the run trained only one kind."""
    sparse = [values[f"zero_share.{row['mechanism']}"] for row in table if row["region"] != SOFT]
    soft = [values[f"zero_share.{row['mechanism']}"] for row in table if row["region"] == SOFT]
    if not (sparse and soft):
        return ""
    return f"非 soft 的区域让 {percent_range(sparse)} 的权重恰好为零，{softmax_text(soft)}。"


def summary(finding: Finding, quick: bool) -> str:
    values, agrees = finding.values, finding.agrees
    label, key = ("对齐准确率", "accuracy") if quick else ("测试 AER", "aer")
    if not values["best"]:
        return f"没有一种机制给出了{label}：这些权重无法作为对齐来打分。"
    names = values["mechanisms"].split(",")
    best, worst = values["best"], values["worst"]
    verdict = outcome(
        agrees,
        "每种机制的权重都能读作对齐并打分，与论断一致",
        "有的机制的权重给不出分数，与论断相反",
    )
    return (
        f"在 {len(names)} 种机制中，{best} 的对齐最好（{label} {values[f'{key}.{best}']:.3f}），"
        f"{worst} 最差（{values[f'{key}.{worst}']:.3f}）。{sparsity_text(values, finding.table)}"
        f"所以{verdict}。"
    )


CHINESE = ChineseText(
    title="各种注意力机制下的我爱中国",
    claim=(
        "每一种注意力机制，不论它的打分函数（score：点积 dot、缩放点积 scaled dot、general、"
        "加性 additive、余弦 cosine）或区域（region：soft、sparsemax、1.5-entmax、hard、local-p、"
        "local-m）是什么，都给每个目标词一组在源词上的权重。各种机制的区别在于这组权重有多尖锐、"
        "多稀疏或多局部；把学到的权重读作词对齐（word alignment），就可以拿人工标注的对齐链接"
        "给它打分（对齐错误率，AER）。"
    ),
    default_size=(
        f"在 Tatoeba 中→英上训练实验室的 GRU 模型（{TATOEBA_STEPS} 次更新），每个已注册的打分函数"
        "训练一次（配 softmax），其余每个区域训练一次（配加性打分；local 的两种模式各一次）："
        "内置组件共 10 次运行，在 2 核上每次约 2 分钟，其中 4 次（additive、dot、scaled dot、"
        "hard）与前面的实验共用；然后在人工对齐的测试句对上给每个模型打分。"
    ),
    summary=summary,
)
