"""The `seq2seq-data` config (data_only.yaml + the data group) and its summary table."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from seq2seq.cli.data import format_summary
from seq2seq.config import register_configs
from seq2seq.data.config import DataConfig


def compose_data(overrides: list[str]) -> DataConfig:
    register_configs()
    with initialize_config_module(config_module="seq2seq.configs", version_base="1.3"):
        cfg = compose(config_name="data_only", overrides=overrides)
    return DataConfig.from_mapping(OmegaConf.to_container(cfg.data, resolve=True))


@pytest.mark.parametrize("name", ["tatoeba_zh_en", "tatoeba_en_zh", "toy_copy", "toy_reverse"])
def test_every_data_config_composes(name):
    assert compose_data([f"data={name}"]).name == name


def test_default_and_overrides():
    cfg = compose_data(["data.valid_size=500", "data.src_vocab_size=3000"])
    assert (cfg.name, cfg.src_lang, cfg.tgt_lang) == ("tatoeba_zh_en", "zh", "en")
    assert (cfg.valid_size, cfg.src_vocab_size) == (500, 3000)


def test_misspelt_key_fails_at_composition():
    with pytest.raises(Exception, match="valid_sise"):
        compose_data(["data.valid_sise=500"])


def test_bad_value_names_the_key():
    with pytest.raises(ValueError, match="data.test_size must be > 0"):
        compose_data(["data.test_size=0"])


def test_summary_table():
    table = format_summary({"lines_read": 26388, "padding_ratio": 0.05891, "name": "x"})
    lines = table.splitlines()
    assert lines[1].split() == ["lines", "read", "26,388"]
    assert lines[2].endswith("0.05891") and lines[3].endswith("x")
    assert lines[0] == lines[-1] and set(lines[0]) == {"-"}
