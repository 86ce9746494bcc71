"""The rare-word and rare-character slices of `tools.bench.generalisation`: words,
characters and counts from training."""

from __future__ import annotations

from collections import Counter

from tools.bench.generalisation import (
    rare_char_rows,
    rare_rows,
    unseen_characters,
    with_unseen_character,
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


def test_the_put_in_characters_are_in_no_split_and_each_line_gets_one_before_its_end():
    counts = Counter("一丁七万")  # U+4E00, U+4E01, U+4E03, U+4E07 seen in training
    unseen = unseen_characters(counts, ["丂上"], how_many=3)  # U+4E02, U+4E0A in a split
    assert unseen == ["\u4e04", "\u4e05", "\u4e06"]
    lines = ["我爱中国。", "好", ""]
    first = with_unseen_character(lines, unseen, seed=7)
    assert first == with_unseen_character(lines, unseen, seed=7)  # seeded
    for line, changed in zip(lines, first, strict=True):
        assert len(changed) == len(line) + 1
        assert without_unseen(changed, Counter(line)) == line  # exactly one character put in
        assert changed.endswith(line[-1:])  # a closing stop stays last
