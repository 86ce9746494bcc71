"""Alignment accuracy: does attention point at the source that a target token translates?

Definition. Let α_t be the attention distribution of target position t over the source
positions (teacher-forced, last attention layer, mean over heads), and let a link be a
target position t with the set A_t of source positions that count as its correct
alignment. Over all links L of all sentences,

    alignment_accuracy = (1 / |L|) · Σ_{(t, A_t) ∈ L}  1[ argmax_s α_t(s) ∈ A_t ]

(ties go to the first source position, as `torch.argmax` does). Target positions without
a link (EOS, English articles...) are not counted.

* Toy tasks: every target symbol j (EOS excluded) has one link, to the source symbol it
  copies: A_j = {j} for copy (the diagonal), {n − 1 − j} for reverse (the anti-diagonal).
* Corpus probes: hand-labelled word links (`seq2seq.visualise.probes`). A target word is
  represented by its FIRST subword piece, the one whose prediction starts the word (later
  pieces are mostly completed from the prefix, and their attention drifts); A_t is the
  set of source pieces that overlap any linked source character.

Why teacher forcing: the reference gives every model the same target positions, so the
number compares models and training steps (greedy outputs differ and would not line up).

The metric `alignment_accuracy` (higher is better) is reported by the alignment hook
(`seq2seq.visualise.alignment_images`): on the valid split for the toy tasks, on the probes' references
for a corpus with probes. The teacher-forced attention it scores comes from
`seq2seq.align.teacher_forced`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from seq2seq.data.toy_tasks import gold_alignment
from seq2seq.metrics.base import HookMetric, validation_metric


@validation_metric("alignment_accuracy", higher_is_better=True, label="alignment accuracy")
class AlignmentAccuracy(HookMetric):
    """Share of links whose attention argmax falls in the link's source set."""

    digits = 4


@dataclass(frozen=True)
class Link:
    """Target position `target` is correctly aligned when its argmax is one of `sources`."""

    target: int
    sources: frozenset[int]


def alignment_accuracy(
    attentions: Sequence[torch.Tensor], links: Sequence[Sequence[Link]]
) -> float | None:
    """Share of links whose attention argmax falls in the link's source set (see module doc).

    attentions: one (tgt_len, src_len) matrix per sentence; links: the sentence's links.
    Returns None when there is no link at all.
    """
    if len(attentions) != len(links):
        raise ValueError(f"got {len(attentions)} attention matrices but {len(links)} link lists")
    hits = total = 0
    for sentence, (weights, sentence_links) in enumerate(zip(attentions, links, strict=True)):
        if weights.dim() != 2:
            raise ValueError(
                f"attention of sentence {sentence} must be (tgt_len, src_len), "
                f"got shape {tuple(weights.shape)}"
            )
        best = weights.argmax(dim=-1).tolist()  # (tgt_len,) source position per target row
        for link in sentence_links:
            _check_link(link, weights.shape, sentence)
            hits += best[link.target] in link.sources
            total += 1
    return hits / total if total else None


def _check_link(link: Link, shape: torch.Size, sentence: int) -> None:
    tgt_len, src_len = shape
    if not 0 <= link.target < tgt_len or not all(0 <= s < src_len for s in link.sources):
        raise ValueError(
            f"link {link} of sentence {sentence} is outside its attention matrix "
            f"({tgt_len} target × {src_len} source positions)"
        )


def toy_links(task: str, src_len: int) -> list[Link]:
    """The gold links of a toy sentence of `src_len` symbols (EOS excluded)."""
    gold = gold_alignment(task, src_len)  # source position per target position
    return [Link(target, frozenset([source])) for target, source in enumerate(gold)]
