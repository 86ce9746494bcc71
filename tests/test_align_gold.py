"""The shipped gold set is read for either direction, and the pieces of the unsegmented
Chinese a model reads are matched to the gold's segmented words."""

from __future__ import annotations

import unicodedata

import pytest

from seq2seq.align.gold import as_in_corpus, gold_set, has_gold_set
from seq2seq.align.words import piece_words, words
from seq2seq.data.tokenizer import SubwordTokenizer


def test_the_valid_part_has_100_zh_en_pairs_with_links_inside_their_words():
    gold = gold_set("zh", "en", "valid")
    assert len(gold) == 100 and len(gold_set("zh", "en", "test")) == 200
    assert sum(len(pair.links.sure) for pair in gold) == 482  # as gold/README.md counts
    assert sum(len(pair.links.possible - pair.links.sure) for pair in gold) == 346
    for pair in gold:
        assert pair.links.sure <= pair.links.possible  # an idiom may have no sure link
        for source, target in pair.links.possible:
            assert 0 <= source < len(pair.source.split()) and 0 <= target < len(pair.target.split())


def test_en_zh_reads_the_same_pairs_with_sides_and_links_swapped():
    forward, backward = gold_set("zh", "en", "valid"), gold_set("en", "zh", "valid")
    assert len(backward) == 100
    for there, back in zip(forward, backward):
        assert (back.source, back.target) == (there.target, there.source)
        assert back.links.sure == {(j, i) for i, j in there.links.sure}
        assert back.links.possible == {(j, i) for i, j in there.links.possible}


def test_language_codes_count_as_their_base_language_and_other_pairs_have_none():
    assert gold_set("cmn", "en", "valid") == gold_set("zh", "en", "valid")
    assert gold_set("en_GB", "zh-Hans", "valid") == gold_set("en", "zh", "valid")
    assert gold_set("ko", "en", "valid") is None and gold_set("zh", "ja", "test") is None
    with pytest.raises(ValueError, match="part must be one of valid, test"):
        gold_set("zh", "en", "train")
    pairs = [("zh", "en"), ("en", "zh"), ("cmn", "en"), ("en_GB", "zh-Hans"), ("ko", "en"),
             ("zh", "ja"), ("en", "en")]  # fmt: skip
    for src, tgt in pairs:  # what gold_set finds, told without reading it
        assert has_gold_set(src, tgt) == (gold_set(src, tgt, "valid") is not None)


def test_the_corpus_text_drops_the_spaces_of_chinese_only():
    assert as_in_corpus("东京 是 一 个 很 大 的 城市 。", "zh") == "东京是一个很大的城市。"
    assert as_in_corpus("Tokyo is a big city.", "en") == "Tokyo is a big city."


def first_character_words(words_text: str, pieces: list[str]) -> list[int]:
    """For each piece, the gold word holding its first character, found by character
    offsets in the NFKC text without spaces (every piece here is found in order)."""
    owners = [index for index, word in enumerate(words_text.split())
              for _ in unicodedata.normalize("NFKC", word)]  # fmt: skip
    found, cursor = [], 0
    for piece in pieces:
        body = piece.replace("▁", "")
        found.append(owners[min(cursor, len(owners) - 1)])
        cursor += len(body)
    return found


def test_real_pieces_of_every_unsegmented_valid_sentence_map_to_the_gold_words(tmp_path):
    gold = gold_set("zh", "en", "valid") + gold_set("zh", "en", "test")
    corpus = [as_in_corpus(pair.source, "zh") for pair in gold]
    tokenizer = SubwordTokenizer.train(
        corpus, lang="zh", vocab_size=1200, folder=tmp_path, vocab_cap=True
    )
    for pair, text in zip(gold[:100], corpus):
        pieces = tokenizer.pieces(text)
        assert "<unk>" not in pieces and "".join(pieces) == unicodedata.normalize("NFKC", text)
        owners = piece_words(pair.source, pieces)
        assert owners == first_character_words(pair.source, pieces), pair.source
        assert set(owners) <= set(range(len(words(pair.source))))
