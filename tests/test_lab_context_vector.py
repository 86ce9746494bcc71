"""The lab's context-vector experiment: its quick run on the toy reverse task, and its
length buckets."""

from __future__ import annotations

import math

import pytest
from helpers import is_png, lab_quick_fixture

from seq2seq.lab.context_vector import (
    EXPERIMENT,
    MECHANISMS,
    QUICK_BUCKETS,
    length_buckets,
    source_length,
)

quick = lab_quick_fixture(EXPERIMENT)



def test_every_mechanism_is_scored_in_every_length_bucket(quick):
    buckets = quick.values["buckets"]
    assert 2 <= len(buckets) <= QUICK_BUCKETS
    assert [(row["mechanism"], row["source length"]) for row in quick.table] == [
        (mechanism, bucket) for mechanism in MECHANISMS for bucket in buckets
    ]
    for row in quick.table:
        assert 0.0 <= row["band low"] <= row["bleu"] + 1e-6
        assert row["bleu"] <= row["band high"] + 1e-6 <= 100.0 + 1e-6
        assert row["seed min"] == row["seed max"] == pytest.approx(row["bleu"])  # one seed
    # the toy test split (32 sequences) is shared out over the buckets, once each
    per_mechanism = [row["sentences"] for row in quick.table if row["mechanism"] == "none"]
    assert sum(per_mechanism) == 32


def test_the_plain_model_is_the_baseline_of_the_gaps(quick):
    for row in quick.table:
        if row["mechanism"] == "none":
            assert row["gap vs none"] == 0.0 and math.isnan(row["p vs none"])
        else:
            assert 0.0 <= row["p vs none"] <= 1.0
    additive = [row for row in quick.table if row["mechanism"] == "additive"]
    assert quick.values["gap_longest_additive"] == additive[-1]["gap vs none"]
    assert quick.agrees in (True, False, None)


def test_the_figure_is_a_png(quick):
    (figure,) = quick.figures
    assert figure.name == "bleu_by_length.png" and is_png(figure)
    assert "bucket" in quick.summary and "fixed context vector" in quick.summary


def test_source_length_counts_characters_but_not_spaces():
    assert source_length("c a d") == 3
    assert source_length("我爱中国。") == 5


def test_buckets_are_whole_length_ranges_of_about_equal_size():
    lengths = [1] * 3 + [2] * 3 + [3] * 3 + [4] * 3 + [9]
    buckets = length_buckets(lengths, 4)
    assert [(b.shortest, b.longest) for b in buckets] == [(1, 1), (2, 2), (3, 3), (4, 9)]
    assert sorted(i for b in buckets for i in b.members) == list(range(len(lengths)))
    assert [b.label for b in buckets] == ["1", "2", "3", "4–9"]
    one_length = length_buckets([5] * 7, 3)
    assert len(one_length) == 1 and one_length[0].members == list(range(7))
