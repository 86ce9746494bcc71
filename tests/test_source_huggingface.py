"""The Hugging Face source (`data.source.name=hf`), offline, on datasets the tests build:
the same prepared files as `text_pair` (given splits) and `tabular` (a hash split) given
the same sentences, in both layouts (a translation column, two text columns) and both
local forms (a folder saved with `datasets`, parquet files); one-line errors naming the
key; a tiny model trained from such a dataset."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from helpers import compose_config, toy_corpus_lines

datasets = pytest.importorskip("datasets", reason="datasets is not installed (pip install '.[hf]')")

import seq2seq.built_ins  # noqa: E402, F401  (registers the built-in sources)
from seq2seq.data.corpus import CONTROL_CHARACTERS, CorpusError, normalise  # noqa: E402
from seq2seq.data.prepare import prepare  # noqa: E402
from seq2seq.data.settings import DataConfig  # noqa: E402
from seq2seq.data.sources import huggingface  # noqa: E402  (registers hf where not built in)
from seq2seq.lab.lab_models import TINY_GRU_MODEL  # noqa: E402
from seq2seq.runs.assemble import train_and_test  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SIZES = {"train": 160, "valid": 12, "test": 10}
HF_SPLITS = {"train": "train", "valid": "validation", "test": "test"}
# Rows the cleaning skips or changes, mixed into the training split: an empty side, a
# control character, spaces to collapse, full-width letters for NFKC.
DIRTY = [
    ("", "空"),
    ("a\x07bell", "铃"),
    ("  many   spaces ", " 多  空格 "),
    ("ＡＢＣ dogs.", "狗。"),
]
SETTINGS = {
    "src_lang": "en", "tgt_lang": "zh", "src_vocab_size": 30, "tgt_vocab_size": 30,
    "max_len": 200, "max_tokens": 2000,
}  # fmt: skip
NOT_COMPARED = ("prepared_", ".lock")  # the record (it names the source) and the lock


def split_pairs() -> dict[str, list[tuple[str, str]]]:
    """(English, Chinese) pairs of the toy lexicon by run split, the training split dirty."""
    pairs = {}
    for seed, (split, count) in enumerate(SIZES.items()):
        lines = toy_corpus_lines(count, seed)
        pairs[split] = [tuple(line.split("\t")[:2]) for line in lines]
    pairs["train"][5:5] = DIRTY
    return pairs


def as_columns(pairs: list[tuple[str, str]], layout: str) -> dict[str, list]:
    """The rows of one split in a layout: a `translation` dict column, or two columns."""
    if layout == "translation":
        return {"translation": [{"en": en, "zh": zh} for en, zh in pairs]}
    return {"english": [en for en, _ in pairs], "chinese": [zh for _, zh in pairs]}


def layout_options(layout: str) -> dict[str, str]:
    if layout == "translation":
        return {}
    return {"source_column": "english", "target_column": "chinese"}


def write_dataset(folder: Path, pairs: dict[str, list], layout: str, form: str) -> Path:
    """The splits as a DatasetDict saved with save_to_disk, or as one parquet file a split
    named by split; returns what data.source.dataset names."""
    splits = {
        HF_SPLITS[split]: datasets.Dataset.from_dict(as_columns(rows, layout))
        for split, rows in pairs.items()
    }
    if form == "saved":
        datasets.DatasetDict(splits).save_to_disk(str(folder))
    else:
        folder.mkdir(parents=True)
        for name, split in splits.items():
            split.to_parquet(str(folder / f"{name}-00000-of-00001.parquet"))
    return folder


def write_text_pair(folder: Path, pairs: dict[str, list]) -> None:
    """`<split>.en` and `<split>.zh`, one sentence a line."""
    folder.mkdir(parents=True)
    for split, rows in pairs.items():
        for index, lang in enumerate(("en", "zh")):
            text = "".join(row[index] + "\n" for row in rows)
            (folder / f"{split}.{lang}").write_text(text, encoding="utf-8")


def hf_config(tmp_path: Path, dataset: Path | str, **overrides) -> DataConfig:
    """An hf config of `dataset`; `overrides` of the source's options go into its node."""
    known = {item.name for item in fields(huggingface.HuggingFaceOptions)}
    options = {key: overrides.pop(key) for key in list(overrides) if key in known}
    source = {"name": "hf", "dataset": str(dataset), **options}
    settings = {**SETTINGS, "name": "from_hf", "root": str(tmp_path / "data"), "source": source}
    return DataConfig(**{**settings, **overrides})


def text_pair_config(tmp_path: Path, corpus: Path) -> DataConfig:
    source = {"name": "text_pair", **{f"{s}_prefix": str(corpus / s) for s in SIZES}}
    return DataConfig(**SETTINGS, name="from_text", root=str(tmp_path / "data"), source=source)


def prepared_files(folder: Path) -> dict[str, bytes]:
    """Every file a preparation wrote, by its name in the folder, but its record."""
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.name.startswith(NOT_COMPARED[0])
        and not path.name.endswith(NOT_COMPARED[1])
    }  # fmt: skip


def encoded(data, split: str) -> list[tuple[list[int], list[int]]]:
    part = data.split(split)
    return [(list(part[i][0]), list(part[i][1])) for i in range(len(part))]


# ---------------------------------------------------------------- the same prepared data


@pytest.mark.parametrize("form", ["saved", "parquet"])
@pytest.mark.parametrize("layout", ["translation", "columns"])
def test_the_given_splits_prepare_as_text_pair_does(tmp_path, layout, form):
    pairs = split_pairs()
    dataset = write_dataset(tmp_path / "dataset", pairs, layout, form)
    write_text_pair(tmp_path / "text", pairs)
    from_hf = prepare(hf_config(tmp_path, dataset, **layout_options(layout)))
    from_text = prepare(text_pair_config(tmp_path, tmp_path / "text"))
    for split in SIZES:
        assert encoded(from_hf, split) == encoded(from_text, split)
        assert from_hf.split(split).tgt_lines == from_text.split(split).tgt_lines
    hf_files = prepared_files(tmp_path / "data" / "prepared" / "from_hf")
    assert hf_files == prepared_files(tmp_path / "data" / "prepared" / "from_text")
    assert any(name.endswith("src_ids.npy") for name in hf_files)
    assert {**from_hf.summary, "name": None} == {**from_text.summary, "name": None}
    summary = from_hf.summary
    assert (summary["malformed_skipped"], summary["control_char_skipped"]) == (1, 1)
    assert summary["lines_read"] == sum(SIZES.values()) + len(DIRTY)
    assert (summary["train_size"], summary["valid_size"]) == (SIZES["train"] + 2, 12)


def test_a_hash_split_of_one_split_is_the_tabular_split(tmp_path, monkeypatch):
    """valid_split=null test_split=null: one saved Dataset (the split `train`) split by
    hashes, as the tab-separated source splits the same pairs in a file."""
    monkeypatch.delenv("SEQ2SEQ_DATA_MIRROR", raising=False)
    pairs = [pair for rows in split_pairs().values() for pair in rows]
    pairs += pairs[:7]  # duplicates, removed by both
    datasets.Dataset.from_dict(as_columns(pairs, "translation")).save_to_disk(str(tmp_path / "one"))
    tsv = tmp_path / "hf_pairs.tsv"
    tsv.write_text("".join(f"{en}\t{zh}\n" for en, zh in pairs), encoding="utf-8")
    sizes = {"valid_size": 15, "test_size": 15, "seed": 7}
    from_hf = prepare(
        hf_config(tmp_path, tmp_path / "one", valid_split=None, test_split=None, **sizes)
    )
    tabular = {
        "name": "tabular", "url": tsv.as_uri(), "member": "", "sha256": None,
        "num_columns": 2, "src_column": 0, "tgt_column": 1,
    }  # fmt: skip
    from_tsv = prepare(
        DataConfig(
            **SETTINGS, **sizes, name="from_tsv", root=str(tmp_path / "data"), source=tabular
        )
    )
    for split in SIZES:
        assert encoded(from_hf, split) == encoded(from_tsv, split)
    hf_files = prepared_files(tmp_path / "data" / "prepared" / "from_hf")
    assert hf_files == prepared_files(tmp_path / "data" / "prepared" / "from_tsv")
    assert {**from_hf.summary, "name": None} == {**from_tsv.summary, "name": None}
    clean = [
        (normalise(en), normalise(zh))
        for en, zh in pairs
        if normalise(en) and normalise(zh) and not CONTROL_CHARACTERS.search(en + zh)
    ]
    assert from_hf.summary["duplicates_removed"] == len(clean) - len(set(clean)) >= 7


def test_codes_that_differ_from_the_languages_are_mapped(tmp_path):
    """A dataset keyed `en-GB` / `zh-CN` is read with source_code and target_code, and a
    row lacking a code, or holding no text, is skipped as malformed."""
    pairs = split_pairs()
    rows = {
        HF_SPLITS[split]: datasets.Dataset.from_dict(
            {"translation": [{"en-GB": en, "zh-CN": zh} for en, zh in items]}
        )
        for split, items in pairs.items()
    }
    rows["train"] = datasets.concatenate_datasets(
        [
            rows["train"],
            datasets.Dataset.from_dict({"translation": [{"en-GB": "cats.", "zh-CN": None}]}),
        ]
    )
    datasets.DatasetDict(rows).save_to_disk(str(tmp_path / "coded"))
    data = prepare(
        hf_config(tmp_path, tmp_path / "coded", source_code="en-GB", target_code="zh-CN")
    )
    assert data.summary["malformed_skipped"] == 2  # the empty English side and the None
    assert data.valid.src_lines == [en for en, _ in pairs["valid"]]


def test_max_pairs_stops_reading_the_training_split(tmp_path):
    dataset = write_dataset(tmp_path / "dataset", split_pairs(), "translation", "saved")
    data = prepare(hf_config(tmp_path, dataset, max_pairs=40))
    assert (len(data.train), len(data.valid), len(data.test)) == (40, 12, 10)
    # 40 clean pairs are the first 42 rows (two dirty ones skipped): no row after is read
    assert data.summary["lines_read"] == 42 + SIZES["valid"] + SIZES["test"]


def test_the_cache_is_keyed_by_the_content_of_the_files(tmp_path, monkeypatch):
    calls = []
    real = huggingface.HuggingFaceSource.write_splits
    monkeypatch.setattr(
        huggingface.HuggingFaceSource, "write_splits", lambda *a: calls.append(1) or real(*a)
    )
    pairs = split_pairs()
    dataset = write_dataset(tmp_path / "dataset", pairs, "columns", "parquet")
    cfg = hf_config(tmp_path, dataset, **layout_options("columns"))
    first = prepare(cfg)
    again = prepare(cfg)
    assert calls == [1] and again.summary == first.summary
    pairs["test"].append(("more tea.", "更多茶。"))
    (dataset / "test-00000-of-00001.parquet").unlink()
    datasets.Dataset.from_dict(as_columns(pairs["test"], "columns")).to_parquet(
        str(dataset / "test-00000-of-00001.parquet")
    )
    assert len(prepare(cfg).test) == SIZES["test"] + 1 and calls == [1, 1]


def test_a_hub_dataset_is_loaded_by_name_config_and_revision(tmp_path, monkeypatch):
    """`load_dataset` (here serving a local dataset for the hub's) gets the name and the
    keys; a streamed dataset is not opened again once prepared, a downloaded one is, for
    its fingerprints, and a new fingerprint prepares the data again."""
    local = write_dataset(tmp_path / "dataset", split_pairs(), "translation", "saved")
    calls = []

    def load_dataset(path, name=None, **keys):
        calls.append((path, name, keys))
        loaded = datasets.load_from_disk(str(local))
        if keys["streaming"]:
            return datasets.IterableDatasetDict(
                {split: data.to_iterable_dataset() for split, data in loaded.items()}
            )
        if len(calls) > 3:  # the dataset changed on the hub: another fingerprint
            return datasets.DatasetDict(
                {split: data.map(lambda row: row) for split, data in loaded.items()}
            )
        return loaded

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    hub = {"config": "en-zh", "revision": "0123abc", "data_dir": "zh-en"}
    streamed = hf_config(tmp_path, "someone/corpus", streaming=True, **hub)
    from_hub = prepare(streamed)
    keys = {"data_dir": "zh-en", "revision": "0123abc"}
    assert calls == [("someone/corpus", "en-zh", {**keys, "streaming": True})]
    from_disk = prepare(hf_config(tmp_path, local, name="local"))
    for split in SIZES:
        assert encoded(from_hub, split) == encoded(from_disk, split)
    prepare(streamed)
    assert len(calls) == 1  # prepared: the stream is not opened
    downloaded = hf_config(tmp_path, "someone/corpus", name="downloaded", **hub)
    writes = []
    real = huggingface.HuggingFaceSource.write_splits
    monkeypatch.setattr(
        huggingface.HuggingFaceSource, "write_splits", lambda *a: writes.append(1) or real(*a)
    )
    prepare(downloaded)
    prepare(downloaded)
    assert [call[2]["streaming"] for call in calls[1:]] == [False, False] and writes == [1]
    prepare(downloaded)  # another fingerprint
    assert writes == [1, 1]


# ---------------------------------------------------------------- errors, one line each


@pytest.fixture
def saved(tmp_path) -> Path:
    return write_dataset(tmp_path / "dataset", split_pairs(), "translation", "saved")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"train_split": "training"},
         "data.source.train_split: no split 'training' in {d} (splits: train, validation, test)"),
        ({"valid_split": "dev", "test_split": "test"},
         "data.source.valid_split: no split 'dev' in {d} (splits: train, validation, test)"),
        ({"translation_field": "pairs"},
         "data.source.translation_field: no column 'pairs' in {d} split 'train' (columns: "
         "translation)"),
        ({"source_column": "en", "target_column": "zh"},
         "data.source.source_column: no column 'en' in {d} split 'train' (columns: translation)"),
        ({"src_lang": "fr"},
         "data.src_lang: no language 'fr' in column 'translation' of {d} split 'train' "
         "(codes: en, zh)"),
        ({"target_code": "zh-CN"},
         "data.source.target_code: no language 'zh-CN' in column 'translation' of {d} split "
         "'train' (codes: en, zh)"),
        ({"config": "en-zh"}, "data.source.config: {d!r} is a local dataset"),
    ],
)  # fmt: skip
def test_what_the_dataset_lacks_is_one_line_naming_the_key(tmp_path, saved, overrides, message):
    with pytest.raises(CorpusError) as error:
        prepare(hf_config(tmp_path, saved, **overrides))
    text = str(error.value)
    assert text.startswith(message.format(d=str(saved))), text
    assert "\n" not in text


def test_a_column_of_numbers_is_not_text(tmp_path):
    splits = {
        name: datasets.Dataset.from_dict({"en": ["a", "b"], "id": [1, 2]})
        for name in HF_SPLITS.values()
    }
    datasets.DatasetDict(splits).save_to_disk(str(tmp_path / "numbers"))
    with pytest.raises(
        CorpusError, match=r"^data\.source\.target_column: column 'id' of .* holds int64, not text$"
    ):
        prepare(hf_config(tmp_path, tmp_path / "numbers", source_column="en", target_column="id"))


def test_a_missing_dataset_names_the_key(tmp_path, monkeypatch):
    with pytest.raises(CorpusError, match=r"^data\.source\.dataset: no folder or file .*nowhere"):
        prepare(hf_config(tmp_path, "./nowhere"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(
        CorpusError, match=r"^data\.source\.dataset: .*empty is neither a folder saved"
    ):
        prepare(hf_config(tmp_path, tmp_path / "empty"))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)  # no network, no waiting
    with pytest.raises(CorpusError) as error:
        prepare(hf_config(tmp_path, "nobody-at-all/no-such-corpus"))
    text = str(error.value)
    assert text.startswith(
        "data.source.dataset: cannot load 'nobody-at-all/no-such-corpus' from the Hugging Face hub: "
    )
    assert "nor is 'nobody-at-all/no-such-corpus' a folder or file here" in text
    assert "HF_HUB_OFFLINE=1" in text and "\n" not in text  # unreachable: how to work offline


def test_settings_that_cannot_work_are_refused_with_the_key(tmp_path, saved):
    with pytest.raises(
        ValueError, match=r"data\.source\.source_column and data\.source\.target_column name"
    ):
        hf_config(tmp_path, saved, source_column="en")
    with pytest.raises(
        ValueError, match=r"data\.source\.valid_split and data\.source\.test_split name two"
    ):
        hf_config(tmp_path, saved, valid_split=None)
    with pytest.raises(ValueError, match=r"must name different splits"):
        hf_config(tmp_path, saved, valid_split="train")
    with pytest.raises(ValueError, match=r"data\.source\.source_code .* must be null"):
        hf_config(tmp_path, saved, source_column="en", target_column="zh", source_code="en")
    with pytest.raises(ValueError, match=r"needs data\.source\.dataset"):
        hf_config(tmp_path, "")


def test_without_datasets_the_error_names_the_extra(tmp_path, saved, monkeypatch):
    """A local dataset prepared once opens without `datasets` (hashed by its files); one
    still to prepare names the extra."""
    prepared = prepare(hf_config(tmp_path, saved))
    cfg = hf_config(tmp_path, saved)  # validates without importing datasets
    monkeypatch.setitem(sys.modules, "datasets", None)
    assert prepare(cfg).valid.src_lines == prepared.valid.src_lines
    with pytest.raises(CorpusError, match=r"pip install 'seq2seq-attention\[hf\]'"):
        prepare(hf_config(tmp_path, saved, name="another"))


def test_seq2seq_data_reports_a_wrong_split_in_one_line(tmp_path, saved):
    done = subprocess.run(
        [sys.executable, "-m", "seq2seq.cli.data", "data=hf", f"data.source.dataset={saved}",
         "data.source.test_split=tst2017", "data.src_lang=en",
         "data.tgt_lang=zh", f"data.root={tmp_path / 'data'}", f"hydra.run.dir={tmp_path / 'hydra'}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line == (
        f"seq2seq-data: data.source.test_split: no split 'tst2017' in {saved} (splits: train, "
        "validation, test); null valid_split and test_split split train_split by hashes instead"
    )


# ---------------------------------------------------------------- training from it


def test_a_tiny_model_trains_from_a_local_dataset(tmp_path, saved):
    overrides = [
        "data=hf", f"data.source.dataset={saved}",
        "data.src_lang=en", "data.tgt_lang=zh", "data.src_vocab_size=30",
        "data.tgt_vocab_size=30", "data.max_tokens=512", f"data.root={tmp_path / 'data'}",
        *TINY_GRU_MODEL, "trainer.max_steps=2", "trainer.valid_every=2", "trainer.threads=1",
        "trainer.valid_max_sentences=4", "trainer.test_search.beam_size=1",
        "logging.progress_bar=false", "logging.tensorboard=false",
    ]  # fmt: skip
    results = train_and_test(compose_config(overrides), tmp_path / "run", outputs_root=tmp_path)
    assert (tmp_path / "run" / "checkpoints" / "best.pt").is_file()
    on_disk = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    assert on_disk["steps"] == results["steps"] == 2
    assert (tmp_path / "data" / "prepared" / "hf" / "valid.zh").read_text(
        encoding="utf-8"
    ).splitlines() == [zh for _, zh in split_pairs()["valid"]]
