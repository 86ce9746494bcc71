"""Data sources: one registered source per data.source.name, each with its options; the
given text files of text_pair, their checks and their cache; a source registered the way a
plugin would."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from pathlib import Path

import pytest
from helpers import toy_corpus_lines

from seq2seq import registry
from seq2seq.config.data_presets import data_preset
from seq2seq.data.corpus import CorpusError, normalise
from seq2seq.data.prepare import prepare
from seq2seq.data.record import NOT_IN_KEY, record_key
from seq2seq.data.settings import DataConfig
from seq2seq.data.sources import CorpusSource, DataSource, LocatedCorpus, data_source
from seq2seq.data.sources.text_pair import TextPairSource
from seq2seq.data.split import write_split_stream
from seq2seq.data.toy_tasks import gold_alignment

SIZES = {"train": 160, "valid": 12, "test": 10}
# The keys the release before sources computed for the installed corpus presets (with a
# corpus sha256 of 64 zeros): the same keys find the same prepared files.
EARLIER_KEYS = {"tatoeba_zh_en": "371b4f67c534582a", "tatoeba_en_zh": "1fb351163e9d8049"}


def write_pairs(folder: Path, split: str, pairs: list[tuple[str, str]]) -> None:
    """`<split>.en` and `<split>.zh`, one sentence a line."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, lang in enumerate(("en", "zh")):
        text = "".join(pair[index] + "\n" for pair in pairs)
        (folder / f"{split}.{lang}").write_text(text, encoding="utf-8")


def corpus_pairs(count: int, seed: int) -> list[tuple[str, str]]:
    """(English, Chinese) sentence pairs of the toy lexicon (one in ten long)."""
    lines = toy_corpus_lines(count, seed)
    return [tuple(line.split("\t")[:2]) for line in lines]


@pytest.fixture
def corpus(tmp_path) -> Path:
    """A folder of train / valid / test file pairs of SIZES lines."""
    folder = tmp_path / "corpus"
    for seed, (split, count) in enumerate(SIZES.items()):
        write_pairs(folder, split, corpus_pairs(count, seed))
    return folder


def text_config(tmp_path: Path, corpus: Path, **overrides) -> DataConfig:
    """A text_pair config of the corpus; `overrides` of the source's options go into its node."""
    source = {
        "name": "text_pair", "train_prefix": str(corpus / "train"),
        "valid_prefix": str(corpus / "valid"), "test_prefix": str(corpus / "test"),
    }  # fmt: skip
    options = {key: overrides.pop(key) for key in list(overrides) if key in TEXT_PAIR_OPTIONS}
    settings = {
        "name": "given", "source": {**source, **options}, "src_lang": "en", "tgt_lang": "zh",
        "root": str(tmp_path / "data"),
        "src_vocab_size": 30, "tgt_vocab_size": 30, "max_len": 200, "max_tokens": 2000,
    }  # fmt: skip
    return DataConfig(**{**settings, **overrides})


TEXT_PAIR_OPTIONS = ("train_prefix", "valid_prefix", "test_prefix", "sha256")


def test_each_source_is_registered_and_an_unknown_one_names_them():
    assert {"tabular", "text_pair", "toy"} <= set(registry.names("source"))
    assert all(issubclass(c.builder, DataSource) for c in registry.components("source"))
    message = r"data\.source\.name must be one of the registered sources .*, got 'monolingual'"
    with pytest.raises(ValueError, match=message) as error:
        DataConfig(source={"name": "monolingual"})
    assert all(name in str(error.value) for name in registry.names("source"))
    with pytest.raises(ValueError, match=r"data\.source must be one of the registered sources"):
        DataConfig(source="monolingual")


def test_the_given_splits_are_read_whole_and_in_order(tmp_path, corpus):
    data = prepare(text_config(tmp_path, corpus))
    for split in ("valid", "test"):
        given = (corpus / f"{split}.zh").read_text(encoding="utf-8").splitlines()
        assert data.split(split).tgt_lines == [normalise(line) for line in given]
        assert data.tgt_tokenizer.decode(data.split(split)[0][1]) == normalise(given[0])
    assert data.summary["lines_read"] == sum(SIZES.values())
    assert (data.summary["train_size"], data.summary["valid_size"]) == (160, 12)
    folder = tmp_path / "data" / "prepared" / "given"
    assert (folder / "train.en").read_text(encoding="utf-8").splitlines() == [
        normalise(line) for line in (corpus / "train.en").read_text(encoding="utf-8").splitlines()
    ]


def test_files_of_unequal_length_name_the_file_and_the_line(tmp_path, corpus):
    (corpus / "valid.zh").write_text(
        "".join(line + "\n" for line in (corpus / "valid.zh").read_text("utf-8").splitlines()[:-2]),
        encoding="utf-8",
    )
    message = rf"{corpus / 'valid.zh'} ends after 10 lines but {corpus / 'valid.en'} goes on: line 11"
    with pytest.raises(CorpusError, match=message.replace(".", r"\.")):
        prepare(text_config(tmp_path, corpus))


def test_a_missing_file_or_prefix_names_its_key(tmp_path, corpus):
    (corpus / "test.en").unlink()
    with pytest.raises(CorpusError, match=r"data\.source\.test_prefix=.*test\.en does not exist"):
        prepare(text_config(tmp_path, corpus))
    with pytest.raises(ValueError, match=r"needs data\.source\.valid_prefix"):
        text_config(tmp_path, corpus, valid_prefix=None)
    # sha256 pins one downloaded corpus file (the tabular source's): not an option here
    with pytest.raises(ValueError, match=r"data\.source\.sha256: not an option of source 'text_pair'"):
        text_config(tmp_path, corpus, sha256="0" * 64)


def test_bad_lines_are_skipped_and_counted_and_max_pairs_cuts_train_only(tmp_path, corpus):
    lines = (corpus / "train.en").read_text(encoding="utf-8").splitlines()
    lines[3], lines[7] = "", "a\x07bell"  # an empty side; a control character
    (corpus / "train.en").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    data = prepare(text_config(tmp_path, corpus, max_pairs=50))
    summary = data.summary
    assert (summary["malformed_skipped"], summary["control_char_skipped"]) == (1, 1)
    assert summary["lines_read"] == sum(SIZES.values())
    assert (len(data.train), len(data.valid), len(data.test)) == (50, 12, 10)


def test_the_cache_is_keyed_by_content_not_by_place(tmp_path, corpus, monkeypatch):
    calls = []
    real = TextPairSource.write_splits
    monkeypatch.setattr(TextPairSource, "write_splits", lambda *a: calls.append(1) or real(*a))
    first = prepare(text_config(tmp_path, corpus))
    moved = corpus.rename(tmp_path / "moved")
    again = prepare(text_config(tmp_path, moved))
    assert calls == [1] and again.summary == first.summary  # the record, found by content
    with (moved / "test.zh").open("a", encoding="utf-8") as stream:
        stream.write("多\n")
    with (moved / "test.en").open("a", encoding="utf-8") as stream:
        stream.write("more\n")
    assert len(prepare(text_config(tmp_path, moved)).test) == 11 and calls == [1, 1]


def test_the_new_keys_leave_the_corpus_presets_record_keys_as_they_were():
    assert {"train_prefix", "valid_prefix", "test_prefix"} <= NOT_IN_KEY
    known = {item.name for item in fields(DataConfig)}
    for name, key in EARLIER_KEYS.items():
        values = {k: v for k, v in data_preset(name).items() if k in known}
        assert record_key(DataConfig.from_mapping(values), "0" * 64) == key


def test_the_toy_source_knows_its_alignment():
    toy = data_source("toy")
    assert toy.known_alignment and not data_source("text_pair").known_alignment
    for task in ("copy", "reverse"):
        cfg = DataConfig(source={"name": "toy", "task": task})
        assert toy.alignment(cfg, 5) == gold_alignment(task, 5)


@dataclass(frozen=True)
class InMemoryOptions:
    url: str = ""  # file://<a JSON file of pairs>


class InMemorySource(CorpusSource):
    """A source as a plugin writes one: its pairs from a JSON file, split by position."""

    def validate(self, cfg: DataConfig) -> None:
        if not cfg.source_options.url.startswith("file://"):
            raise ValueError("data.source.url must name the JSON file of pairs")
        super().validate(cfg)

    def locate(self, cfg: DataConfig) -> LocatedCorpus:
        path = Path(cfg.source_options.url.removeprefix("file://"))
        return LocatedCorpus(hashlib.sha256(path.read_bytes()).hexdigest(), (path,))

    def write_splits(self, cfg: DataConfig, corpus: LocatedCorpus, folder: Path) -> dict:
        pairs = [tuple(pair) for pair in json.loads(corpus.paths[0].read_text(encoding="utf-8"))]
        labels = ["valid"] * 10 + ["test"] * 10 + ["train"] * (len(pairs) - 20)
        write_split_stream(pairs, labels, folder, (cfg.src_lang, cfg.tgt_lang))
        return {"pairs_given": len(pairs)}


@pytest.fixture
def in_memory_source():
    registry.register("source", "in_memory", options=InMemoryOptions)(InMemorySource)
    yield
    registry.unregister("source", "in_memory")


def test_a_registered_source_is_prepared_by_its_name(tmp_path, in_memory_source):
    pairs = corpus_pairs(120, seed=4)
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps(pairs, ensure_ascii=False), encoding="utf-8")
    cfg = DataConfig(
        name="mine", source={"name": "in_memory", "url": f"file://{path}"}, src_lang="en",
        tgt_lang="zh",
        root=str(tmp_path / "data"), src_vocab_size=30, tgt_vocab_size=30, max_len=200,
        max_tokens=2000,
    )  # fmt: skip
    data = prepare(cfg)
    assert data.summary["pairs_given"] == 120 and len(data.valid) == 10
    assert data.valid.src_lines == [english for english, _ in pairs[:10]]
