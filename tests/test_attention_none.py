"""NoAttention: one fixed context, the masked mean of the values, whatever the query."""

from __future__ import annotations

import pytest
import torch

from seq2seq.models.attention import NoAttention


def test_context_is_the_masked_mean_and_ignores_the_query():
    torch.manual_seed(0)
    keys, values = torch.randn(2, 5, 3), torch.randn(2, 5, 7)
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    no_attention = NoAttention(4, 3, 7)
    context, weights = no_attention(torch.randn(2, 3, 4), keys, values, mask)
    other_context, _ = no_attention(100 * torch.randn(2, 3, 4), keys, values, mask)
    assert weights is None and no_attention.output_dim == 7 and no_attention.heads == 1
    expected = torch.stack([values[0].mean(dim=0), values[1, :2].mean(dim=0)])  # (2, 7)
    torch.testing.assert_close(context, expected.unsqueeze(1).expand(2, 3, 7))
    torch.testing.assert_close(other_context, context)


def test_project_memory_then_attend_equals_forward_and_empty_rows_are_zero():
    keys = values = torch.randn(2, 4, 3)
    mask = torch.tensor([[True] * 4, [False] * 4])
    no_attention = NoAttention(3, 3)
    query = torch.randn(2, 1, 3)
    context, _ = no_attention.attend(query, *no_attention.project_memory(keys, values), mask)
    torch.testing.assert_close(context, no_attention(query, keys, values, mask)[0])
    assert torch.all(context[1] == 0)


def test_causal_averages_the_visible_prefix():
    values = torch.arange(8.0).view(1, 4, 2)
    context, _ = NoAttention(2, 2)(torch.zeros(1, 4, 2), values, values, causal=True)
    expected = torch.stack([values[0, : i + 1].mean(dim=0) for i in range(4)]).unsqueeze(0)
    torch.testing.assert_close(context, expected)


def test_rejects_unknown_options_and_bad_shapes():
    with pytest.raises(TypeError):
        NoAttention(3, 3, score="dot")
    with pytest.raises(ValueError, match="query must be"):
        NoAttention(3, 3)(torch.randn(1, 2, 4), torch.randn(1, 4, 3), torch.randn(1, 4, 3))
