"""`data.byte_fallback`: a character the subword model lacks is spelt in its UTF-8 bytes
instead of becoming <unk>, so no source text is lost; `data.character_coverage`: how many of
the training side's characters the model keeps; off, every key is as before."""

from __future__ import annotations

import pytest
from test_documents import EARLIER_KEYS

from seq2seq.config.data_presets import data_preset
from seq2seq.data.record import record_key
from seq2seq.data.settings import DataConfig
from seq2seq.data.tokenizer import SubwordTokenizer, spm_settings
from seq2seq.special_tokens import UNK_ID

TEXTS = ["我爱中国。", "他爱北京。", "我们明天去上海。", "你好吗？", "我很好。"] * 40
UNSEEN = "我爱龘国。"  # 龘 is in no training sentence


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    folder = tmp_path_factory.mktemp("spm")
    train = dict(lang="zh", folder=folder, vocab_cap=True)
    return (SubwordTokenizer.train(TEXTS, vocab_size=40, **train),
            SubwordTokenizer.train(TEXTS, vocab_size=300, byte_fallback=True, **train))  # fmt: skip


def test_an_unseen_character_is_spelt_in_bytes_and_decodes_back(tokenizers):
    plain, bytewise = tokenizers
    assert UNK_ID in plain.encode(UNSEEN) and plain.decode(plain.encode(UNSEEN)) != UNSEEN
    ids = bytewise.encode(UNSEEN)
    assert UNK_ID not in ids
    assert bytewise.pieces(UNSEEN)[2:5] == [f"<0x{b:02X}>" for b in "龘".encode()]
    assert bytewise.decode(ids) == UNSEEN


def test_off_the_settings_and_record_keys_are_those_of_before():
    assert "byte_fallback" not in spm_settings(4000, "unigram", ["zh"])
    assert spm_settings(4000, "unigram", ["zh"], byte_fallback=True)["byte_fallback"] is True
    values = data_preset("tatoeba_zh_en")
    assert values["byte_fallback"] is False
    assert record_key(DataConfig.from_mapping(values), "0" * 64) == EARLIER_KEYS["tatoeba_zh_en"]
    on = DataConfig.from_mapping({**values, "byte_fallback": True})
    assert record_key(on, "0" * 64) != EARLIER_KEYS["tatoeba_zh_en"]


RARE_TEXTS = ["我爱中国。"] * 4000 + ["他爱北京。"]  # 他, 北, 京: 3 of 24,005 characters


def test_full_coverage_keeps_a_character_that_the_chinese_default_drops(tmp_path):
    train = dict(lang="zh", vocab_size=30, vocab_cap=True)
    default = SubwordTokenizer.train(RARE_TEXTS, folder=tmp_path / "default", **train)
    full = SubwordTokenizer.train(RARE_TEXTS, folder=tmp_path / "full", character_coverage=1.0,
                                  **train)  # fmt: skip
    assert UNK_ID in default.encode("他爱北京。")  # below 0.9995 of the characters: <unk>
    assert UNK_ID not in full.encode("他爱北京。")
    assert full.decode(full.encode("他爱北京。")) == "他爱北京。"
    assert spm_settings(4000, "unigram", ["zh"])["character_coverage"] == 0.9995
    assert spm_settings(4000, "unigram", ["en"])["character_coverage"] == 1.0
    assert spm_settings(4000, "unigram", ["zh"], character_coverage=1.0)["character_coverage"] == 1.0


def test_coverage_unset_keeps_the_record_key_and_a_bad_one_is_refused_naming_the_key():
    values = data_preset("tatoeba_zh_en")
    assert values["character_coverage"] is None
    assert record_key(DataConfig.from_mapping(values), "0" * 64) == EARLIER_KEYS["tatoeba_zh_en"]
    full = DataConfig.from_mapping({**values, "character_coverage": 1.0})
    assert record_key(full, "0" * 64) != EARLIER_KEYS["tatoeba_zh_en"]
    for bad in (0.0, 1.5, float("nan"), "1.0", True):  # a checkpoint's config is untrusted
        with pytest.raises(ValueError, match=r"data\.character_coverage must be in \(0, 1\]"):
            DataConfig.from_mapping({**values, "character_coverage": bad}).check_corpus_settings()
