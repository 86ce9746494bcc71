"""The `seq2seq-data` config (data_only.yaml + the data group), its summary table, its errors."""

from __future__ import annotations

import sys

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from seq2seq.cli.data import format_summary, main
from seq2seq.config.schema import register_configs
from seq2seq.data.settings import DataConfig

PAIRS = [("cat", "猫"), ("dog", "狗"), ("tea", "茶")]


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


def run_main(monkeypatch, tmp_path, *overrides: str) -> int:
    """`seq2seq-data prepare OVERRIDES...` in-process, in tmp_path; returns the exit code."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["seq2seq-data", "prepare", *overrides])
    with pytest.raises(SystemExit) as stopped:
        main()
    return stopped.value.code


def one_line_error(capsys) -> str:
    """The error line, last on stderr (after a download's progress bar), no traceback."""
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    lines = captured.err.splitlines()
    assert [line for line in lines if line.startswith("seq2seq-data:")] == lines[-1:]
    return lines[-1]


def test_a_bad_config_value_is_one_line_with_exit_code_2(tmp_path, monkeypatch, capsys):
    assert run_main(monkeypatch, tmp_path, "data.test_size=0") == 2
    assert one_line_error(capsys) == "seq2seq-data: data.test_size must be > 0, got 0"


def test_a_too_large_vocabulary_is_one_line_with_exit_code_2(tmp_path, monkeypatch, capsys):
    corpus = tmp_path / "pairs.tsv"
    lines = [f"{word} {n}.\t{n}{hanzi}。\tCC-BY" for n in range(40) for word, hanzi in PAIRS]
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    overrides = [f"data.source.url={corpus.as_uri()}", "data.source.member=''", "data.source.sha256=null",
                 "data.name=tiny", "data.valid_size=10", "data.test_size=10"]  # fmt: skip
    assert run_main(monkeypatch, tmp_path, *overrides) == 2
    line = one_line_error(capsys)
    assert line.startswith("seq2seq-data: data.src_vocab_size=4000 is too large for the 'zh'")
    assert "data.vocab_cap=true" in line
