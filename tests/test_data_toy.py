"""Toy copy / reverse tasks: gold alignment, disjoint splits, prepare(data.source=toy)."""

from __future__ import annotations

import pytest

from seq2seq.data.prepare import prepare
from seq2seq.data.settings import DataConfig
from seq2seq.data.tokenizer import SymbolTokenizer
from seq2seq.data.toy_tasks import ToySpec, gold_alignment, toy_splits

SIZES = {"train": 300, "valid": 40, "test": 30}


def test_gold_alignment_by_hand():
    assert gold_alignment("copy", 4) == [0, 1, 2, 3]
    assert gold_alignment("reverse", 4) == [3, 2, 1, 0]
    assert gold_alignment("reverse", 1) == [0]
    with pytest.raises(ValueError, match="toy task"):
        gold_alignment("sort", 3)


@pytest.mark.parametrize("task", ["copy", "reverse"])
def test_targets_follow_the_gold_alignment(task):
    splits = toy_splits(ToySpec(task, 6, 2, 9), SIZES, seed=0)
    for pairs in splits.values():
        for source, target in pairs:
            src, tgt = source.split(), target.split()
            assert [src[i] for i in gold_alignment(task, len(src))] == tgt


def test_splits_have_their_sizes_lengths_and_symbols():
    splits = toy_splits(ToySpec("copy", 4, 3, 5), SIZES, seed=0)
    assert {name: len(pairs) for name, pairs in splits.items()} == SIZES
    for pairs in splits.values():
        for source, _ in pairs:
            assert 3 <= len(source.split()) <= 5
            assert set(source.split()) <= set("abcd")


def test_held_out_sequences_never_occur_in_train():
    splits = toy_splits(ToySpec("reverse", 3, 2, 6), SIZES, seed=1)
    train = {source for source, _ in splits["train"]}
    valid = [source for source, _ in splits["valid"]]
    test = [source for source, _ in splits["test"]]
    assert len(set(valid)) == len(valid) and len(set(test)) == len(test)
    assert not train & set(valid) and not train & set(test) and not set(valid) & set(test)


def test_same_seed_same_data_other_seed_other_data():
    spec = ToySpec("copy", 10, 3, 12)
    assert toy_splits(spec, SIZES, seed=4) == toy_splits(spec, SIZES, seed=4)
    assert toy_splits(spec, SIZES, seed=4)["train"] != toy_splits(spec, SIZES, seed=5)["train"]


def test_too_small_space_is_a_clear_error():
    with pytest.raises(ValueError, match="too small"):
        toy_splits(ToySpec("copy", 2, 1, 1), {"train": 5, "valid": 2, "test": 2}, seed=0)


def test_prepare_toy_encodes_symbols():
    cfg = DataConfig(
        source={"name": "toy", "task": "reverse", "vocab_size": 5, "min_len": 2, "max_len": 6,
                "train_size": 200, "valid_size": 20, "test_size": 20},
        max_tokens=64, max_len=6,
    )  # fmt: skip
    data = prepare(cfg)
    assert isinstance(data.src_tokenizer, SymbolTokenizer)
    assert (len(data.train), len(data.valid), len(data.test)) == (200, 20, 20)
    src_ids, tgt_ids = data.valid[0]
    assert data.src_tokenizer.decode(src_ids) == data.valid.src_lines[0]
    assert tgt_ids == src_ids[::-1]
    assert data.summary["src_vocab_size"] == 9 and data.summary["train_size"] == 200
    assert data.folder is None
