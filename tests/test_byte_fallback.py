"""`data.byte_fallback`: a character the subword model lacks is spelt in its UTF-8 bytes
instead of becoming <unk>, so no source text is lost; off, every key is as before."""

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
