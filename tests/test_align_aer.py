"""Precision, recall and AER (Och & Ney 2003) against hand-computed cases and the formula."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seq2seq.align.pharaoh import Links
from seq2seq.metrics.aer import AlignmentCounts, corpus_counts, pair_counts


def gold(sure: set, possible_only: set = frozenset()) -> Links:
    return Links(sure=frozenset(sure), possible=frozenset(possible_only))


def test_a_perfect_alignment_has_no_error():
    # S = {0-0, 1-1}, P = S ∪ {1-2}; A = S: |A|=2, |A∩S|=2, |A∩P|=2.
    counts = corpus_counts([Links.of({(0, 0), (1, 1)})], [gold({(0, 0), (1, 1)}, {(1, 2)})])
    assert counts.precision == 1.0  # 2/2
    assert counts.recall == 1.0  # 2/2
    assert counts.aer == 0.0  # 1 − (2 + 2)/(2 + 2)


def test_an_empty_alignment_has_undefined_precision_and_error_one():
    # A = ∅, S = {0-0, 1-1}: precision 0/0, recall 0/2, AER 1 − 0/(0 + 2).
    counts = corpus_counts([Links()], [gold({(0, 0), (1, 1)}, {(2, 2)})])
    assert counts.precision is None
    assert counts.recall == 0.0
    assert counts.aer == 1.0


def test_possible_links_count_for_precision_but_not_for_recall():
    # S = {0-0, 1-1}, P = S ∪ {2-1, 1-2}; A = {0-0, 2-1, 2-2}.
    # |A| = 3, |S| = 2, |A∩S| = 1 (0-0), |A∩P| = 2 (0-0, 2-1).
    counts = corpus_counts(
        [Links.of({(0, 0), (2, 1), (2, 2)})], [gold({(0, 0), (1, 1)}, {(2, 1), (1, 2)})]
    )
    assert counts.precision == pytest.approx(2 / 3)
    assert counts.recall == pytest.approx(1 / 2)
    assert counts.aer == pytest.approx(1 - (1 + 2) / (3 + 2))  # 0.4
    assert counts == AlignmentCounts(
        1, proposed=3, sure=2, possible=4, sure_hits=1, possible_hits=2
    )


def test_the_corpus_is_micro_averaged():
    # Pair 1: A = {0-0}, S = {0-0}: its AER is 0.
    # Pair 2: A = {0-0, 0-1, 1-0}, S = {1-1}, P = {1-1, 0-1}: its AER is 1 − 1/4 = 0.75.
    # Summed: |A| = 4, |S| = 2, |A∩S| = 1, |A∩P| = 2 → AER 1 − 3/6 = 0.5 (the mean would be 0.375).
    proposed = [Links.of({(0, 0)}), Links.of({(0, 0), (0, 1), (1, 0)})]
    reference = [gold({(0, 0)}), gold({(1, 1)}, {(0, 1)})]
    counts = corpus_counts(proposed, reference)
    assert counts.sentences == 2
    assert counts.precision == pytest.approx(2 / 4)
    assert counts.recall == pytest.approx(1 / 2)
    assert counts.aer == pytest.approx(0.5)
    assert pair_counts(proposed[1], reference[1]).aer == pytest.approx(0.75)


def test_a_proposed_link_marked_possible_still_counts_as_proposed():
    counts = pair_counts(Links(possible=frozenset({(0, 0)})), gold({(0, 0)}))
    assert counts.proposed == 1 and counts.aer == 0.0


def test_nothing_to_find_and_nothing_proposed_is_undefined():
    counts = corpus_counts([Links()], [gold(set(), {(0, 0)})])
    assert counts.precision is None and counts.recall is None and counts.aer is None
    assert corpus_counts([], []).aer is None


def test_scores_hold_the_ratios_and_the_counts():
    scores = corpus_counts([Links.of({(0, 0)})], [gold({(0, 0), (1, 1)})]).scores()
    assert scores == {
        "precision": 1.0,
        "recall": 0.5,
        "aer": pytest.approx(1 - 2 / 3),
        "sentences": 1,
        "proposed": 1,
        "sure": 2,
        "possible": 2,
        "sure_hits": 1,
        "possible_hits": 1,
    }


def test_corpora_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="2 proposed alignments but 1 gold"):
        corpus_counts([Links(), Links()], [Links()])


LINKS = st.sets(st.tuples(st.integers(0, 4), st.integers(0, 4)), max_size=12)
PAIR = st.tuples(LINKS, LINKS, LINKS)  # proposed, sure, possible only


@given(st.lists(PAIR, min_size=1, max_size=5))
def test_the_scores_follow_the_formula(pairs):
    proposed = [Links.of(a) for a, _, _ in pairs]
    reference = [gold(s, p) for _, s, p in pairs]
    counts = corpus_counts(proposed, reference)
    a_size = sum(len(a) for a, _, _ in pairs)
    s_size = sum(len(s) for _, s, _ in pairs)
    a_s = sum(len(a & s) for a, s, _ in pairs)
    a_p = sum(len(a & (s | p)) for a, s, p in pairs)
    if a_size:
        assert counts.precision == pytest.approx(a_p / a_size)
    if s_size:
        assert counts.recall == pytest.approx(a_s / s_size)
    if a_size + s_size:
        assert counts.aer == pytest.approx(1 - (a_s + a_p) / (a_size + s_size))
        assert 0.0 <= counts.aer <= 1.0


@given(st.lists(st.tuples(LINKS, LINKS), min_size=1, max_size=5))
def test_with_only_sure_links_aer_is_one_minus_f1(pairs):
    """With S = P, AER = 1 − F1 of precision and recall (Och & Ney 2003)."""
    counts = corpus_counts([Links.of(a) for a, _ in pairs], [gold(s) for _, s in pairs])
    precision, recall = counts.precision, counts.recall
    if precision and recall:
        f1 = 2 * precision * recall / (precision + recall)
        assert counts.aer == pytest.approx(1 - f1)
