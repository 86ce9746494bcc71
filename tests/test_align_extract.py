"""Word links from attention: layer and head, pieces to words, argmax and threshold."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from seq2seq.align import teacher_forced as align_attention
from seq2seq.align.extract import (
    AlignmentError,
    AlignSettings,
    Sentence,
    align_pairs,
    as_the_model_reads,
    extract_links,
    links_from_attention,
    reading_langs,
    select_weights,
    translation_links,
    word_weights,
)
from seq2seq.align.gold import PARTS, as_in_corpus, gold_set
from seq2seq.align.pharaoh import Links
from seq2seq.align.teacher_forced import teacher_forced_attention, teacher_forced_weights
from seq2seq.data.tokenizer import SymbolTokenizer
from seq2seq.search import Hypothesis
from seq2seq.search.translator import Translation, Translator
from seq2seq.visualise import alignment as visualise_alignment

# Attention over the pieces of 2 source words (the first cut in two) and 2 target words
# (the second cut in two); EOS last on both sides.
PIECE_WEIGHTS = torch.tensor(
    [
        [0.1, 0.2, 0.6, 0.1],  # target word 0
        [0.5, 0.3, 0.1, 0.1],  # target word 1, first piece
        [0.1, 0.1, 0.7, 0.1],  # target word 1, second piece
        [0.0, 0.0, 0.0, 1.0],  # EOS
    ]
)
SOURCE_OWNERS = [0, 0, 1, None]  # "ab c": ▁a b ▁c </s>
TARGET_OWNERS = [0, 1, 1, None]  # "x yz": ▁x ▁y z </s>
# Source pieces summed, target pieces averaged: word 0 = row 0 = [0.1+0.2, 0.6];
# word 1 = mean([0.5+0.3, 0.1], [0.1+0.1, 0.7]) = [0.5, 0.4].
WORD_WEIGHTS = torch.tensor([[0.3, 0.6], [0.5, 0.4]])


def test_settings_are_checked():
    assert AlignSettings() == AlignSettings(layer=-1, head=None, extract="argmax", threshold=0.3)
    with pytest.raises(ValueError, match="extract must be one of argmax, threshold"):
        AlignSettings(extract="max")
    for threshold in (0.0, 1.5, float("nan"), "0.3"):
        with pytest.raises(ValueError, match="threshold must be a number in"):
            AlignSettings(threshold=threshold)
    with pytest.raises(ValueError, match="head must be an index >= 0"):
        AlignSettings(head=-1)


def test_the_layer_and_the_head_or_their_mean_are_chosen():
    attention = torch.arange(2 * 3 * 2 * 2, dtype=torch.float).reshape(2, 3, 2, 2)
    torch.testing.assert_close(select_weights(attention, AlignSettings()), attention[1].mean(0))
    torch.testing.assert_close(
        select_weights(attention, AlignSettings(layer=0, head=2)), attention[0, 2]
    )
    torch.testing.assert_close(
        select_weights(attention, AlignSettings(layer=-2, head=0)), attention[0, 0]
    )
    with pytest.raises(AlignmentError, match=r"layer 2: the model has 2 attention layer\(s\)"):
        select_weights(attention, AlignSettings(layer=2))
    with pytest.raises(AlignmentError, match=r"head 3: the model has 3 head\(s\), 0..2"):
        select_weights(attention, AlignSettings(head=3))


def test_source_pieces_are_summed_and_target_pieces_averaged():
    weights, covered = word_weights(PIECE_WEIGHTS, SOURCE_OWNERS, TARGET_OWNERS, 2, 2)
    torch.testing.assert_close(weights, WORD_WEIGHTS)
    assert covered.tolist() == [True, True]


def test_a_target_word_without_pieces_is_not_covered():
    weights, covered = word_weights(PIECE_WEIGHTS, SOURCE_OWNERS, TARGET_OWNERS, 2, 3)
    assert covered.tolist() == [True, True, False]
    assert weights[2].tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="does not fit 3 target × 4 source pieces"):
        word_weights(PIECE_WEIGHTS, SOURCE_OWNERS, TARGET_OWNERS[:3], 2, 2)


def test_argmax_links_each_target_word_once():
    covered = torch.tensor([True, True])
    links = extract_links(WORD_WEIGHTS, covered, AlignSettings())
    assert links == Links.of({(1, 0), (0, 1)})


def test_threshold_links_every_source_word_at_or_above_it():
    covered = torch.tensor([True, True])
    links = extract_links(WORD_WEIGHTS, covered, AlignSettings(extract="threshold", threshold=0.35))
    assert links == Links.of({(1, 0), (0, 1), (1, 1)})
    high = extract_links(WORD_WEIGHTS, covered, AlignSettings(extract="threshold", threshold=0.7))
    assert high == Links()


def test_a_row_all_on_eos_and_an_uncovered_word_link_nothing():
    weights = torch.tensor([[0.0, 0.0], [0.5, 0.4]])
    assert extract_links(weights, torch.tensor([True, False]), AlignSettings()) == Links()
    assert extract_links(torch.zeros(2, 0), torch.tensor([True, True]), AlignSettings()) == Links()


def test_links_from_attention_goes_from_texts_and_pieces_to_word_links():
    attention = PIECE_WEIGHTS[None, None]  # (1 layer, 1 head, 4, 4)
    source = Sentence("ab c", ["▁a", "b", "▁c", "</s>"])
    target = Sentence("x yz", ["▁x", "▁y", "z", "</s>"])
    links = links_from_attention(attention, source, target, AlignSettings())
    assert links == Links.of({(1, 0), (0, 1)})


class ReversePointer(nn.Module):
    """Stand-in for Seq2Seq with 2 layers of 2 heads. Layer 1, head 0 puts all weight of
    target row t on source n-1-t (n real source symbols) and the EOS row on EOS; head 1 is
    uniform. Layer 0 points at the diagonal."""

    def __init__(self, with_attention: bool = True):
        super().__init__()
        self.with_attention = with_attention

    def forward(self, src, src_mask, tgt_in, need_weights=False):
        batch, src_len = src.shape
        tgt_len = tgt_in.size(1)
        attention = torch.zeros(batch, 2, 2, tgt_len, src_len)
        for row, length in enumerate((src_mask.sum(dim=1) - 1).tolist()):
            for t in range(tgt_len):
                attention[row, 1, 0, t, length - 1 - t if t < length else length] = 1.0
                attention[row, 0, :, t, min(t, length)] = 1.0
            attention[row, 1, 1, :, : length + 1] = 1.0 / (length + 1)
        logits = torch.zeros(batch, tgt_len, 14)
        return logits, (attention if self.with_attention and need_weights else None)


def toy_translator(with_attention: bool = True, max_len: int = 100) -> Translator:
    config = SimpleNamespace(data=SimpleNamespace(max_len=max_len))
    symbols = SymbolTokenizer(10)
    model = ReversePointer(with_attention)
    return Translator(model, symbols, symbols, config, torch.device("cpu"))


def anti_diagonal(length: int) -> Links:
    return Links.of((length - 1 - j, j) for j in range(length))


def test_align_pairs_reads_the_chosen_layer_and_head_of_teacher_forced_attention():
    sources, targets = ["a b c", "d e"], ["c b a", "e d"]
    translator = toy_translator()
    mean = align_pairs(translator, sources, targets, AlignSettings())
    assert mean == [anti_diagonal(3), anti_diagonal(2)]
    diagonal = align_pairs(translator, sources, targets, AlignSettings(layer=0))
    assert diagonal == [Links.of({(0, 0), (1, 1), (2, 2)}), Links.of({(0, 0), (1, 1)})]
    uniform = align_pairs(translator, sources, targets, AlignSettings(head=1))  # ties: word 0
    assert uniform == [Links.of({(0, 0), (0, 1), (0, 2)}), Links.of({(0, 0), (0, 1)})]


def test_a_pair_with_an_empty_side_has_no_links():
    links = align_pairs(toy_translator(), ["", "a b", "a"], ["a", "", "a"], AlignSettings())
    assert links == [Links(), Links(), anti_diagonal(1)]
    assert align_pairs(toy_translator(), [], [], AlignSettings()) == []


def test_long_sides_are_cut_to_the_model_limit_with_a_warning(caplog):
    translator = toy_translator(max_len=3)
    with caplog.at_level(logging.WARNING):
        (links,) = align_pairs(translator, ["a b c d e"], ["e d c b a"], AlignSettings())
    assert "line 1: 5 source pieces" in caplog.text and "line 1: 5 target pieces" in caplog.text
    assert links == anti_diagonal(3)  # the first 3 target words on the first 3 source words


def test_align_pairs_refuses_a_model_without_attention_and_unequal_sides():
    with pytest.raises(AlignmentError, match="no attention weights"):
        align_pairs(toy_translator(with_attention=False), ["a"], ["a"], AlignSettings())
    with pytest.raises(ValueError, match="2 sources but 1 targets"):
        align_pairs(toy_translator(), ["a", "b"], ["a"], AlignSettings())


@pytest.mark.parametrize(
    ("text", "lang", "read"),
    [
        ("他 很 忙 。", "zh", "他很忙。"),  # pre-segmented Chinese, as the README writes it
        ("他很忙。", "cmn", "他很忙。"),
        ("猫 が 好き", "ja", "猫が好き"),
        ("He is busy .", "en", "He is busy."),  # split-off punctuation
        ("He is busy.", "en", "He is busy."),
        ("나는 학생이다 .", "ko", "나는 학생이다."),  # Korean keeps its spaces
        ("c b a", "toy", "c b a"),
    ],
)
def test_each_side_is_read_as_the_model_was_trained(text, lang, read):
    assert as_the_model_reads(text, lang) == read


def test_the_shipped_gold_is_read_as_valid_aer_reads_it():
    for part in PARTS:
        for pair in gold_set("zh", "en", part):
            assert as_the_model_reads(pair.source, "zh") == as_in_corpus(pair.source, "zh")
            assert as_the_model_reads(pair.target, "en") == pair.target


def test_translation_links_use_each_hypothesis_attention():
    reverse = torch.eye(4)[[2, 1, 0, 3]][None, None]  # (1, 1, 4, 4): anti-diagonal, EOS on EOS
    copy = torch.eye(4)[None, None]
    translation = Translation(
        source="a b c",
        source_pieces=["a", "b", "c", "</s>"],
        hypotheses=[Hypothesis([6, 5, 4], -0.1, reverse), Hypothesis([4, 5, 6], -0.2, copy)],
        texts=["c b a", "a b c"],
        target_pieces=[["c", "b", "a", "</s>"], ["a", "b", "c", "</s>"]],
    )
    links = translation_links(toy_translator(), translation, AlignSettings())
    assert links == [anti_diagonal(3), Links.of({(0, 0), (1, 1), (2, 2)})]
    translation.hypotheses[1].attention = None
    with pytest.raises(AlignmentError, match="no attention weights"):
        translation_links(toy_translator(), translation, AlignSettings())


def test_teacher_forced_weights_keep_every_layer_and_head():
    examples = [([4, 5, 6], [6, 5, 4]), ([7], [7, 8])]
    weights = teacher_forced_weights(ReversePointer(), examples, torch.device("cpu"))
    assert [tuple(w.shape) for w in weights] == [(2, 2, 4, 4), (2, 2, 3, 2)]
    summaries = teacher_forced_attention(ReversePointer(), examples, torch.device("cpu"))
    for full, summary in zip(weights, summaries):
        torch.testing.assert_close(summary, full[-1].mean(dim=0))
    assert teacher_forced_weights(ReversePointer(False), examples, torch.device("cpu")) is None


def test_the_visualisation_imports_the_same_teacher_forcing():
    assert visualise_alignment.teacher_forced_attention is align_attention.teacher_forced_attention
    assert visualise_alignment.attention_summary is align_attention.attention_summary


def test_a_joint_tokenizer_reads_each_side_in_its_own_language():
    """One sentencepiece model for both sides is named `<src>-<tgt>`: Chinese is still read
    without spaces on the source side and English as written on the target side."""
    joint = SimpleNamespace(lang="zh-en")
    both = SimpleNamespace(src_tokenizer=joint, tgt_tokenizer=joint)
    assert reading_langs(both) == ("zh", "en")
    apart = SimpleNamespace(
        src_tokenizer=SimpleNamespace(lang="en"), tgt_tokenizer=SimpleNamespace(lang="zh")
    )
    assert reading_langs(apart) == ("en", "zh")
    symbols = SymbolTokenizer(10)  # the toy tasks: one tokenizer of symbols for both sides
    assert (
        reading_langs(SimpleNamespace(src_tokenizer=symbols, tgt_tokenizer=symbols))
        == (symbols.lang,) * 2
    )
