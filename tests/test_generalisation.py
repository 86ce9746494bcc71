"""The rare-word and rare-character slices of `tools.bench.generalisation`: words,
characters and counts from training."""

from __future__ import annotations

from collections import Counter

from tools.bench.generalisation import (
    rare_char_rows,
    rare_rows,
    without_unseen,
    word_counts,
    words,
)


def test_words_are_letter_runs_or_characters_of_an_unspaced_language():
    assert words("I can't go, Tom! 3 times.", "en") == ["i", "can", "t", "go", "tom", "times"]
    assert words("我爱中国。3", "zh") == ["我", "爱", "中", "国"]


def test_rare_rows_hold_a_word_seen_at_most_so_often_in_training():
    counts = word_counts(["the cat sat", "the dog sat", "the cat ran", "a zebra"], "en")
    references = ["The cat sat.", "A dog ran.", "The zebra sat.", "An okapi!"]
    assert rare_rows(references, counts, "en", most=1) == [1, 2, 3]  # dog, ran, zebra, unseen
    assert rare_rows(references, counts, "en", most=0) == [3]  # never seen in training


def test_rare_character_rows_and_the_sources_without_unseen_characters():
    counts = Counter("我爱中国。" * 3 + "我爱北京。")
    sources = ["我爱中国。", "我爱北京。", "我爱龘国。", "我 爱"]
    assert rare_char_rows(sources, counts, most=1) == [1, 2]  # 北, 京 once; 龘 never
    assert rare_char_rows(sources, counts, most=0) == [2]
    assert without_unseen("我爱龘国。", counts) == "我爱国。"
    assert without_unseen("我 爱", counts) == "我 爱"  # spaces are kept
