"""Alignment accuracy against hand-computed values, and the teacher-forced attention."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from seq2seq.metrics.alignment_accuracy import Link, alignment_accuracy, toy_links
from seq2seq.special_tokens import BOS_ID, EOS_ID, PAD_ID
from seq2seq.visualise.alignment import (
    attention_summary,
    teacher_forced_attention,
    toy_alignment_accuracy,
)


def _peaked(columns: list[int], src_len: int) -> torch.Tensor:
    """(len(columns), src_len) rows that put 0.6 on `columns[t]` and share the rest."""
    weights = torch.full((len(columns), src_len), 0.4 / (src_len - 1))
    weights[torch.arange(len(columns)), torch.tensor(columns)] = 0.6
    return weights


def test_toy_links_are_the_diagonal_for_copy_and_the_anti_diagonal_for_reverse():
    assert toy_links("copy", 3) == [
        Link(0, frozenset({0})),
        Link(1, frozenset({1})),
        Link(2, frozenset({2})),
    ]
    assert [link.sources for link in toy_links("reverse", 3)] == [{2}, {1}, {0}]


def test_perfect_diagonal_scores_one_and_a_shifted_diagonal_zero():
    n = 5  # 5 symbols, then the EOS row and column
    diagonal = _peaked([0, 1, 2, 3, 4, 5], n + 1)  # EOS row on the EOS column
    shifted = _peaked([1, 2, 3, 4, 5, 0], n + 1)  # every symbol one to the right
    assert alignment_accuracy([diagonal], [toy_links("copy", n)]) == 1.0
    assert alignment_accuracy([shifted], [toy_links("copy", n)]) == 0.0


def test_reverse_wants_the_anti_diagonal():
    n = 5
    anti_diagonal = _peaked([4, 3, 2, 1, 0, 5], n + 1)
    diagonal = _peaked([0, 1, 2, 3, 4, 5], n + 1)
    assert alignment_accuracy([anti_diagonal], [toy_links("reverse", n)]) == 1.0
    # The diagonal crosses the anti-diagonal only in the middle: 1 of 5 links.
    assert alignment_accuracy([diagonal], [toy_links("reverse", n)]) == pytest.approx(1 / 5)


def test_the_eos_row_is_not_scored_and_links_pool_over_sentences():
    # Sentence 1 (3 symbols): rows 0, 1 right, row 2 wrong, EOS row wrong (not counted).
    first = _peaked([0, 1, 0, 0], 4)
    # Sentence 2 (2 symbols): both right.
    second = _peaked([0, 1, 0], 3)
    accuracy = alignment_accuracy([first, second], [toy_links("copy", 3), toy_links("copy", 2)])
    assert accuracy == pytest.approx(4 / 5)


def test_a_link_with_several_sources_counts_any_of_them_and_ties_go_to_the_first():
    weights = torch.tensor([[0.1, 0.45, 0.45], [0.5, 0.5, 0.0]])
    links = [Link(0, frozenset({2, 1})), Link(1, frozenset({1}))]
    assert alignment_accuracy([weights], [links]) == 0.5  # row 1's tie picks column 0


def test_no_links_gives_none_and_bad_input_is_refused():
    assert alignment_accuracy([torch.eye(3)], [[]]) is None
    with pytest.raises(ValueError, match="2 attention matrices but 1 link"):
        alignment_accuracy([torch.eye(3), torch.eye(3)], [[]])
    with pytest.raises(ValueError, match="outside its attention matrix"):
        alignment_accuracy([torch.eye(3)], [[Link(3, frozenset({0}))]])
    with pytest.raises(ValueError, match="must be \\(tgt_len, src_len\\)"):
        alignment_accuracy([torch.ones(1, 3, 3)], [[]])


def test_attention_summary_is_the_head_mean_of_the_last_layer():
    attention = torch.arange(2 * 2 * 3 * 1 * 2, dtype=torch.float).reshape(2, 2, 3, 1, 2)
    expected = attention[:, 1].mean(dim=1)  # (batch, tgt_len, src_len)
    torch.testing.assert_close(attention_summary(attention), expected)


class _PointingModel(nn.Module):
    """Stand-in for Seq2Seq: its last layer's heads point, on average, at source position
    (t + shift) mod src_len for target row t; a first layer holds noise."""

    def __init__(self, shift: int, with_attention: bool = True):
        super().__init__()
        self.shift, self.with_attention = shift, with_attention
        self.seen: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, bool]] = []

    def forward(self, src, src_mask, tgt_in, need_weights=False):
        self.seen.append((src, src_mask, tgt_in, self.training))
        batch, src_len = src.shape
        tgt_len = tgt_in.size(1)
        rows = (torch.arange(tgt_len) + self.shift) % src_len
        one_hot = torch.nn.functional.one_hot(rows, src_len).float()  # (tgt_len, src_len)
        noise = torch.rand(3, tgt_len, src_len)  # 3 heads
        last = torch.stack([one_hot * 3 - noise[0] - noise[1], noise[1], noise[0]])  # mean: one_hot
        attention = torch.stack([noise, last])[None].expand(batch, -1, -1, -1, -1)
        logits = torch.zeros(batch, tgt_len, 11)
        return logits, (attention if self.with_attention and need_weights else None)


def test_teacher_forcing_feeds_bos_plus_target_and_crops_each_example():
    torch.manual_seed(0)
    model = _PointingModel(shift=0).train()
    examples = [([5, 6, 7], [8, 9]), ([5], [8, 9, 10])]
    matrices = teacher_forced_attention(model, examples, torch.device("cpu"))
    src, src_mask, tgt_in, training = model.seen[0]
    assert src.tolist() == [[5, 6, 7, EOS_ID], [5, EOS_ID, PAD_ID, PAD_ID]]
    assert tgt_in.tolist() == [[BOS_ID, 8, 9, PAD_ID], [BOS_ID, 8, 9, 10]]
    assert not training and model.training  # eval while measuring, mode restored after
    assert [tuple(m.shape) for m in matrices] == [(3, 4), (4, 2)]
    torch.testing.assert_close(matrices[0], torch.eye(4)[:3])


def test_toy_accuracy_of_a_model_pointing_at_the_diagonal_or_beside_it():
    examples = [([5, 6, 7, 8], [5, 6, 7, 8]), ([6, 5, 4], [6, 5, 4])]
    diagonal = _PointingModel(shift=0)
    beside = _PointingModel(shift=1)
    cpu = torch.device("cpu")
    assert toy_alignment_accuracy(diagonal, examples, "copy", cpu) == 1.0
    assert toy_alignment_accuracy(beside, examples, "copy", cpu) == 0.0
    no_attention = _PointingModel(shift=0, with_attention=False)
    assert toy_alignment_accuracy(no_attention, examples, "copy", cpu) is None
