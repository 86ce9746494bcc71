"""Every layer × head and head mean scored on gold links (`GoldAttention.head_scores`): the
known best head is found, each candidate scores as `links_from_attention` would, and ties
keep the default."""

from __future__ import annotations

import torch

from seq2seq.align.extract import AlignSettings, Sentence, links_from_attention
from seq2seq.align.head_choice import candidates, lowest_aer
from seq2seq.align.model_aer import GoldAttention, GoldExample
from seq2seq.align.pharaoh import Links
from seq2seq.metrics.aer import corpus_counts
from seq2seq.special_tokens import EOS_PIECE

# Word pairs whose gold links are the diagonal: target word j ↔ source word j.
PAIRS = [("a b c", "x y z"), ("d e", "u v"), ("f g h i e", "w x y z u")]


def sentence(text: str) -> Sentence:
    """Each word one ▁-piece, then EOS."""
    return Sentence(text, [f"▁{word}" for word in text.split()] + [EOS_PIECE])


def diagonal(length: int) -> Links:
    return Links.of((j, j) for j in range(length))


def score_heads(attentions, pairs, gold, base=None):
    """The head scores of the pairs' attention (no ids: the attention is given)."""
    examples = [GoldExample([], [], source, target, links)
                for (source, target), links in zip(pairs, gold, strict=True)]  # fmt: skip
    return GoldAttention(examples, attentions).head_scores(base)


def attention_with_one_gold_head(length: int) -> torch.Tensor:
    """(2 layers, 3 heads, T, S) with T = S = length + 1 (EOS): layer 0 head 2 is exactly
    the diagonal, the others look at the anti-diagonal or spread evenly."""
    size = length + 1
    anti = torch.eye(size).flip(0)
    uniform = torch.full((size, size), 1.0 / size)
    attention = torch.stack([torch.stack([anti, uniform, torch.eye(size)]),
                             torch.stack([uniform, anti, uniform])])  # fmt: skip
    return attention


def test_the_exact_diagonal_head_has_the_lowest_aer():
    pairs = [(sentence(source), sentence(target)) for source, target in PAIRS]
    gold = [diagonal(len(source.split())) for source, _ in PAIRS]
    attentions = [attention_with_one_gold_head(len(source.split())) for source, _ in PAIRS]
    scores = score_heads(attentions, pairs, gold)
    best = lowest_aer(scores)
    assert (best.settings.layer, best.settings.head, best.aer) == (0, 2, 0.0)
    assert [(s.settings.layer, s.settings.head) for s in scores] == [
        (1, None), (0, None), (0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2),
    ]  # fmt: skip
    assert all(score.aer > 0 for score in scores if score is not best)


def test_every_candidate_scores_as_links_from_attention():
    torch.manual_seed(5)
    pairs = [(sentence(source), sentence(target)) for source, target in PAIRS]
    gold = [diagonal(len(source.split())) for source, _ in PAIRS]
    attentions = [torch.rand(3, 2, len(t.pieces), len(s.pieces)).softmax(-1) for s, t in pairs]
    for base in (AlignSettings(), AlignSettings(extract="threshold", threshold=0.3)):
        for score in score_heads(attentions, pairs, gold, base):
            assert score.settings.extract == base.extract
            proposed = [
                links_from_attention(attention, source, target, score.settings)
                for attention, (source, target) in zip(attentions, pairs)
            ]
            assert score.counts == corpus_counts(proposed, gold)


def test_ties_keep_the_last_layer_head_mean_and_one_head_scores_its_means_only():
    pairs = [(sentence("a b"), sentence("x y"))]
    flat = [torch.full((2, 3, 3, 3), 1.0 / 3)]  # every candidate alike
    best = lowest_aer(score_heads(flat, pairs, [diagonal(2)]))
    assert (best.settings.layer, best.settings.head) == (1, None)
    assert [(s.layer, s.head) for s in candidates(2, 1)] == [(1, None), (0, None)]
    assert score_heads([], [], []) == [] and lowest_aer([]) is None
