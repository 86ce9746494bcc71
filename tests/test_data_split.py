"""split_pairs(): sentence-sharing groups stay together; the real Tatoeba corpus splits cleanly."""

from __future__ import annotations

import random

import pytest

from seq2seq.data.corpus import read_pairs
from seq2seq.data.fetch import fetch
from seq2seq.data.split import sentence_groups, split_pairs, write_split

TATOEBA_URL = "https://www.manythings.org/anki/cmn-eng.zip"
TATOEBA_LINES = 26_388


def sentences(pairs, side: int) -> set[str]:
    return {pair[side] for pair in pairs}


def assert_no_leak(split) -> None:
    """No source or target sentence is shared between two splits."""
    named = split.by_name()
    for side in (0, 1):
        for first, second in (("valid", "train"), ("test", "train"), ("valid", "test")):
            shared = sentences(named[first], side) & sentences(named[second], side)
            assert not shared, f"{first}/{second} share side-{side} sentences {sorted(shared)[:3]}"


def test_groups_connect_pairs_through_either_side():
    pairs = [("a", "x"), ("b", "x"), ("c", "z"), ("b", "y"), ("d", "w"), ("e", "y")]
    groups = sentence_groups(pairs)
    # a-x-b (shared "x"), b-y (shared "b"), e-y (shared "y"): one chain of four pairs
    assert sorted(groups) == [[0, 1, 3, 5], [2], [4]]


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
    again = split_pairs(pairs, valid_size=1000, test_size=1000, seed=1234)
    assert (again.valid, again.test, again.train) == (split.valid, split.test, split.train)
    other = split_pairs(pairs, valid_size=1000, test_size=1000, seed=99)
    assert other.valid != split.valid and other.test != split.test
    assert_no_leak(other)
