"""Words of a text, and which word each subword piece belongs to (NFKC included)."""

from __future__ import annotations

import io
import unicodedata

import pytest
import sentencepiece as spm

from seq2seq.align.words import attach_punctuation, is_character_segmented, piece_words, words
from seq2seq.data.tokenizer import SubwordTokenizer
from seq2seq.special_tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("That's wet.", ["That's", "wet."]),  # punctuation stays with its word
        ("那 是 湿 的 。", ["那", "是", "湿", "的", "。"]),  # pre-segmented Chinese
        ("那是湿的。", ["那", "是", "湿", "的", "。"]),  # unsegmented: one word per character
        ("我爱Python3。你好！", ["我", "爱", "Python3", "。", "你", "好", "！"]),
        ("我有１２个苹果", ["我", "有", "１２", "个", "苹", "果"]),  # full-width digits: one run
        ("猫が好き", ["猫", "が", "好", "き"]),  # Japanese kana too
        ("나는 학생이다", ["나는", "학생이다"]),  # Korean is written with spaces
        ("안녕하세요", ["안녕하세요"]),  # and without them is one word
        ("  two\u3000words ", ["two", "words"]),  # any whitespace separates
        ("", []),
    ],
)
def test_words_are_whitespace_tokens_or_cjk_characters(text, expected):
    assert words(text) == expected


def test_only_unspaced_text_with_chinese_or_japanese_is_cut_into_characters():
    assert is_character_segmented("我爱中国。")
    assert not is_character_segmented("我 爱 中国 。")
    assert not is_character_segmented("Hello!")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("He is busy .", "He is busy."),  # English gold that splits punctuation off
        ("Wait ... what ?!", "Wait... what?!"),
        ('" Hi " , he said ( twice ) .', '" Hi ", he said (twice).'),  # straight quotes: as given
        ("¿ Qué ?", "¿Qué?"),
        ("He is busy.", "He is busy."),  # as the corpus writes it: unchanged
        ("  a  b .", "  a  b."),  # other spaces stay
        (". a", ". a"),  # nothing before the mark
        ("", ""),
    ],
)
def test_split_off_punctuation_is_written_against_its_word(text, expected):
    assert attach_punctuation(text) == expected


def test_the_words_of_split_punctuation_spell_the_joined_text():
    pieces = ["▁He", "▁is", "▁bus", "y", ".", "</s>"]  # the pieces of `He is busy.`
    assert piece_words("He is busy .", pieces) == [0, 1, 2, 2, 3, None]


def test_pieces_map_to_the_words_they_spell():
    pieces = ["▁I", "▁love", "▁Ch", "ina", ".", "</s>"]
    assert piece_words("I love China.", pieces) == [0, 1, 2, 2, 2, None]


def test_a_lone_boundary_mark_belongs_to_the_next_word():
    pieces = ["▁", "I", "▁", "C", "h", "</s>"]
    assert piece_words("I Ch", pieces) == [0, 0, 1, 1, 1, None]


def test_toy_symbols_are_one_word_each():
    assert piece_words("c a d", ["c", "a", "d", "</s>"]) == [0, 1, 2, None]


def test_unsegmented_and_segmented_chinese():
    assert piece_words("我爱中国。", ["我", "爱", "中国", "。", "</s>"]) == [0, 1, 2, 4, None]
    assert piece_words("我 爱 中国 。", ["我", "▁爱", "▁中国", "▁。"]) == [0, 1, 2, 3]


def test_pieces_of_unsegmented_chinese_map_to_the_words_of_its_segmented_form():
    # The model reads 东京是一个很大的城市。 as the corpus has it; a gold set names its words.
    pieces = ["▁", "东京", "是一", "个", "很", "大的", "城", "市", "。", "</s>"]
    expected = [0, 0, 1, 3, 4, 5, 7, 7, 8, None]  # a piece spanning words: the first one
    assert piece_words("东京 是 一 个 很 大 的 城市 。", pieces) == expected


def test_full_width_text_is_matched_after_nfkc():
    # sentencepiece normalises Ｃｈｉｎａ！１２３ to China!123 before cutting it.
    pieces = ["▁", "I", "▁l", "o", "v", "e", "▁", "C", "h", "in", "a", "!", "▁", "1", "2", "3"]
    expected = [0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3]
    assert piece_words("I love Ｃｈｉｎａ！ １２３", pieces) == expected


def test_a_character_that_normalises_to_several_stays_in_its_word():
    pieces = ["▁", "H", "e", "▁", "株式会社", "▁", "1"]
    assert piece_words("He ㍿ ①", pieces) == [0, 0, 0, 1, 1, 2, 2]


def test_unknown_pieces_match_the_decoded_mark_or_one_character():
    decoded = "我爱 ⁇ 中国。"  # how sentencepiece decodes an <unk> between 爱 and 中
    assert piece_words(decoded, ["我", "爱", "<unk>", "中", "国", "。"]) == [0, 0, 1, 2, 2, 2]
    assert piece_words("a㐀b c", ["▁a", "<unk>", "b", "▁c"]) == [0, 0, 0, 1]


def test_a_piece_not_in_the_text_never_stops_the_alignment():
    assert piece_words("ab cd", ["▁ab", "▁x", "cd"]) == [0, 1, 1]
    assert piece_words("ab", ["▁ab", "▁zz", "</s>"]) == [0, 0, None]
    assert piece_words("", ["▁", "</s>"]) == [None, None]


def test_a_run_of_unknown_characters_is_one_piece_of_its_first_word():
    # sentencepiece keeps consecutive unknown characters together: （星期一） is one piece.
    pieces = ["今", "天", "(星期一)", "很", "好", "。"]
    assert piece_words("今天（星期一）很好。", pieces) == [0, 1, 2, 7, 8, 9]


def subword_tokenizer(texts: list[str], dummy_prefix: bool) -> SubwordTokenizer:
    """A small sentencepiece model with the project's special ids."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, vocab_size=60,
        hard_vocab_limit=False, add_dummy_prefix=dummy_prefix, pad_id=PAD_ID, unk_id=UNK_ID,
        bos_id=BOS_ID, eos_id=EOS_ID, minloglevel=2, num_threads=1,
    )  # fmt: skip
    return SubwordTokenizer(spm.SentencePieceProcessor(model_proto=model.getvalue()), "xx")


def spelled_words(text: str, pieces: list[str]) -> list[str]:
    """The characters of the pieces gathered by the word `piece_words` gives them."""
    owners = piece_words(text, pieces)
    spelled = [""] * len(words(text))
    for piece, word in zip(pieces, owners):
        spelled[word] += piece.replace("▁", "")
    return spelled


@pytest.mark.parametrize(
    "text",
    ["我有１２个苹果！", "我有 两个 苹果 。", "我爱中国，你好吗？", "我们去北京，你好！"],
)
def test_real_chinese_pieces_spell_their_words(text):
    corpus = ["我有两个苹果。", "他今天很高兴！", "你好吗？", "我爱中国。", "我们今天去北京。12"]
    tokenizer = subword_tokenizer(corpus * 20, dummy_prefix=False)
    expected = [unicodedata.normalize("NFKC", word) for word in words(text)]
    assert spelled_words(text, tokenizer.pieces(text)) == expected


@pytest.mark.parametrize(
    "text", ["I love Ｃｈｉｎａ！ １２３", "Ｗｅ ｌｉｋｅ apples.", "He's 12."]
)
def test_real_english_pieces_spell_their_words(text):
    corpus = ["I love China.", "He has two apples!", "Do you like apples?", "We went, 123."]
    tokenizer = subword_tokenizer(corpus * 20, dummy_prefix=True)
    expected = [unicodedata.normalize("NFKC", word) for word in words(text)]
    assert spelled_words(text, tokenizer.pieces(text)) == expected
