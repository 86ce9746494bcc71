"""DataConfig validation and the YAML files of the `data` config group."""

from __future__ import annotations

import hashlib
from dataclasses import fields
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from seq2seq.data.installed_presets import CHECKPOINT_DATA_FIELDS
from seq2seq.data.settings import DataConfig

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"valid_size": 0}, "data.valid_size must be > 0"),
        ({"kind": "monolingual"}, "data.kind must be one of"),
        ({"src_column": 3}, "data.src_column"),
        ({"src_column": 0, "tgt_column": 0}, "must differ"),
        ({"tgt_lang": "zh"}, "data.src_lang and data.tgt_lang"),
        ({"src_vocab_size": 4}, "data.src_vocab_size must be > 4"),
        ({"model_type": "wordpiece"}, "data.model_type"),
        ({"max_tokens": 50, "max_len": 50}, "data.max_tokens"),
        ({"max_malformed_share": 1.5}, "data.max_malformed_share"),
        ({"src_lang": "fr", "tgt_lang": "en", "traditional_to_simplified": True}, "Chinese side"),
        ({"kind": "toy", "toy_task": "sort"}, "data.toy_task"),
        ({"kind": "toy", "toy_min_len": 5, "toy_max_len": 4}, "data.toy_max_len"),
        ({"kind": "toy", "toy_vocab_size": 27}, "data.toy_vocab_size"),
        ({"sha256": "abc"}, "data.sha256 must be null or 64 hexadecimal digits"),
        ({"sha256": "g" * 64}, "data.sha256"),
        ({"max_member_bytes": 0}, "data.max_member_bytes must be > 0"),
        ({"url": "ftp://example.org/cmn-eng.zip"}, "data.url must start with one of"),
        ({"url": "https://example.org/anki/..%2Fup.zip"}, "data.url must be a plain name"),
        ({"url": "https://example.org/anki/%2E%2E"}, "data.url must be a plain name"),
        ({"url": "https://example.org/"}, "data.url must end in a file name"),
        ({"name": "../elsewhere"}, "data.name must be a plain name"),
        ({"name": ".."}, "data.name must be a plain name"),
        ({"kind": "toy", "name": "a/b"}, "data.name must be a plain name"),
    ],
)
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
    assert DataConfig(url=url).url == url


@pytest.mark.parametrize(
    ("src_lang", "tgt_lang", "side"),
    [("zh", "en", "src"), ("en", "cmn", "tgt"), ("zh-Hant", "en", "src"), ("en", "de", None)],
)
def test_the_chinese_side_follows_the_language_codes(src_lang, tgt_lang, side):
    assert DataConfig(src_lang=src_lang, tgt_lang=tgt_lang).chinese_side() == side


def test_unknown_key_is_rejected():
    with pytest.raises(ValueError, match="vocab"):
        DataConfig.from_mapping({"vocab": 100})


@pytest.mark.parametrize("name", ["tatoeba_zh_en", "tatoeba_en_zh", "toy_copy", "toy_reverse"])
def test_yaml_files_build_a_valid_config(name):
    values = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "data" / f"{name}.yaml"))
    values.pop("defaults")
    cfg = DataConfig.from_mapping(values)
    assert cfg.name == name


def test_the_two_tatoeba_directions_are_mirror_images():
    zh_en = OmegaConf.load(CONFIG_DIR / "data" / "tatoeba_zh_en.yaml")
    en_zh = OmegaConf.load(CONFIG_DIR / "data" / "tatoeba_en_zh.yaml")
    assert (zh_en.src_lang, zh_en.src_column) == (en_zh.tgt_lang, en_zh.tgt_column) == ("zh", 1)
    assert (zh_en.tgt_lang, zh_en.tgt_column) == (en_zh.src_lang, en_zh.src_column) == ("en", 0)
    assert zh_en.licence == "CC-BY 2.0 France; Tatoeba (tatoeba.org), via manythings.org/anki"
    assert zh_en.url == en_zh.url == "https://www.manythings.org/anki/cmn-eng.zip"


def test_tatoeba_configs_pin_the_sha256_of_the_mirrored_corpus(corpus_mirror):
    zh_en = OmegaConf.load(CONFIG_DIR / "data" / "tatoeba_zh_en.yaml")
    en_zh = OmegaConf.load(CONFIG_DIR / "data" / "tatoeba_en_zh.yaml")
    digest = hashlib.sha256((corpus_mirror / "cmn-eng.zip").read_bytes()).hexdigest()
    assert zh_en.sha256 == en_zh.sha256 == digest


def test_vocab_cap_is_off_by_default_and_taken_from_a_checkpoint():
    assert DataConfig().vocab_cap is False and DataConfig(vocab_cap=True).vocab_cap is True
    assert "vocab_cap" in CHECKPOINT_DATA_FIELDS  # it decides how the subwords are cut
    assert set(CHECKPOINT_DATA_FIELDS) <= {field.name for field in fields(DataConfig)}
