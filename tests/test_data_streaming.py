"""Streaming preparation: the hash split equals split_pairs, memory-mapped arrays round-trip,
the lazy training split batches as the in-memory one did, sentencepiece samples a bounded
number of sentences, each data-parallel rank reads only its own batches, errors name the
file, line or key."""

from __future__ import annotations

import os
import random
import shutil
import sys
import unicodedata

import numpy as np
import pytest
import sentencepiece as spm
import torch
from helpers import synthetic_data_config as config

from seq2seq.cli import data as data_cli
from seq2seq.data import chunks as chunks_module
from seq2seq.data import encode as encode_module
from seq2seq.data.arrays import (
    ArrayExamples,
    ArrayFileError,
    RaggedIds,
    RaggedWriter,
    TextLines,
    ids_dtype,
    open_ragged,
)
from seq2seq.data.batching import ParallelData
from seq2seq.data.corpus import read_pairs
from seq2seq.data.encode import encode_pairs, encode_split, open_encoded
from seq2seq.data.fetch import MIRROR_ENV, fetch
from seq2seq.data.hashsplit import DUPLICATE, LABELS, PairHashes, assign_splits
from seq2seq.data.prepare import prepare
from seq2seq.data.settings import DataConfig
from seq2seq.data.sources.tabular import TabularSource
from seq2seq.data.split import near_duplicate_key, split_pairs
from seq2seq.data.synth import source_lines, synthetic_lines, write_synthetic
from seq2seq.data.tokenizer import SentenceSample, SubwordTokenizer, SymbolTokenizer, TextFiles
from seq2seq.training import distributed

NAMES = {label: name for name, label in LABELS.items()}


def hash_split(pairs, valid_size: int, test_size: int, seed: int):
    """The hash split's pairs per split name, in corpus order, and its assignment."""
    hashes = PairHashes()
    for src, tgt in pairs:
        hashes.add(src, tgt)
    assignment = assign_splits(hashes, valid_size=valid_size, test_size=test_size, seed=seed)
    named = {name: [] for name in LABELS}
    for pair, label in zip(pairs, assignment.labels.tolist(), strict=True):
        if label != DUPLICATE:
            named[NAMES[label]].append(pair)
    return named, assignment


def assert_same_split(pairs, valid_size: int, test_size: int, seed: int) -> None:
    reference = split_pairs(pairs, valid_size=valid_size, test_size=test_size, seed=seed)
    named, assignment = hash_split(pairs, valid_size, test_size, seed)
    assert named == reference.by_name()  # same pairs, same order
    assert assignment.duplicates_removed == reference.duplicates_removed
    assert assignment.num_groups == reference.num_groups
    assert assignment.near_duplicates_joined == reference.near_duplicates_joined


def tangled_pairs(count: int, seed: int) -> list[tuple[str, str]]:
    """Pairs over small sentence sets with near-twins (case, punctuation, spaces) and
    exact repeats, so groups, families and duplicates all occur."""
    rng = random.Random(seed)
    marks = ["", ".", "!", " ?", "。"]

    def sentence(prefix: str) -> str:
        word = f"{prefix}{rng.randrange(count)}"
        return (word.upper() if rng.random() < 0.2 else word) + rng.choice(marks)

    pairs = [(sentence("s"), sentence("t")) for _ in range(count)]
    pairs += rng.sample(pairs, count // 10)  # exact duplicates, later in the corpus
    rng.shuffle(pairs)
    return pairs


@pytest.mark.parametrize("seed", [0, 1, 7, 1234])
def test_hash_split_equals_split_pairs(seed):
    assert_same_split(tangled_pairs(800, seed), valid_size=40, test_size=30, seed=seed)


def test_hash_split_with_near_twins_only_and_errors():
    pairs = [(f"源{i}。", f"target {i}.") for i in range(30)]
    pairs += [(f"源{i}!", f"Another {i}") for i in range(30)]
    assert_same_split(pairs, valid_size=6, test_size=6, seed=3)
    hashes = PairHashes()
    for src, tgt in pairs[:10]:
        hashes.add(src, tgt)
    with pytest.raises(ValueError, match=r"data.valid_size \+ data.test_size \(10\)"):
        assign_splits(hashes, valid_size=5, test_size=5, seed=0)


def test_hash_split_equals_split_pairs_on_tatoeba(corpus_mirror, tmp_path):
    path = fetch(
        "https://www.manythings.org/anki/cmn-eng.zip", "cmn.txt", root=tmp_path,
        mirror=corpus_mirror,
    )  # fmt: skip
    pairs, _ = read_pairs(path, member="cmn.txt", src_column=1, tgt_column=0, num_columns=3)
    for seed in (1234, 99):
        assert_same_split(pairs, valid_size=1000, test_size=1000, seed=seed)


# --- memory-mapped arrays ------------------------------------------------------------------


def test_ragged_arrays_round_trip_and_select(tmp_path):
    sequences = [[5, 6, 7], [], [8], [40000, 4], [9, 9]]
    writer = RaggedWriter(tmp_path, "src", ids_dtype(50000))
    for chunk in (sequences[:2], sequences[2:]):
        flat = np.array([i for ids in chunk for i in ids], dtype=np.int64)
        writer.add(flat, np.array([len(ids) for ids in chunk], dtype=np.int64))
    assert writer.close() == 5
    ragged = open_ragged(tmp_path, "src")
    assert isinstance(ragged.ids, np.memmap) and ragged.ids.dtype == np.int32
    assert list(ragged) == sequences and ragged[-1] == [9, 9] and ragged[1:4:2] == [[], [40000, 4]]
    assert ragged.lengths().tolist() == [3, 0, 1, 2, 2]
    picked = ragged.select([3, 0]).select([1])
    assert list(picked) == [[5, 6, 7]] and picked.lengths().tolist() == [3]
    assert ids_dtype(4000) == np.int16 and ids_dtype(40000) == np.int32
    with pytest.raises(IndexError):
        ragged[5]


def test_text_lines_read_on_demand(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_bytes("你好。\nHi there.\n\nlast\n".encode())
    lines = TextLines(path)
    assert list(lines) == ["你好。", "Hi there.", "", "last"] and lines[-1] == "last"
    assert list(lines.select([3, 1])) == ["last", "Hi there."] and lines[:2] == [
        "你好。",
        "Hi there.",
    ]
    assert lines == ["你好。", "Hi there.", "", "last"]


def write_pairs(folder, pairs) -> tuple:
    paths = (folder / "split.src", folder / "split.tgt")
    for side, path in enumerate(paths):
        path.write_text("".join(pair[side] + "\n" for pair in pairs), encoding="utf-8")
    return paths


def test_encoded_split_equals_the_in_memory_encoding(tmp_path):
    tokenizer = SymbolTokenizer(6)
    pairs = [("a b c", "c b a"), ("d", "d e"), ("f a", "a"), ("b", "c d e f")]
    paths = write_pairs(tmp_path, pairs)
    cache = encode_split(paths, tokenizer, tokenizer, tmp_path, "train")
    assert cache.is_dir() and cache.name.startswith("encoded_train_")
    lazy = open_encoded(cache, lazy=True)
    eager = open_encoded(cache, lazy=False)
    reference = encode_pairs(pairs, tokenizer, tokenizer)
    assert lazy.lazy and not eager.lazy
    assert lazy.examples == reference.examples and eager.examples == reference.examples
    assert list(lazy.src_lines) == reference.src_lines == eager.src_lines
    assert lazy.src_lengths.tolist() == reference.src_lengths
    assert encode_split(paths, tokenizer, tokenizer, tmp_path, "train") == cache  # cached


def test_a_damaged_array_cache_is_encoded_again(tmp_path, caplog):
    tokenizer = SymbolTokenizer(6)
    paths = write_pairs(tmp_path, [("a b", "b a"), ("c", "c")])
    cache = encode_split(paths, tokenizer, tokenizer, tmp_path, "valid")
    ids = cache / "tgt_ids.npy"
    np.save(ids, np.load(ids)[:-1])  # one id short
    with pytest.raises(ArrayFileError, match="tgt_offsets.npy: offsets run from 0 to 3"):
        open_ragged(cache, "tgt")
    ids.write_bytes(ids.read_bytes()[:-1])  # cut short, as by a full disk
    with pytest.raises(ArrayFileError, match="tgt_ids.npy: cannot be read as a .npy array"):
        open_ragged(cache, "tgt")
    with caplog.at_level("WARNING"):
        again = encode_split(paths, tokenizer, tokenizer, tmp_path, "valid")
    assert again == cache and str(cache) in caplog.text
    assert open_encoded(cache, lazy=False).examples == [([4, 5], [5, 4]), ([6], [6])]


def test_errors_name_the_file_the_line_and_the_key(tmp_path):
    tokenizer = SymbolTokenizer(6)
    src, tgt = write_pairs(tmp_path, [("a", "b"), ("c", "d")])
    tgt.write_text("b\n", encoding="utf-8")
    with pytest.raises(ArrayFileError, match=rf"{src}.*{tgt}.*one ends at line 1"):
        encode_split((src, tgt), tokenizer, tokenizer, tmp_path, "test")
    (tmp_path / "x_ids.npy").write_bytes(b"not an array")
    with pytest.raises(ArrayFileError, match=r"x_ids.npy: cannot be read"):
        open_ragged(tmp_path, "x")
    (tmp_path / "open.txt").write_bytes(b"no line ending")
    with pytest.raises(ArrayFileError, match=r"open.txt: the last line has no line ending"):
        len(TextLines(tmp_path / "open.txt"))
    for key in ("spm_sample_size", "encode_workers"):
        with pytest.raises(ValueError, match=rf"data.{key} must be > 0, got 0"):
            DataConfig(**{key: 0})


# --- the lazy training split ----------------------------------------------------------------


def in_memory(data: ParallelData) -> ParallelData:
    return ParallelData(list(data.examples), list(data.src_lines), list(data.tgt_lines))


def assert_same_batch(first, second) -> None:
    for name, value in vars(first).items():
        other = getattr(second, name)
        assert torch.equal(value, other) if isinstance(value, torch.Tensor) else value == other


def test_lazy_training_split_batches_as_before(tmp_path, mirror, monkeypatch):
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    data = prepare(config(tmp_path, encode_workers=1))
    assert data.train.lazy and not data.valid.lazy and not data.test.lazy
    assert data.summary["dropped_by_max_len"] > 0  # so the training split is a selection
    folder = tmp_path / "data" / "prepared" / "synthetic"
    lines = [
        (folder / f"train.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("zh", "en")
    ]
    reference = encode_pairs(list(zip(*lines, strict=True)), data.src_tokenizer, data.tgt_tokenizer)
    keep = [
        index
        for index, (src, tgt) in enumerate(reference.examples)
        if len(src) <= 15 and len(tgt) <= 15
    ]
    reference = reference.select(keep)  # what prepare returned before arrays
    eager = in_memory(data.train)
    assert eager.examples == reference.examples and eager.tgt_lines == reference.tgt_lines
    assert list(data.train.src_lengths) == reference.src_lengths
    lazy_batches = data.train.sampler(200, shuffle=True, seed=3).batches(epoch=1)
    assert lazy_batches == reference.sampler(200, shuffle=True, seed=3).batches(epoch=1)
    for indices in lazy_batches[:5]:
        assert_same_batch(data.train.batch(indices), reference.batch(indices))


# --- sentencepiece on a bounded sample ------------------------------------------------------


@pytest.fixture
def spm_calls(monkeypatch):
    """The sentences each sentencepiece training is given."""
    calls = []
    original = spm.SentencePieceTrainer.train

    def recording(**kwargs):
        sentences = list(kwargs.pop("sentence_iterator"))
        calls.append(sentences)
        return original(sentence_iterator=iter(sentences), **kwargs)

    monkeypatch.setattr(spm.SentencePieceTrainer, "train", recording)
    return calls


def english_file(tmp_path, count: int = 600):
    rng = random.Random(0)
    words = "the a big small red dog cat ran sat on mat hat and ate".split()
    path = tmp_path / "train.en"
    path.write_text(
        "".join(" ".join(rng.choices(words, k=rng.randint(3, 9))) + ".\n" for _ in range(count)),
        encoding="utf-8",
    )
    return TextFiles(path)


def test_sentencepiece_trains_on_a_bounded_sample(tmp_path, spm_calls):
    texts = english_file(tmp_path)
    whole = SubwordTokenizer.train(texts, lang="en", vocab_size=30, folder=tmp_path / "w")
    fits = SubwordTokenizer.train(
        texts, lang="en", vocab_size=30, folder=tmp_path / "f", sample=SentenceSample(600, 5)
    )
    assert fits.to_bytes() == whole.to_bytes()  # a text that fits: the model of before
    assert [p.name for p in (tmp_path / "f").iterdir()] == [
        p.name for p in (tmp_path / "w").iterdir()
    ]  # and its cache name
    sampled = [
        SubwordTokenizer.train(
            texts,
            lang="en",
            vocab_size=30,
            folder=tmp_path / f"s{i}",
            sample=SentenceSample(200, 5),
        )
        for i in range(2)
    ]
    assert sampled[0].to_bytes() == sampled[1].to_bytes()  # seeded: reproducible
    whole_text = list(texts)
    assert [len(call) for call in spm_calls] == [600, 600, 200, 200]
    assert spm_calls[2] == spm_calls[3] and set(spm_calls[2]) <= set(whole_text)
    positions = [whole_text.index(sentence) for sentence in dict.fromkeys(spm_calls[2])]
    assert positions == sorted(positions)  # streamed in text order
    other_seed = SentenceSample(200, 6).rows(600)
    assert (
        other_seed is not None and other_seed.tolist() != SentenceSample(200, 5).rows(600).tolist()
    )
    assert SentenceSample(600, 5).rows(600) is None
    names = {p.name for p in (tmp_path / "s0").iterdir()}
    assert names.isdisjoint({p.name for p in (tmp_path / "w").iterdir()})  # sample in the key


# --- data parallel: each rank reads its own batches -----------------------------------------


class RecordingIds:
    """An ids array that records which offsets ranges are read."""

    def __init__(self, ids: np.ndarray) -> None:
        self.ids, self.reads = ids, []

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, key: slice) -> np.ndarray:
        self.reads.append((key.start, key.stop))
        return self.ids[key]


def test_each_rank_reads_only_its_own_batches(tmp_path):
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 12, size=300)  # (300,)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)  # (301,)
    ids = rng.integers(4, 50, size=int(offsets[-1])).astype(np.int16)
    lines = TextLines(tmp_path / "never_read.txt")  # batches read no lines
    reads, rows = [], []
    for rank in range(2):
        src = RecordingIds(ids)
        examples = ArrayExamples(RaggedIds(src, offsets), RaggedIds(ids, offsets))
        data = ParallelData.from_arrays(examples, lines, lines, 300)
        ranks = distributed.Distributed(rank=rank, world_size=2)
        mine = []
        for indices, _ in distributed.stream(data.sampler(60, True, 1).batches, 0, 0, ranks, 1):
            data.batch(indices)
            mine.extend(indices)
        starts = {int(offsets[i]) for i in mine}
        assert {start for start, _ in src.reads} == starts  # its rows, nothing else
        reads.append(src.reads)
        rows.append(set(mine))
    assert not rows[0] & rows[1]  # the ranks read disjoint rows


# --- synthetic corpora ----------------------------------------------------------------------


def test_synthetic_corpus_repeats_with_numbered_copies(tmp_path, mirror, monkeypatch):
    path = mirror / "toy-eng.zip"
    lines = source_lines(path, "toy.txt", src_column=1, tgt_column=0, num_columns=3)
    assert len(lines) == 400
    out = tmp_path / "synth.tsv"
    write_synthetic(out, lines, 1000, src_column=1, tgt_column=0)
    written = out.read_text(encoding="utf-8").splitlines()
    assert written == list(synthetic_lines(lines, 1000, 1, 0))
    assert len(written) == 1000 and written[400].split("\t")[0].endswith(" 1")
    pairs, _ = read_pairs(out, src_column=1, tgt_column=0, num_columns=3)
    distinct_per_copy = len(set(pairs[:400]))
    assert len(set(pairs)) == distinct_per_copy * 2 + len(set(pairs[800:]))


def test_near_duplicate_key_table_is_the_character_test():
    """The remembered translate table deletes exactly the punctuation marks and spaces."""

    def reference(sentence: str) -> str:
        folded = unicodedata.normalize("NFKC", sentence).casefold()
        kept = "".join(
            char
            for char in folded
            if not (unicodedata.category(char).startswith("P") or char.isspace())
        )
        return kept or sentence

    characters = [chr(code) for code in range(0, sys.maxunicode + 1, 97)]
    characters += list(" \t\u3000\u00a0!?。,、「」—…-_'\"ＡｂC")
    for start in range(0, len(characters), 40):
        sentence = "x" + "".join(characters[start : start + 40])
        assert near_duplicate_key(sentence) == reference(sentence)
        assert near_duplicate_key(sentence) == near_duplicate_key(sentence)  # remembered


# --- the preparation record -----------------------------------------------------------------


def test_a_second_prepare_opens_the_record_unless_a_file_changed(tmp_path, mirror, monkeypatch):
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    first = prepare(config(tmp_path))
    splits = []
    real_split = TabularSource.write_splits
    monkeypatch.setattr(
        TabularSource, "write_splits", lambda *args: splits.append(1) or real_split(*args)
    )
    again = prepare(config(tmp_path, max_len=12))  # a setting no file depends on
    assert splits == [] and again.summary["lines_read"] == first.summary["lines_read"]
    assert prepare(config(tmp_path)).summary == first.summary and splits == []
    folder = tmp_path / "data" / "prepared" / "synthetic"
    train_en = folder / "train.en"
    train_en.write_text(train_en.read_text(encoding="utf-8") + "edited\n", encoding="utf-8")
    assert prepare(config(tmp_path)).summary == first.summary and splits == [1]  # rewritten
    [cache] = folder.glob("encoded_train_*")  # its text, a hard link edited too, re-encoded
    assert (cache / "tgt.txt").read_bytes() == train_en.read_bytes()
    prepare(config(tmp_path, seed=5))  # another split: another record
    assert splits == [1, 1] and len(list(folder.glob("prepared_*.json"))) == 2


def test_synth_command_writes_the_corpus(tmp_path, mirror, monkeypatch, capsys):
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    preset = tmp_path / "toy.yaml"
    preset.write_text(
        "name: toy\nsource:\n  name: tabular\n  url: https://example.org/anki/toy-eng.zip\n"
        "  member: toy.txt\n  sha256: null\n",
        encoding="utf-8",
    )
    out = tmp_path / "synth.tsv"
    argv = ["seq2seq-data", "synth", "450", str(out), "--data", str(preset)]
    monkeypatch.setattr(sys, "argv", [*argv, "--root", str(tmp_path / "data")])
    data_cli.main()
    assert "wrote 450 pairs" in capsys.readouterr().out
    assert len(out.read_text(encoding="utf-8").splitlines()) == 450
    monkeypatch.setattr(sys, "argv", ["seq2seq-data", "synth", "0", str(out)])
    with pytest.raises(SystemExit):
        data_cli.main()


def test_a_damaged_recorded_cache_is_prepared_again(tmp_path, mirror, monkeypatch, caplog):
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    first = prepare(config(tmp_path))
    examples = in_memory(first.train).examples  # read before the file is damaged in place
    folder = tmp_path / "data" / "prepared" / "synthetic"
    [cache] = folder.glob("encoded_train_*")
    ids = cache / "src_ids.npy"
    ids.write_bytes(ids.read_bytes()[:-5])
    with caplog.at_level("WARNING"):
        again = prepare(config(tmp_path))
    assert "src_ids.npy" in caplog.text and again.summary == first.summary
    assert in_memory(again.train).examples == examples


def _die_in_worker(*args):
    os._exit(3)  # a worker killed (out of memory, say): the pool breaks


def test_encoding_workers_that_die_fall_back_to_this_process(tmp_path, monkeypatch, caplog):
    tokenizer = SymbolTokenizer(6)
    pairs = [("a b c", "c b a"), ("d", "d e"), ("f a", "a")] * 30
    paths = write_pairs(tmp_path, pairs)
    monkeypatch.setattr(encode_module, "PARALLEL_MIN_PAIRS", 0)
    monkeypatch.setattr(encode_module, "CHUNK_PAIRS", 16)
    cache = encode_split(paths, tokenizer, tokenizer, tmp_path, "train", workers=2)
    assert (
        open_encoded(cache, lazy=False).examples
        == encode_pairs(pairs, tokenizer, tokenizer).examples
    )
    shutil.rmtree(cache)
    monkeypatch.setattr(chunks_module, "_encode_in_worker", _die_in_worker)
    with caplog.at_level("WARNING"):
        cache = encode_split(paths, tokenizer, tokenizer, tmp_path, "train", workers=2)
    assert "worker processes failed" in caplog.text
    assert (
        open_encoded(cache, lazy=False).examples
        == encode_pairs(pairs, tokenizer, tokenizer).examples
    )
