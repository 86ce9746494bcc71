"""split_pairs(): sentence-sharing groups stay together; the real Tatoeba corpus splits cleanly."""

from __future__ import annotations

import random
import re
import unicodedata

import pytest

from seq2seq.data.corpus import read_pairs
from seq2seq.data.fetch import fetch
from seq2seq.data.split import (
    near_duplicate_families,
    near_duplicate_key,
    sentence_groups,
    split_pairs,
    write_split,
)

TATOEBA_URL = "https://www.manythings.org/anki/cmn-eng.zip"
TATOEBA_LINES = 26_388


def sentences(pairs, side: int) -> set[str]:
    return {pair[side] for pair in pairs}


def assert_no_leak(split) -> None:
    """No source or target sentence is shared between two splits, not even as near-twins
    (same letters; punctuation, case and spaces differ), by a normalisation written here."""

    def normalised(sentence: str) -> str:
        letters = re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", sentence).lower())
        return letters or sentence

    named = split.by_name()
    for side in (0, 1):
        for first, second in (("valid", "train"), ("test", "train"), ("valid", "test")):
            shared = sentences(named[first], side) & sentences(named[second], side)
            assert not shared, f"{first}/{second} share side-{side} sentences {sorted(shared)[:3]}"
            near = {normalised(s) for s in sentences(named[first], side)} & {
                normalised(s) for s in sentences(named[second], side)
            }
            assert not near, f"{first}/{second} share side-{side} near-twins {sorted(near)[:3]}"


def test_groups_connect_pairs_through_either_side():
    pairs = [("a", "x"), ("b", "x"), ("c", "z"), ("b", "y"), ("d", "w"), ("e", "y")]
    groups = sentence_groups(pairs)
    # a-x-b (shared "x"), b-y (shared "b"), e-y (shared "y"): one chain of four pairs
    assert sorted(groups) == [[0, 1, 3, 5], [2], [4]]


def test_near_duplicate_key_ignores_punctuation_case_and_spaces_only():
    assert near_duplicate_key("真糟糕。") == near_duplicate_key("真糟糕!") == "真糟糕"
    assert near_duplicate_key("對不起打擾你了。") == near_duplicate_key("對不起,打擾你了。")
    assert near_duplicate_key("Hi, Tom!") == near_duplicate_key("hi tom") == "hitom"
    assert near_duplicate_key("Ｈｉ！") == "hi"  # full-width forms fold (NFKC)
    assert near_duplicate_key("I'm here.") != near_duplicate_key("I am here.")
    assert near_duplicate_key("...") == "..."  # nothing but punctuation: kept as it is


def test_near_twins_join_their_groups_and_other_groups_keep_their_place():
    pairs = [("真糟糕。", "Too bad."), ("a", "x"), ("真糟糕!", "That's awful."), ("b", "Y!")]
    pairs += [("c", "y"), ("d", "z")]
    groups = [[3], [1], [0], [5], [2], [4]]  # as shuffled; every pair its own exact group
    families = near_duplicate_families(pairs, groups)
    # 真糟糕 joins pairs 0 and 2 where [0] stood; "Y!" ~ "y" joins 3 and 4 where [3] stood
    assert families == [[3, 4], [1], [0, 2], [5]]


def test_a_near_twin_of_a_test_sentence_never_lands_in_train():
    pairs = [(f"源{i}。", f"target {i}.") for i in range(30)]
    pairs += [(f"源{i}!", f"Another {i}") for i in range(30)]  # each source has a near-twin
    split = split_pairs(pairs, valid_size=6, test_size=6, seed=3)
    assert split.near_duplicates_joined == 30 and split.num_groups == 30
    assert (len(split.valid), len(split.test)) == (6, 6)
    assert_no_leak(split)


def random_pairs(count: int, vocabulary: int, seed: int) -> list[tuple[str, str]]:
    """Pairs over small sentence sets, so that many pairs share a side (and a few repeat)."""
    rng = random.Random(seed)
    return [
        (f"s{rng.randrange(vocabulary)}", f"t{rng.randrange(vocabulary)}") for _ in range(count)
    ]


def test_split_sizes_are_exact_and_nothing_leaks():
    pairs = random_pairs(600, vocabulary=900, seed=3)
    split = split_pairs(pairs, valid_size=40, test_size=30, seed=7)
    assert (len(split.valid), len(split.test)) == (40, 30)
    assert split.duplicates_removed == len(pairs) - len(set(pairs))
    assert len(split.train) + 70 == len(set(pairs))
    assert sorted(split.train + split.valid + split.test) == sorted(set(pairs))
    assert_no_leak(split)


def test_too_small_corpus_is_rejected():
    with pytest.raises(ValueError, match="data.valid_size \\+ data.test_size"):
        split_pairs(random_pairs(10, 1000, 0), valid_size=5, test_size=5, seed=0)


def test_write_split_gives_parallel_files(tmp_path):
    pairs = [(f"源{i}", f"target {i}") for i in range(20)]
    split = split_pairs(pairs, valid_size=3, test_size=2, seed=0)
    write_split(split, tmp_path, "zh", "en")
    for name, expected in split.by_name().items():
        sources = (tmp_path / f"{name}.zh").read_text(encoding="utf-8").splitlines()
        targets = (tmp_path / f"{name}.en").read_text(encoding="utf-8").splitlines()
        assert list(zip(sources, targets, strict=True)) == expected


@pytest.fixture(scope="module")
def tatoeba_pairs(corpus_mirror, tmp_path_factory):
    """The real corpus, read once for this module: (pairs, stats)."""
    root = tmp_path_factory.mktemp("data")
    path = fetch(TATOEBA_URL, "cmn.txt", root=root, mirror=corpus_mirror)
    return read_pairs(path, member="cmn.txt", src_column=1, tgt_column=0, num_columns=3)


def test_tatoeba_every_line_is_read(tatoeba_pairs):
    pairs, stats = tatoeba_pairs
    assert stats.lines_read == TATOEBA_LINES
    assert stats.malformed == 0
    assert len(pairs) == TATOEBA_LINES


def test_tatoeba_split_is_leak_free_and_reproducible(tatoeba_pairs):
    pairs, _ = tatoeba_pairs
    split = split_pairs(pairs, valid_size=1000, test_size=1000, seed=1234)
    assert (len(split.valid), len(split.test)) == (1000, 1000)
    assert_no_leak(split)
    assert split.near_duplicates_joined == 20  # e.g. 真糟糕。 (was in test) and 真糟糕! (train)
    again = split_pairs(pairs, valid_size=1000, test_size=1000, seed=1234)
    assert (again.valid, again.test, again.train) == (split.valid, split.test, split.train)
    other = split_pairs(pairs, valid_size=1000, test_size=1000, seed=99)
    assert other.valid != split.valid and other.test != split.test
    assert_no_leak(other)
