"""SubwordTokenizer (sentencepiece, cached by hash) and SymbolTokenizer."""

from __future__ import annotations

import json
import random

import pytest
import sentencepiece as spm

from seq2seq.data.corpus import CorpusError
from seq2seq.data.tokenizer import (
    CAP_NOTE_SUFFIX,
    SubwordTokenizer,
    SymbolTokenizer,
    VocabularySizeError,
    spm_settings,
    tokenizer_from_bytes,
)
from seq2seq.special_tokens import (
    BOS_ID,
    BOS_PIECE,
    EOS_ID,
    EOS_PIECE,
    PAD_ID,
    PAD_PIECE,
    UNK_ID,
    UNK_PIECE,
)

WORDS = "the cat dog sat ran on a mat big red fast slowly house garden".split()
HANZI = "我你他猫狗在家里跑吃饭喝茶大小红的了"


def english_text(count: int = 300, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(2, 7))) + "." for _ in range(count)]


def chinese_text(count: int = 300, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choices(HANZI, k=rng.randint(2, 8))) + "。" for _ in range(count)]


@pytest.fixture
def training_counter(monkeypatch):
    """Counts real sentencepiece trainings."""
    calls = []
    original = spm.SentencePieceTrainer.train

    def counting_train(*args, **kwargs):
        calls.append(kwargs.get("vocab_size"))
        return original(*args, **kwargs)

    monkeypatch.setattr(spm.SentencePieceTrainer, "train", counting_train)
    return calls


def train_english(folder, vocab_size: int = 30, **kwargs) -> SubwordTokenizer:
    return SubwordTokenizer.train(
        english_text(), lang="en", vocab_size=vocab_size, folder=folder, **kwargs
    )


def test_special_ids_and_round_trip(tmp_path):
    tokenizer = train_english(tmp_path)
    assert tokenizer.vocab_size == 30
    specials = [tokenizer.id_to_piece(i) for i in (PAD_ID, UNK_ID, BOS_ID, EOS_ID)]
    assert specials == [PAD_PIECE, UNK_PIECE, BOS_PIECE, EOS_PIECE]
    text = "the big dog ran on a red mat."
    ids = tokenizer.encode(text)
    assert not {PAD_ID, BOS_ID, EOS_ID} & set(ids)  # encode adds no specials
    assert [tokenizer.id_to_piece(i) for i in ids] == tokenizer.pieces(text)
    assert tokenizer.decode(ids) == text
    assert tokenizer.decode([BOS_ID, *ids, EOS_ID, PAD_ID, PAD_ID]) == text
    assert tokenizer.encode_many([text, "the cat."]) == [ids, tokenizer.encode("the cat.")]


def test_model_is_cached_and_retrained_when_a_setting_changes(tmp_path, training_counter):
    first = train_english(tmp_path)
    (path,) = tmp_path.glob("spm_en_*.model")
    mtime = path.stat().st_mtime_ns
    second = train_english(tmp_path)
    assert training_counter == [30]  # not retrained
    assert path.stat().st_mtime_ns == mtime
    assert second.to_bytes() == first.to_bytes()
    train_english(tmp_path, vocab_size=34)
    assert training_counter == [30, 34]
    train_english(tmp_path, model_type="bpe")
    assert len(training_counter) == 3
    assert len(list(tmp_path.glob("spm_en_*.model"))) == 3


def test_changed_training_text_retrains(tmp_path, training_counter):
    SubwordTokenizer.train(english_text(seed=0), lang="en", vocab_size=30, folder=tmp_path)
    SubwordTokenizer.train(english_text(seed=1), lang="en", vocab_size=30, folder=tmp_path)
    assert len(training_counter) == 2


def test_bytes_round_trip(tmp_path):
    tokenizer = train_english(tmp_path)
    restored = SubwordTokenizer.from_bytes(tokenizer.to_bytes(), "en")
    text = "a fast cat sat on the house."
    assert restored.encode(text) == tokenizer.encode(text)
    assert restored.lang == "en"
    rebuilt = tokenizer_from_bytes(tokenizer.kind, tokenizer.to_bytes(), "en")
    assert rebuilt.pieces(text) == tokenizer.pieces(text)


def test_too_large_vocabulary_names_the_setting(tmp_path):
    with pytest.raises(ValueError, match=r"data.tgt_vocab_size=5000 is too large.*at most \d+"):
        train_english(tmp_path, vocab_size=5000, vocab_key="data.tgt_vocab_size")


def test_too_large_vocabulary_error_states_the_largest_size_and_is_a_corpus_error(tmp_path):
    with pytest.raises(VocabularySizeError) as caught:
        train_english(tmp_path, vocab_size=5000)
    largest = caught.value.largest
    assert isinstance(caught.value, CorpusError) and 4 < largest < 5000
    assert f"at most {largest} pieces" in str(caught.value)
    assert train_english(tmp_path, vocab_size=largest).vocab_size == largest  # it is reachable


def test_capped_vocabulary_is_the_largest_size_and_cached_under_that_size(
    tmp_path, training_counter
):
    capped = train_english(tmp_path, vocab_size=5000, vocab_cap=True)
    used = capped.vocab_size
    assert 4 < used < 5000
    assert training_counter == [5000, used]  # the refused size, then the largest
    (note,) = tmp_path.glob(f"spm_en_*{CAP_NOTE_SUFFIX}")
    assert json.loads(note.read_text()) == {"asked": 5000, "used": used}

    again = train_english(tmp_path, vocab_size=5000, vocab_cap=True)
    assert training_counter == [5000, used]  # the note leads to the cached model
    assert again.to_bytes() == capped.to_bytes()
    same_size = train_english(tmp_path, vocab_size=used)  # the key is the size used
    assert training_counter == [5000, used] and same_size.to_bytes() == capped.to_bytes()
    assert len(list(tmp_path.glob("spm_en_*.model"))) == 1


def test_a_reachable_size_is_not_capped_and_shares_the_uncapped_model(tmp_path, training_counter):
    capped = train_english(tmp_path, vocab_size=30, vocab_cap=True)
    assert capped.vocab_size == 30
    assert train_english(tmp_path).to_bytes() == capped.to_bytes()
    assert training_counter == [30]
    assert not list(tmp_path.glob(f"*{CAP_NOTE_SUFFIX}"))


def test_too_small_a_vocabulary_is_not_capped(tmp_path):
    texts = [chr(0x4E00 + i) * 3 for i in range(300)]  # 300 distinct characters
    with pytest.raises(VocabularySizeError, match="too small") as caught:
        SubwordTokenizer.train(texts, lang="zh", vocab_size=50, folder=tmp_path, vocab_cap=True)
    assert caught.value.largest is None


def test_chinese_has_no_dummy_prefix_piece(tmp_path):
    tokenizer = SubwordTokenizer.train(chinese_text(), lang="zh", vocab_size=40, folder=tmp_path)
    pieces = tokenizer.pieces("我在家里吃饭。")
    assert "▁" not in "".join(pieces)
    assert tokenizer.decode(tokenizer.encode("我在家里吃饭。")) == "我在家里吃饭。"


CJK = {"character_coverage": 0.9995, "add_dummy_prefix": False}
SPACED = {"character_coverage": 1.0, "add_dummy_prefix": True}


@pytest.mark.parametrize(
    ("text_langs", "expected"),
    [
        (["zh"], CJK),  # these settings are part of the cache key: unchanged for "zh"
        (["en"], SPACED),
        (["zh", "en"], {"character_coverage": 0.9995, "add_dummy_prefix": True}),  # joint
        (["cmn"], CJK),
        (["zh-Hans"], CJK),
        (["zh_TW"], CJK),
        (["ja"], CJK),
        (["ko"], SPACED),
    ],
)
def test_sentencepiece_settings_by_language(text_langs, expected):
    assert spm_settings(4000, "unigram", text_langs) == {
        "vocab_size": 4000,
        "model_type": "unigram",
        **expected,
    }


def test_zh_hans_is_trained_like_zh(tmp_path):
    tokenizer = SubwordTokenizer.train(
        chinese_text(), lang="zh-Hans", vocab_size=40, folder=tmp_path
    )
    assert "▁" not in "".join(tokenizer.pieces("我在家里吃饭。"))


def test_symbol_tokenizer():
    tokenizer = SymbolTokenizer(5)
    assert tokenizer.vocab_size == 9
    assert tokenizer.encode("a c e") == [4, 6, 8]
    assert tokenizer.encode("a z") == [4, UNK_ID]
    assert tokenizer.pieces("b  d") == ["b", "d"]
    assert tokenizer.decode([BOS_ID, 5, 7, EOS_ID, PAD_ID]) == "b d"
    assert [tokenizer.id_to_piece(i) for i in range(5)] == [
        PAD_PIECE, UNK_PIECE, BOS_PIECE, EOS_PIECE, "a",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tokenizer.id_to_piece(9)
    restored = tokenizer_from_bytes(tokenizer.kind, tokenizer.to_bytes(), "toy")
    assert restored.vocab_size == 9 and restored.encode("e d") == [8, 7]


def test_too_small_a_vocabulary_names_the_key_and_the_size_needed(tmp_path):
    texts = [chr(0x4E00 + i) * 3 for i in range(300)]  # 300 distinct characters
    with pytest.raises(ValueError, match=r"data.src_vocab_size=50 is too small .* need \d+ pieces"):
        SubwordTokenizer.train(
            texts, lang="zh", vocab_size=50, folder=tmp_path, vocab_key="data.src_vocab_size"
        )
