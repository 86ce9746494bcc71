"""DataConfig validation, its source node, the YAML files of the `data` config group, and
the migration of the layout before `data.source` (old checkpoints, run folders, command lines)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from seq2seq.config.data_presets import CHECKPOINT_DATA_FIELDS
from seq2seq.config.stored import (
    current_layout,
    migrate_flat_data,
    migrated_layout,
    renamed_override,
)
from seq2seq.data.settings import DataConfig

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"


def tabular(**options) -> dict:
    """A tabular source node with `options`."""
    return {"name": "tabular", **options}


def toy(**options) -> dict:
    """A toy source node with `options`."""
    return {"name": "toy", **options}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"valid_size": 0}, "data.valid_size must be > 0"),
        ({"source": {"name": "monolingual"}}, "data.source.name must be one of"),
        ({"source": tabular(src_column=3)}, "data.source.src_column"),
        ({"source": tabular(src_column=0, tgt_column=0)}, "must differ"),
        ({"tgt_lang": "zh"}, "data.src_lang and data.tgt_lang"),
        ({"src_vocab_size": 4}, "data.src_vocab_size must be > 4"),
        ({"model_type": "wordpiece"}, "data.model_type"),
        ({"max_tokens": 50, "max_len": 50}, "data.max_tokens"),
        ({"source": tabular(max_malformed_share=1.5)}, "data.source.max_malformed_share"),
        ({"source": tabular(max_line_bytes=0)}, "data.source.max_line_bytes must be > 0"),
        ({"src_lang": "fr", "tgt_lang": "en", "traditional_to_simplified": True}, "Chinese side"),
        ({"source": toy(task="sort")}, "data.source.task"),
        ({"source": toy(min_len=5, max_len=4)}, "data.source.max_len"),
        ({"source": toy(vocab_size=27)}, "data.source.vocab_size"),
        ({"source": toy(max_len=101)}, "data.source.max_len must be <= data.max_len"),
        ({"source": toy(train_size=0)}, "data.source.train_size must be > 0"),
        ({"source": toy(train_size="many")}, "data.source.train_size must be an integer"),
        ({"source": tabular(sha256="abc")}, "data.source.sha256 must be null or 64 hexadecimal"),
        ({"source": tabular(sha256="g" * 64)}, "data.source.sha256"),
        ({"source": tabular(max_member_bytes=0)}, "data.source.max_member_bytes must be > 0"),
        ({"source": tabular(url="ftp://example.org/cmn-eng.zip")}, "data.source.url must start with one of"),
        ({"source": tabular(url="https://example.org/anki/..%2Fup.zip")}, "data.source.url must be a plain name"),
        ({"source": tabular(url="https://example.org/anki/%2E%2E")}, "data.source.url must be a plain name"),
        ({"source": tabular(url="https://example.org/")}, "data.source.url must end in a file name"),
        ({"name": "../elsewhere"}, "data.name must be a plain name"),
        ({"name": ".."}, "data.name must be a plain name"),
        ({"source": "toy", "name": "a/b"}, "data.name must be a plain name"),
    ],
)  # fmt: skip
def test_invalid_values_name_the_key(overrides, message):
    with pytest.raises(ValueError, match=message):
        DataConfig(**overrides)


@pytest.mark.parametrize(
    "url",
    [
        "https://example.org/anki/cmn-eng.zip",
        "http://example.org/a%20b.zip",
        "file:///srv/corpora/cmn-eng.zip",
        "https://example.org/anki/..cmn.zip",
    ],
)
def test_plain_urls_are_accepted(url):
    assert DataConfig(source=tabular(url=url)).source_options.url == url


def test_a_source_is_a_name_or_a_node_completed_with_its_defaults():
    by_name = DataConfig(source="toy")
    assert by_name.source == DataConfig(source=toy()).source
    assert by_name.source == {"name": "toy", "task": "reverse", "vocab_size": 10, "min_len": 3,
                              "max_len": 12, "train_size": 10000, "valid_size": 500,
                              "test_size": 500}  # fmt: skip
    assert DataConfig().source_name == "tabular"
    assert DataConfig().source_options.url == "https://www.manythings.org/anki/cmn-eng.zip"


def test_an_option_of_another_source_says_how_to_choose_this_one():
    """What `data.source.name=toy` leaves behind of a tabular node, as for the attention's."""
    with pytest.raises(ValueError) as error:
        DataConfig(source=toy(url="https://example.org/x.zip"))
    assert str(error.value).startswith("data.source.url: not an option of source 'toy'")
    assert "`data.source=toy` chooses source 'toy' with its defaults alone" in str(error.value)
    with pytest.raises(ValueError, match=r"data\.source\.tsk: .*\(did you mean task\?\)"):
        DataConfig(source=toy(tsk="copy"))


@pytest.mark.parametrize(
    ("src_lang", "tgt_lang", "side"),
    [("zh", "en", "src"), ("en", "cmn", "tgt"), ("zh-Hant", "en", "src"), ("en", "de", None)],
)
def test_the_chinese_side_follows_the_language_codes(src_lang, tgt_lang, side):
    assert DataConfig(src_lang=src_lang, tgt_lang=tgt_lang).chinese_side() == side


def test_unknown_key_is_rejected():
    with pytest.raises(ValueError, match="vocab"):
        DataConfig.from_mapping({"vocab": 100})


def test_an_old_key_names_its_new_one():
    message = r"unknown data config key\(s\): kind \(now data\.source\.name\), toy_task \(now data\.source\.task\)"
    with pytest.raises(ValueError, match=message):
        DataConfig.from_mapping({"kind": "toy", "toy_task": "copy"})


@pytest.mark.parametrize("name", ["tatoeba_zh_en", "tatoeba_en_zh", "text_pair", "toy_copy", "toy_reverse"])
def test_yaml_files_build_a_valid_config(name):
    values = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "data" / f"{name}.yaml"))
    values.pop("defaults")
    cfg = DataConfig.from_mapping(values)
    assert cfg.name == name
    assert cfg.source == values["source"]  # every option written out in the preset


def test_the_two_tatoeba_directions_are_mirror_images():
    zh_en = OmegaConf.load(CONFIG_DIR / "data" / "tatoeba_zh_en.yaml")
    en_zh = OmegaConf.load(CONFIG_DIR / "data" / "tatoeba_en_zh.yaml")
    assert (zh_en.src_lang, zh_en.source.src_column) == (en_zh.tgt_lang, en_zh.source.tgt_column) == ("zh", 1)
    assert (zh_en.tgt_lang, zh_en.source.tgt_column) == (en_zh.src_lang, en_zh.source.src_column) == ("en", 0)
    assert zh_en.source.licence == "CC-BY 2.0 France; Tatoeba (tatoeba.org), via manythings.org/anki"
    assert zh_en.source.url == en_zh.source.url == "https://www.manythings.org/anki/cmn-eng.zip"


def test_tatoeba_configs_pin_the_sha256_of_the_mirrored_corpus(corpus_mirror):
    zh_en = OmegaConf.load(CONFIG_DIR / "data" / "tatoeba_zh_en.yaml")
    en_zh = OmegaConf.load(CONFIG_DIR / "data" / "tatoeba_en_zh.yaml")
    digest = hashlib.sha256((corpus_mirror / "cmn-eng.zip").read_bytes()).hexdigest()
    assert zh_en.source.sha256 == en_zh.source.sha256 == digest


def test_vocab_cap_is_off_by_default_and_taken_from_a_checkpoint():
    assert DataConfig().vocab_cap is False and DataConfig(vocab_cap=True).vocab_cap is True
    assert "vocab_cap" in CHECKPOINT_DATA_FIELDS  # it decides how the subwords are cut
    assert set(CHECKPOINT_DATA_FIELDS) <= {field.name for field in fields(DataConfig)}


# ---------------------------------------------------------------- the layout before data.source

# The data section of the code before data.source (commit 1485cbd), as its checkpoints and
# run folders hold it: every key flat, those of all three sources.
OLD_FLAT = {
    "name": "tatoeba_zh_en", "kind": "parallel", "url": "https://example.org/c.zip",
    "member": "c.txt", "src_lang": "zh", "tgt_lang": "en", "src_column": 1, "tgt_column": 0,
    "num_columns": 3, "licence": "CC-BY", "sha256": None, "max_member_bytes": 2147483648,
    "max_line_bytes": 1048576, "train_prefix": None, "valid_prefix": None, "test_prefix": None,
    "traditional_to_simplified": False, "max_malformed_share": 0.5, "max_pairs": None,
    "seed": 1234, "valid_size": 1000, "test_size": 1000, "joint_vocab": False,
    "src_vocab_size": 4000, "tgt_vocab_size": 4000, "model_type": "unigram", "vocab_cap": False,
    "spm_sample_size": 1000000, "encode_workers": None, "max_tokens": 4096, "max_len": 100,
    "toy_task": "copy", "toy_vocab_size": 7, "toy_min_len": 2, "toy_max_len": 9,
    "toy_train_size": 512, "toy_valid_size": 8, "toy_test_size": 8, "alignments": None,
    "root": "data", "rebuild": True,
}  # fmt: skip


def test_an_old_flat_section_moves_the_chosen_sources_keys_into_its_node():
    tabular_node = migrate_flat_data(OLD_FLAT)["source"]
    assert tabular_node == {"name": "tabular", "url": "https://example.org/c.zip",
                            "member": "c.txt", "src_column": 1, "tgt_column": 0,
                            "num_columns": 3, "licence": "CC-BY", "sha256": None,
                            "max_member_bytes": 2147483648, "max_line_bytes": 1048576,
                            "max_malformed_share": 0.5}  # fmt: skip
    toy_section = migrate_flat_data({**OLD_FLAT, "kind": "toy"})
    assert toy_section["source"] == {"name": "toy", "task": "copy", "vocab_size": 7,
                                     "min_len": 2, "max_len": 9, "train_size": 512,
                                     "valid_size": 8, "test_size": 8}  # fmt: skip
    # every field but documents, byte_fallback and character_coverage, which came after the
    # flat layout and take their defaults when absent
    later = {"documents", "byte_fallback", "character_coverage"}
    assert set(toy_section) == {field.name for field in fields(DataConfig)} - later
    text = migrate_flat_data({**OLD_FLAT, "kind": "text_pair", "train_prefix": "c/train"})
    assert text["source"]["train_prefix"] == "c/train" and "url" not in text["source"]
    assert migrate_flat_data({**OLD_FLAT, "kind": "a_plugins"})["source"] == {"name": "a_plugins"}
    current = DataConfig().__dict__
    assert migrate_flat_data(current) == current  # the current layout is left as it is
    DataConfig.from_mapping(toy_section)


def test_an_old_checkpoint_config_and_run_config_migrate_in_one_place():
    """`current_layout` (checkpoints) and `migrated_layout` (run folders' configs) use the
    same data migration as the command line."""
    migrated = migrated_layout({"data": {**OLD_FLAT, "kind": "toy"}, "trainer": {"seed": 1}})
    assert migrated["data"]["source"]["name"] == "toy" and migrated["trainer"] == {"seed": 1}
    assert current_layout({"data": {**OLD_FLAT, "kind": "toy"}})["data"]["source"]["task"] == "copy"


@pytest.mark.parametrize(
    ("override", "renamed", "said"),
    [
        ("data.toy_train_size=512", "data.source.train_size=512",
         "data.toy_train_size is now data.source.train_size; using it"),
        ("data.kind=parallel", "data.source.name=tabular",
         "data.kind=parallel is now data.source.name=tabular; using it"),
        ("data.kind=toy,parallel", "data.source.name=toy,tabular",
         "data.kind=toy,parallel is now data.source.name=toy,tabular; using it"),
        ("+data.url=file:///c.tsv", "+data.source.url=file:///c.tsv",
         "data.url is now data.source.url; using it"),
        ("~data.sha256", "~data.source.sha256", "data.sha256 is now data.source.sha256; using it"),
        ("data.max_tokens=512", "data.max_tokens=512", None),
        ("data=toy_reverse", "data=toy_reverse", None),
        ("trainer.url=1", "trainer.url=1", None),
    ],
)  # fmt: skip
def test_an_old_key_on_the_command_line_is_renamed_with_one_line(override, renamed, said):
    assert renamed_override(override) == (renamed, said)


def run_train(*arguments: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "seq2seq.cli.train", *arguments], cwd=cwd, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip


def test_an_old_command_line_composes_the_same_data_with_a_line_per_old_key(tmp_path):
    old = run_train("data=toy_reverse", "data.toy_train_size=512", "data.kind=toy",
                    "--cfg", "job", cwd=tmp_path)  # fmt: skip
    new = run_train("data=toy_reverse", "data.source.train_size=512", "--cfg", "job", cwd=tmp_path)
    assert old.returncode == new.returncode == 0, old.stderr[-2000:]
    assert old.stdout == new.stdout and "train_size: 512" in new.stdout
    assert old.stderr.splitlines() == [
        "seq2seq-train: data.toy_train_size is now data.source.train_size; using it",
        "seq2seq-train: data.kind=toy is now data.source.name=toy; using it",
    ]


def test_an_old_key_in_a_users_data_config_is_one_line_naming_the_new_key(tmp_path):
    (tmp_path / "mine" / "data").mkdir(parents=True)
    preset = tmp_path / "mine" / "data" / "old.yaml"
    preset.write_text("defaults:\n  - base_data\n  - _self_\nkind: toy\ntoy_task: copy\n")
    finished = run_train("--config-dir", "mine", "data=old", "--cfg", "job", cwd=tmp_path)
    assert finished.returncode == 2
    assert finished.stderr.splitlines() == [
        f"seq2seq-train: {Path('mine/data/old.yaml')}: data.kind is a key of the data config "
        "before data.source; it is now data.source.name (see configs/data/*.yaml)"
    ]
    searched = run_train("hydra.searchpath=[file://mine]", "data=old", "--cfg", "job", cwd=tmp_path)
    assert searched.returncode == 2 and len(searched.stderr.splitlines()) == 1
    assert searched.stderr.rstrip().endswith("; data.kind is now data.source.name")
