"""Pseudo-documents (data.documents): the same seed writes the same documents and another
groups otherwise; every pair used once, in its own split only (no test sentence in a
training document), in order when consecutive, k within its range; the separator one piece
on both sides; the settings checked by key; the record keys of configs without documents
unchanged."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from seq2seq.config.data_presets import data_preset
from seq2seq.data.corpus import CorpusError
from seq2seq.data.documents import (
    build_documents,
    join_sentences,
    separator,
    separator_id,
    split_document,
)
from seq2seq.data.prepare import prepare
from seq2seq.data.record import record_key
from seq2seq.data.settings import DataConfig
from seq2seq.special_tokens import SEP_PIECE, UNK_ID

SIZES = {"train": 157, "valid": 23, "test": 19}
WORDS = {"cat": "猫", "dog": "狗", "sees": "看见", "big": "大", "red": "红", "bird": "鸟",
         "eats": "吃", "fish": "鱼", "small": "小", "runs": "跑"}  # fmt: skip
DIGITS = "零一二三四五六七八九"
# The keys the release before data.documents computed for the installed corpus presets (a
# corpus sha256 of 64 zeros; tests/test_data_sources.py pins the same): data.documents=null
# must find the same prepared folders.
EARLIER_KEYS = {"tatoeba_zh_en": "371b4f67c534582a", "tatoeba_en_zh": "1fb351163e9d8049"}


def numbered_pair(number: int) -> tuple[str, str]:
    """A pair no other number gives: words picked by the number's digits, then the number."""
    words = list(WORDS)
    chosen = [words[int(digit)] for digit in f"{number:03d}"]
    english = f"The {' '.join(chosen)} {number}."
    chinese = "".join(WORDS[word] for word in chosen) + "".join(DIGITS[int(d)] for d in str(number))
    return english, chinese + "。"


@pytest.fixture
def corpus(tmp_path) -> dict[str, list[tuple[str, str]]]:
    """Train / valid / test file pairs of SIZES distinct pairs under tmp_path/corpus."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    pairs, start = {}, 0
    for split, count in SIZES.items():
        pairs[split] = [numbered_pair(number) for number in range(start, start + count)]
        start += count
        for side, lang in enumerate(("en", "zh")):
            text = "".join(pair[side] + "\n" for pair in pairs[split])
            (folder / f"{split}.{lang}").write_text(text, encoding="utf-8")
    return pairs


def documents_config(tmp_path: Path, **overrides) -> DataConfig:
    """A text_pair config of the corpus fixture, English -> Chinese, with documents."""
    corpus = tmp_path / "corpus"
    settings = {
        "name": "given_docs", "src_lang": "en", "tgt_lang": "zh",
        "source": {"name": "text_pair", **{f"{split}_prefix": str(corpus / split) for split in SIZES}},
        "documents": {"min_sentences": 2, "max_sentences": 5},
        "root": str(tmp_path / "data"), "src_vocab_size": 48, "tgt_vocab_size": 40,
        "max_len": 400, "max_tokens": 4000,
    }  # fmt: skip
    return DataConfig(**{**settings, **overrides})


def built(tmp_path: Path, folder_name: str, cfg: DataConfig) -> Path:
    """The corpus's split files copied to tmp_path/<folder_name> and made into documents."""
    folder = tmp_path / folder_name
    shutil.copytree(tmp_path / "corpus", folder)
    build_documents(cfg, folder)
    return folder


def documents_of(folder: Path, split: str) -> list[list[tuple[str, str]]]:
    """Each document of a split as its (English, Chinese) pairs."""
    sides = [(folder / f"{split}.{lang}").read_text("utf-8").splitlines() for lang in ("en", "zh")]
    assert len(sides[0]) == len(sides[1])
    documents = []
    for english, chinese in zip(*sides, strict=True):
        src, tgt = split_document(english), split_document(chinese)
        assert len(src) == len(tgt), (english, chinese)
        documents.append(list(zip(src, tgt, strict=True)))
    return documents


def split_bytes(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


@pytest.mark.parametrize("order", ["consecutive", "random"])
def test_the_same_seed_writes_the_same_documents_and_another_seed_groups_otherwise(
    tmp_path, corpus, order
):
    cfg = documents_config(tmp_path, documents={"max_sentences": 6, "order": order})
    first, again = built(tmp_path, "first", cfg), built(tmp_path, "again", cfg)
    assert split_bytes(first) == split_bytes(again)
    other = built(tmp_path, "other", documents_config(
        tmp_path, seed=cfg.seed + 1, documents={"max_sentences": 6, "order": order}
    ))  # fmt: skip
    for split in SIZES:
        sizes = [len(document) for document in documents_of(first, split)]
        other_sizes = [len(document) for document in documents_of(other, split)]
        assert sizes != other_sizes  # the k drawn (and, random, the pairs) differ


def test_consecutive_documents_hold_every_pair_once_in_file_order_k_in_range(tmp_path, corpus):
    cfg = documents_config(tmp_path)  # k in [2, 5], consecutive
    folder = built(tmp_path, "docs", cfg)
    for split, pairs in corpus.items():
        documents = documents_of(folder, split)
        assert [pair for document in documents for pair in document] == pairs
        sizes = [len(document) for document in documents]
        assert all(2 <= size <= 5 for size in sizes[:-1]) and 1 <= sizes[-1] <= 5
        assert len(set(sizes[:-1])) > 1  # drawn, not one fixed k
    assert len(documents_of(folder, "train")) < SIZES["train"] / 2


def test_random_documents_hold_the_pairs_of_their_own_split_once_each(tmp_path, corpus):
    folder = built(tmp_path, "docs", documents_config(tmp_path, documents={"order": "random"}))
    for split, pairs in corpus.items():
        used = [pair for document in documents_of(folder, split) for pair in document]
        assert Counter(used) == Counter(pairs)  # each pair once, its two sides together
        assert used != pairs  # shuffled
        sizes = [len(document) for document in documents_of(folder, split)]
        assert all(1 <= size <= 6 for size in sizes)


@pytest.fixture
def prepared(tmp_path, corpus):
    """The corpus prepared through the whole pipeline as shuffled documents."""
    return prepare(documents_config(tmp_path, documents={"order": "random", "max_sentences": 4}))


def test_no_sentence_of_a_test_document_is_in_a_training_document(prepared, corpus):
    folder = prepared.folder
    train = {sentence for doc in documents_of(folder, "train") for pair in doc for sentence in pair}
    for split in ("valid", "test"):
        held_out = {s for doc in documents_of(folder, split) for pair in doc for s in pair}
        assert held_out == {sentence for pair in corpus[split] for sentence in pair}
        assert not held_out & train
    summary = prepared.summary
    assert summary["test_size"] == summary["test_documents"] == len(documents_of(folder, "test"))
    assert summary["max_sentences_per_document"] <= 4 and summary["document_order"] == "random"


@pytest.mark.parametrize("joint", [False, True])
def test_the_separator_is_one_piece_on_each_side_and_the_sentences_come_back(
    tmp_path, corpus, joint
):
    joint_settings = {"joint_vocab": True, "src_vocab_size": 70} if joint else {}
    prepared = prepare(documents_config(tmp_path, **joint_settings))
    folder = prepared.folder
    tokenizers = {"en": prepared.src_tokenizer, "zh": prepared.tgt_tokenizer}
    assert separator(["en"]) == SEP_PIECE + " " and separator(["zh"]) == SEP_PIECE
    assert separator(["en", "zh"]) == SEP_PIECE + " "  # a joint model adds the "▁" prefix
    langs = {"en": ["en", "zh"], "zh": ["en", "zh"]} if joint else {"en": ["en"], "zh": ["zh"]}
    for lang, tokenizer in tokenizers.items():
        sep_id = separator_id(tokenizer)
        assert sep_id is not None and sep_id != UNK_ID
        assert tokenizer.id_to_piece(sep_id) == SEP_PIECE
        for line in (folder / f"test.{lang}").read_text("utf-8").splitlines():
            sentences = split_document(line)
            assert join_sentences(sentences, langs[lang]) == line
            pieces = []
            for sentence in sentences:  # each sentence cut as it is alone, one <sep> between
                pieces += ([SEP_PIECE] if pieces else []) + tokenizer.pieces(sentence)
            assert tokenizer.pieces(line) == pieces
            ids = tokenizer.encode(line)
            assert ids.count(sep_id) == len(sentences) - 1
            assert split_document(tokenizer.decode(ids)) == sentences
    encoded_test = prepared.test.examples
    sep_src = separator_id(prepared.src_tokenizer)
    assert any(sep_src in src for src, _ in encoded_test)


def test_a_tokenizer_without_documents_has_no_separator(tmp_path, corpus):
    plain = prepare(documents_config(tmp_path, documents=None, name="given"))
    assert separator_id(plain.src_tokenizer) is None
    assert split_document("One.") == ["One."] and split_document("A.<sep> B.") == ["A.", "B."]


def test_a_corpus_sentence_holding_the_separator_is_refused_naming_its_line(tmp_path, corpus):
    path = tmp_path / "corpus" / "valid.en"
    lines = path.read_text("utf-8").splitlines()
    lines[6] = f"Two {SEP_PIECE} halves."
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"valid\.en: line 7 holds '<sep>'.*data\.documents"):
        built(tmp_path, "docs", documents_config(tmp_path))


@pytest.mark.parametrize(
    ("documents", "message"),
    [
        ({"min_sentences": 0}, r"data\.documents\.min_sentences must be an integer of at least 1"),
        ({"max_sentences": 2.5}, r"data\.documents\.max_sentences must be an integer"),
        ({"min_sentences": 4, "max_sentences": 3},
         r"data\.documents\.max_sentences \(3\) must be >= data\.documents\.min_sentences \(4\)"),
        ({"order": "shuffled"}, r"data\.documents\.order must be one of consecutive, random"),
        ({"max_sentence": 3}, r"data\.documents\.max_sentence: .*did you mean max_sentences"),
        ("yes", r"data\.documents must be null or a node"),
    ],
)  # fmt: skip
def test_a_wrong_documents_setting_names_its_key(documents, message):
    with pytest.raises(ValueError, match=message):
        DataConfig(documents=documents)


def test_documents_are_refused_for_a_source_without_sentences():
    with pytest.raises(ValueError, match=r"data\.documents needs a corpus source.*toy"):
        DataConfig(source={"name": "toy"}, documents={})


def test_without_documents_the_record_keys_are_those_of_before():
    for name, key in EARLIER_KEYS.items():
        values = data_preset(name)
        assert values["documents"] is None
        assert record_key(DataConfig.from_mapping(values), "0" * 64) == key
    with_documents = data_preset("tatoeba_zh_en_docs")
    assert with_documents["name"] != "tatoeba_zh_en" and with_documents["documents"] is not None
    docs = DataConfig.from_mapping(with_documents)
    off = DataConfig.from_mapping({**with_documents, "documents": None})
    assert record_key(off, "0" * 64) == EARLIER_KEYS["tatoeba_zh_en"]  # name, max_len: not keyed
    assert record_key(docs, "0" * 64) != record_key(off, "0" * 64)
    in_order = DataConfig.from_mapping({**with_documents, "documents": {"order": "consecutive"}})
    assert with_documents["documents"]["order"] == "random"  # the preset's: no near-duplicates
    assert record_key(in_order, "0" * 64) != record_key(docs, "0" * 64)


def test_a_runs_stored_config_names_every_option_of_its_documents():
    """`complete_option_nodes` (start-up) writes the whole node, so a checkpoint keeps the
    grouping it was trained on even if a default changes; a bad value names its key."""
    from helpers import compose_config

    from seq2seq.config.build import ConfigError
    from seq2seq.config.value_checks import complete_option_nodes

    cfg = compose_config(["data=text_pair", "data.documents={max_sentences:4}"])
    complete_option_nodes(cfg)
    assert dict(cfg.data.documents) == {"min_sentences": 1, "max_sentences": 4,
                                        "order": "consecutive", "boundaries": "drawn",
                                        "context": None}  # fmt: skip
    cfg = compose_config(["data=text_pair", "data.documents={max_sentences:0}"])
    with pytest.raises(ConfigError, match="data.documents.max_sentences"):
        complete_option_nodes(cfg)
