"""prepare(): the whole pipeline on a small synthetic corpus served from a mirror folder."""

from __future__ import annotations

import logging

import pytest
import sentencepiece as spm
from helpers import synthetic_data_config as config

from seq2seq.data.corpus import CorpusError
from seq2seq.data.fetch import MIRROR_ENV
from seq2seq.data.prepare import prepare
from seq2seq.data.tokenizer import VocabularySizeError


@pytest.fixture
def trainings(monkeypatch):
    calls = []
    original = spm.SentencePieceTrainer.train
    monkeypatch.setattr(
        spm.SentencePieceTrainer, "train", lambda **kw: calls.append(1) or original(**kw)
    )
    return calls


def test_prepare_end_to_end_and_cached(tmp_path, mirror, monkeypatch, trainings):
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    cfg = config(tmp_path)
    data = prepare(cfg)
    folder = tmp_path / "data" / "prepared" / "synthetic"
    assert data.folder == folder
    summary = data.summary
    assert summary["lines_read"] == 400 and summary["malformed_skipped"] == 0
    assert (summary["valid_size"], summary["test_size"]) == (20, 20)
    assert summary["src_vocab_size"] == summary["tgt_vocab_size"] == 30
    kept = 400 - summary["duplicates_removed"] - 40
    assert summary["train_size"] + summary["dropped_by_max_len"] == kept
    assert summary["dropped_by_max_len"] >= 30  # the long pairs, one in ten
    assert all(len(s) <= 15 and len(t) <= 15 for s, t in data.train.examples)
    assert (folder / "valid.zh").read_text(encoding="utf-8").splitlines() == data.valid.src_lines
    assert (folder / "valid.en").read_text(encoding="utf-8").splitlines() == data.valid.tgt_lines
    assert data.tgt_tokenizer.decode(data.valid[0][1]) == data.valid.tgt_lines[0]
    assert len(trainings) == 2

    encoded = sorted(folder.glob("encoded_*"))
    assert [path.name.split("_")[1] for path in encoded] == ["test", "train", "valid"]
    mtimes = [(path / "meta.json").stat().st_mtime_ns for path in encoded]
    again = prepare(cfg)
    assert len(trainings) == 2  # subword models reused
    assert sorted(folder.glob("encoded_*")) == encoded
    assert [(path / "meta.json").stat().st_mtime_ns for path in encoded] == mtimes
    assert again.train.examples == data.train.examples
    assert again.valid.tgt_lines == data.valid.tgt_lines
    assert again.summary == summary


def test_changed_vocabulary_retrains_only_that_side(tmp_path, mirror, monkeypatch, trainings):
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    prepare(config(tmp_path))
    data = prepare(config(tmp_path, tgt_vocab_size=32))
    assert len(trainings) == 3
    assert data.tgt_tokenizer.vocab_size == 32


def test_joint_vocabulary_is_one_model(tmp_path, mirror, monkeypatch):
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    data = prepare(config(tmp_path, joint_vocab=True, src_vocab_size=50))
    assert data.src_tokenizer is data.tgt_tokenizer
    assert data.src_tokenizer.lang == "zh-en" and data.src_tokenizer.vocab_size == 50


def test_prepare_accepts_a_plain_mapping(tmp_path, mirror, monkeypatch):
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    values = vars(config(tmp_path))
    assert prepare(values).summary["valid_size"] == 20


def test_a_too_large_vocabulary_stops_with_the_largest_size(tmp_path, mirror, monkeypatch):
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    with pytest.raises(VocabularySizeError, match=r"data.tgt_vocab_size=4000 is too large.*"):
        prepare(config(tmp_path, tgt_vocab_size=4000))


def test_vocab_cap_uses_the_largest_size_with_a_warning_and_the_cache(
    tmp_path, mirror, monkeypatch, trainings, caplog
):
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    cfg = config(tmp_path, tgt_vocab_size=4000, vocab_cap=True)
    summaries = []
    for _ in range(2):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="seq2seq.data.prepare"):
            summaries.append(prepare(cfg).summary)
        used = summaries[-1]["tgt_vocab_size"]
        (warning,) = [r.getMessage() for r in caplog.records if "vocab_cap" in r.getMessage()]
        assert warning.startswith("data.vocab_cap=true: data.tgt_vocab_size=4000 is more")
        assert f"using {used} pieces" in warning
    assert 30 < used < 4000 and summaries[0] == summaries[1]
    assert summaries[0]["src_vocab_size"] == 30  # the side that fits is not touched
    assert len(trainings) == 3  # src, tgt refused at 4000, tgt at the largest; then cached


def test_too_few_pairs_for_valid_and_test_is_a_corpus_error(tmp_path, mirror, monkeypatch):
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    with pytest.raises(CorpusError, match="data.valid_size \\+ data.test_size"):
        prepare(config(tmp_path, valid_size=200, test_size=200))
