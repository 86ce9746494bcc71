"""Symmetrised links of two directions: each method on hand-made word weights, against links
and matrices worked out by hand; the direction check of the reverse model."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from seq2seq.align.extract import AlignSettings, WordWeights
from seq2seq.align.pharaoh import Links
from seq2seq.align.symmetric import (
    DEFAULT_SYMMETRISATION,
    SYMMETRISATIONS,
    harmonic_mean,
    reverse_problem,
    symmetric_links,
)


def one_hot_rows(rows: int, columns: int, points: dict[int, int]) -> WordWeights:
    """Word weights whose row r puts 0.7 on column points[r] and 0.1 on every other
    column (argmax: that column; a row not in `points` is all 0 and links nothing)."""
    weights = torch.zeros(rows, columns)
    for row, column in points.items():
        weights[row] = 0.1
        weights[row, column] = 0.7
    return WordWeights(weights, torch.ones(rows, dtype=bool))


# 6 source × 6 target words. Forward, target j → source i: j0→0, j1→1, j2→1, j3→5, so
# F = {0-0, 1-1, 1-2, 5-3}. Reverse, source i → target j: i0→0, i1→1, i4→5, i5→4, so
# R = {0-0, 1-1, 4-5, 5-4}. By hand (seq2seq.align.statistical's order):
#   intersection {0-0, 1-1}; union F ∪ R;
#   grow-diag: 1-2 neighbours 1-1 and its target 2 is free → {0-0, 1-1, 1-2}; 5-3, 4-5 and
#     5-4 neighbour nothing aligned;
#   grow-diag-final: + 5-3 (F: both free), + 4-5 (R: both free), + 5-4 (R: target 4 free);
#   grow-diag-final-and: + 5-3 and 4-5, not 5-4 (its source 5 is aligned by 5-3).
FORWARD = one_hot_rows(6, 6, {0: 0, 1: 1, 2: 1, 3: 5})  # (target_words, source_words)
REVERSE = one_hot_rows(6, 6, {0: 0, 1: 1, 4: 5, 5: 4})  # (source_words, target_words)
GROWN = {(0, 0), (1, 1), (1, 2)}
EXPECTED = {
    "intersection": {(0, 0), (1, 1)},
    "union": {(0, 0), (1, 1), (1, 2), (5, 3), (4, 5), (5, 4)},
    "grow-diag": GROWN,
    "grow-diag-final": GROWN | {(5, 3), (4, 5), (5, 4)},
    "grow-diag-final-and": GROWN | {(5, 3), (4, 5)},
}


@pytest.mark.parametrize("method", sorted(EXPECTED))
def test_each_link_method_on_hand_made_directions(method):
    links = symmetric_links(FORWARD, REVERSE, method, AlignSettings())
    assert links == Links.of(EXPECTED[method])


def test_the_methods_and_the_default_are_the_documented_ones():
    assert set(SYMMETRISATIONS) == set(EXPECTED) | {"harmonic"}
    assert DEFAULT_SYMMETRISATION in SYMMETRISATIONS


def test_harmonic_mean_by_hand_and_zero_where_both_are_zero():
    forward = torch.tensor([[0.6, 0.4, 0.0], [0.1, 0.5, 0.4]])
    reverse = torch.tensor([[0.2, 0.8, 0.0], [0.1, 0.3, 0.0]])
    # 2ab/(a+b): 2·.6·.2/.8 = .3, 2·.4·.8/1.2 = .5333, 0/0 → 0; .1, 2·.5·.3/.8 = .375, 0
    expected = torch.tensor([[0.3, 0.32 / 0.6, 0.0], [0.1, 0.375, 0.0]])
    combined = harmonic_mean(forward, reverse)
    torch.testing.assert_close(combined, expected)
    assert not combined.isnan().any()


# Forward A (2 target × 3 source words) and reverse B (3 source × 2 target words).
# H = 2·A·Bᵀ/(A + Bᵀ) = [[.3, .5333, 0], [.1, .375, .5538]]: argmax row 0 → source 1,
# row 1 → source 2, where forward alone says source 0 and source 1.
HARMONIC_FORWARD = WordWeights(
    torch.tensor([[0.6, 0.4, 0.0], [0.1, 0.5, 0.4]]), torch.ones(2, dtype=bool)
)
HARMONIC_REVERSE = WordWeights(
    torch.tensor([[0.2, 0.1], [0.8, 0.3], [0.0, 0.9]]), torch.ones(3, dtype=bool)
)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (AlignSettings(), {(1, 0), (2, 1)}),
        (AlignSettings(extract="threshold", threshold=0.5), {(1, 0), (2, 1)}),
        (AlignSettings(extract="threshold", threshold=0.35), {(1, 0), (1, 1), (2, 1)}),
        (AlignSettings(extract="threshold", threshold=0.6), set()),
    ],
)
def test_harmonic_links_are_extracted_from_the_combined_matrix(settings, expected):
    links = symmetric_links(HARMONIC_FORWARD, HARMONIC_REVERSE, "harmonic", settings)
    assert links == Links.of(expected)


def test_harmonic_links_nothing_for_a_word_one_model_gives_no_weight():
    uncovered = WordWeights(HARMONIC_FORWARD.weights, torch.tensor([True, False]))
    assert symmetric_links(uncovered, HARMONIC_REVERSE, "harmonic", AlignSettings()) == Links.of(
        {(1, 0)}
    )
    empty = WordWeights.empty(3, 2)
    assert symmetric_links(empty, WordWeights.empty(2, 3), "harmonic", AlignSettings()) == Links()
    assert symmetric_links(HARMONIC_FORWARD, WordWeights.empty(2, 3), "union", AlignSettings()) == (
        Links.of({(0, 0), (1, 1)})
    )


def test_weights_that_do_not_fit_and_unknown_methods_are_refused():
    with pytest.raises(ValueError, match="do not fit"):
        symmetric_links(HARMONIC_FORWARD, HARMONIC_FORWARD, "union", AlignSettings())
    with pytest.raises(ValueError, match="method must be one of"):
        symmetric_links(FORWARD, REVERSE, "grow", AlignSettings())


def translator_of(src_lang: str, tgt_lang: str) -> SimpleNamespace:
    return SimpleNamespace(
        src_tokenizer=SimpleNamespace(lang=src_lang), tgt_tokenizer=SimpleNamespace(lang=tgt_lang)
    )


def test_the_reverse_model_must_translate_the_other_way():
    zh_en = translator_of("zh", "en")
    assert reverse_problem(zh_en, translator_of("en", "zh")) is None
    assert reverse_problem(zh_en, translator_of("en", "cmn")) is None  # the same language
    problem = reverse_problem(zh_en, translator_of("zh", "en"))
    assert problem == (
        "the reverse model translates zh→en; the reverse of a zh→en model must translate en→zh"
    )
    assert reverse_problem(zh_en, translator_of("en", "ja")) is not None
