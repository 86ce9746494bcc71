"""Precision, recall and alignment error rate of word links; AER as a validation metric.

Och & Ney 2003, "A Systematic Comparison of Various Statistical Alignment Models",
Computational Linguistics 29(1). With A the proposed links, S the sure and P the
possible gold links (S ⊆ P):

    precision = |A ∩ P| / |A|
    recall    = |A ∩ S| / |S|
    AER       = 1 − (|A ∩ S| + |A ∩ P|) / (|A| + |S|)

A proposed link is right when it is possible; a sure link is found when it is proposed.
Every count is summed over the corpus before dividing (micro-averaged, as AER is always
reported), so long sentences weigh more than short ones. A ratio whose denominator is 0
(no link proposed, no sure gold link) is undefined: None.

A sentence's links are anything with `sure` and `possible` sets of (source word, target
word) pairs, S ⊆ P: `seq2seq.align.pharaoh.Links` (a proposed alignment has only sure
links, all of them also possible). A model's links and counts on a gold set come from
`seq2seq.align.model_aer`; the metric `aer` (lower is better) is reported by the AER hook on
the valid part of a hand-aligned gold set (`seq2seq.align.aer_hook`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

from seq2seq.metrics.base import HookMetric, validation_metric


class Links(Protocol):
    """The links of one sentence pair (`seq2seq.align.pharaoh.Links`)."""

    sure: frozenset[tuple[int, int]]
    possible: frozenset[tuple[int, int]]


@validation_metric("aer", higher_is_better=False, label="AER")
class Aer(HookMetric):
    """AER of the teacher-forced attention (last layer, head mean, argmax links) on the
    gold set's valid part; reported by the AER hook."""

    digits = 4


@dataclass(frozen=True)
class AlignmentCounts:
    """The link counts AER is made of, for one sentence pair or summed over a corpus."""

    sentences: int = 0
    proposed: int = 0  # |A|
    sure: int = 0  # |S|
    possible: int = 0  # |P|
    sure_hits: int = 0  # |A ∩ S|
    possible_hits: int = 0  # |A ∩ P|

    def __add__(self, other: AlignmentCounts) -> AlignmentCounts:
        pairs = zip(asdict(self).values(), asdict(other).values())
        return AlignmentCounts(*(mine + theirs for mine, theirs in pairs))

    @property
    def precision(self) -> float | None:
        """|A ∩ P| / |A|."""
        return _ratio(self.possible_hits, self.proposed)

    @property
    def recall(self) -> float | None:
        """|A ∩ S| / |S|."""
        return _ratio(self.sure_hits, self.sure)

    @property
    def aer(self) -> float | None:
        """1 − (|A ∩ S| + |A ∩ P|) / (|A| + |S|)   (Och & Ney 2003)."""
        agreement = _ratio(self.sure_hits + self.possible_hits, self.proposed + self.sure)
        return None if agreement is None else 1.0 - agreement

    def scores(self) -> dict[str, float | int | None]:
        """precision, recall and AER with the counts behind them (for JSON)."""
        return {"precision": self.precision, "recall": self.recall, "aer": self.aer, **asdict(self)}


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def pair_counts(proposed: Links, gold: Links) -> AlignmentCounts:
    """The counts of one sentence pair; every link of `proposed` counts as proposed."""
    links = proposed.possible
    return AlignmentCounts(
        sentences=1,
        proposed=len(links),
        sure=len(gold.sure),
        possible=len(gold.possible),
        sure_hits=len(links & gold.sure),
        possible_hits=len(links & gold.possible),
    )


def corpus_counts(proposed: Sequence[Links], gold: Sequence[Links]) -> AlignmentCounts:
    """The counts summed over aligned corpora; ValueError when their lengths differ."""
    if len(proposed) != len(gold):
        raise ValueError(
            f"{len(proposed)} proposed alignments but {len(gold)} gold ones: one per pair each"
        )
    total = AlignmentCounts()
    for mine, reference in zip(proposed, gold):
        total = total + pair_counts(mine, reference)
    return total
