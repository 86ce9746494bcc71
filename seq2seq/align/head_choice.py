"""Which attention reads best as an alignment: the candidates (every layer's heads and head
mean), their links from one product per pair, and the one with the lowest AER.

Heads differ in how well their attention aligns words (Garg et al. 2019 find one head of
the penultimate layer best; Voita et al. 2019 tell heads apart by role), so the layer and
head are chosen where gold links exist: the candidate with the lowest AER (Och & Ney 2003)
over the pairs, each candidate's counts summed by `seq2seq.align.model_aer.GoldAttention.
head_scores`. Every candidate uses the same extraction (`AlignSettings.extract`,
`threshold`) as `links_from_attention`; the word weights of all candidates of one pair come
from one product (`word_weights` keeps leading dimensions):

    W[l, h] = Tᵀ · α[l, h] · S,   h ∈ {0 … H−1, mean over the heads}

Ties go to the earliest candidate: the last layer's head mean first (`AlignSettings()`'s
default, which a model whose heads are all alike therefore keeps), then layer by layer,
the head mean before the heads. With one head the head mean is that head, and only it is
scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from seq2seq.align.extract import AlignSettings, Sentence, extract_links, word_weights
from seq2seq.align.pharaoh import Links
from seq2seq.align.words import piece_words, words
from seq2seq.metrics.aer import AlignmentCounts


@dataclass(frozen=True)
class HeadScore:
    """The link counts of one candidate (`settings.layer` from 0) over the gold pairs."""

    settings: AlignSettings
    counts: AlignmentCounts

    @property
    def aer(self) -> float | None:
        return self.counts.aer


def candidates(layers: int, heads: int, base: AlignSettings | None = None) -> list[AlignSettings]:
    """`base`'s extraction at the last layer's head mean, then at each layer's head mean
    and (with several heads) each head, layers from 0 (module docstring)."""
    base = base or AlignSettings()
    per_layer = [None, *range(heads)] if heads > 1 else [None]
    default = replace(base, layer=layers - 1, head=None)
    grid = [replace(base, layer=layer, head=head) for layer in range(layers) for head in per_layer]
    return [default] + [settings for settings in grid if settings != default]


def candidate_links(
    attention: torch.Tensor, source: Sentence, target: Sentence, settings: Sequence[AlignSettings]
) -> list[Links]:
    """The links of one pair under each of `settings` (layers from 0), from its attention
    (layers, heads, tgt_len, src_len) mapped to words once."""
    attention = attention.float().cpu()
    heads = attention.size(1)
    with_mean = torch.cat([attention, attention.mean(dim=1, keepdim=True)], dim=1)
    word_matrix, covered = word_weights(
        with_mean,  # (layers, heads + 1, tgt_len, src_len): the mean at index `heads`
        piece_words(source.text, source.pieces),
        piece_words(target.text, target.pieces),
        len(words(source.text)),
        len(words(target.text)),
    )  # (layers, heads + 1, target_words, source_words)
    return [
        extract_links(word_matrix[one.layer, heads if one.head is None else one.head], covered, one)
        for one in settings
    ]


def lowest_aer(scores: Sequence[HeadScore]) -> HeadScore | None:
    """The first score with the lowest AER; None when no AER is defined."""
    defined = [score for score in scores if score.aer is not None]
    return min(defined, key=lambda score: score.aer) if defined else None
