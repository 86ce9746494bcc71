"""The built-in score functions against their formulas, written out independently on small
tensors (`REFERENCE_SCORES`). What every registered score owes (shapes, masking, one query
at a time = all, the fused kernel = the explicit path, gradients, FLOPs, a preset, learning)
is the contract suite's (`seq2seq.testing`, tests/test_contracts.py), so a new score needs
no case here."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import torch
import torch.nn.functional as F

from seq2seq import registry
from seq2seq.models.attention import Attention

BATCH, TGT, SRC = 2, 3, 5
COSINE_SCALE = 2.5  # a fixed γ


def raw_scores(attention: Attention, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Single-head scores `(batch, tgt_len, src_len)` from the module's score function."""
    proj_keys = attention.score.project_keys(keys.unsqueeze(1))
    return attention.score(query.unsqueeze(1), proj_keys).squeeze(1)


def test_dot_and_scaled_dot_on_hand_built_vectors():
    query = torch.tensor([[[1.0, 2.0, 0.0]]])  # (1, 1, 3)
    keys = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 0.0, 4.0]]])
    dot = Attention(3, 3, score="dot")
    scaled = Attention(3, 3, score="scaled_dot")
    expected = torch.tensor([[[1.0, 2.0, 3.0, 0.0]]])
    torch.testing.assert_close(raw_scores(dot, query, keys), expected)
    torch.testing.assert_close(raw_scores(scaled, query, keys), expected / math.sqrt(3))


def test_soft_weights_and_context_follow_the_scores():
    torch.manual_seed(0)
    query, keys, values = (
        torch.randn(BATCH, TGT, 7),
        torch.randn(BATCH, SRC, 7),
        torch.randn(BATCH, SRC, 3),
    )
    attention = Attention(7, 7, 3, score="dot")
    context, weights = attention(query, keys, values)
    expected_scores = torch.einsum("bti,bsi->bts", query, keys)
    expected_weights = torch.softmax(expected_scores, dim=-1)
    torch.testing.assert_close(weights.squeeze(1), expected_weights)
    expected_context = (expected_weights.unsqueeze(-1) * values.unsqueeze(1)).sum(dim=2)
    torch.testing.assert_close(context, expected_context)


# ------------------------------------------------------------- one reference per score


@dataclass(frozen=True)
class ScoreCase:
    """How to build a score (query width, the options of its node `{name, **options}`) and
    its formula written out independently:
    `expected(attention, query (B, T, q), keys (B, S, k)) -> (B, T, S)`."""

    query_dim: int
    expected: Callable[[Attention, torch.Tensor, torch.Tensor], torch.Tensor]
    options: dict = field(default_factory=dict)


def pairwise(score: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], query, keys):
    """`score(q_t, k_s)` for every (b, t, s), one pair at a time."""
    expected = torch.zeros(query.size(0), query.size(1), keys.size(1))
    for b in range(query.size(0)):
        for t in range(query.size(1)):
            for s in range(keys.size(1)):
                expected[b, t, s] = score(query[b, t], keys[b, s])
    return expected


def general(attention, query, keys):
    bilinear = attention.score.key_map.weight[0].T  # W: (query, key)
    return pairwise(lambda q, k: q @ bilinear @ k, query, keys)


def additive(attention, query, keys):
    w_query = attention.score.query_map.weight[0]  # (query, hidden)
    u_key, bias = attention.score.key_map.weight[0], attention.score.key_map.bias[0, 0]
    energy = attention.score.energy[0]  # (hidden,)
    return pairwise(lambda q, k: energy @ torch.tanh(q @ w_query + k @ u_key + bias), query, keys)


def cosine(attention, query, keys):
    return COSINE_SCALE * F.cosine_similarity(query.unsqueeze(2), keys.unsqueeze(1), dim=-1)


# The built-in scores' formulas, each written out independently.
REFERENCE_SCORES = {
    "dot": ScoreCase(5, lambda attention, q, k: pairwise(torch.dot, q, k)),
    "scaled_dot": ScoreCase(5, lambda attention, q, k: pairwise(torch.dot, q, k) / math.sqrt(5)),
    "general": ScoreCase(7, general),  # bilinear across different widths
    "additive": ScoreCase(7, additive, {"hidden_dim": 3}),
    "cosine": ScoreCase(5, cosine, {"scale": COSINE_SCALE}),
}


@pytest.mark.parametrize("name", sorted(REFERENCE_SCORES))
def test_each_built_in_score_follows_its_formula(name):
    case = REFERENCE_SCORES[name]
    torch.manual_seed(1)
    query, keys = torch.randn(BATCH, TGT, case.query_dim), torch.randn(BATCH, SRC, 5)
    attention = Attention(case.query_dim, 5, score={"name": name, **case.options})
    torch.testing.assert_close(
        raw_scores(attention, query, keys), case.expected(attention, query, keys)
    )


def test_cosine_with_a_fixed_scale_has_no_parameters():
    attention = Attention(5, 5, score={"name": "cosine", "scale": COSINE_SCALE})
    assert not any(p.requires_grad for p in attention.parameters())  # γ fixed, no projection


def test_cosine_projects_keys_of_another_width_and_learns_its_scale():
    torch.manual_seed(4)
    query, keys, values = (
        torch.randn(BATCH, TGT, 7),
        torch.randn(BATCH, SRC, 5),
        torch.randn(BATCH, SRC, 3),
    )
    attention = Attention(7, 5, 3, score="cosine")
    mapped_keys = keys @ attention.score.key_map.weight[0]  # (batch, src, 7)
    cosine = F.cosine_similarity(query.unsqueeze(2), mapped_keys.unsqueeze(1), dim=-1)
    torch.testing.assert_close(raw_scores(attention, query, keys), 10.0 * cosine)
    context, _ = attention(query, keys, values)
    context.square().sum().backward()
    assert attention.score.gamma.grad is not None and attention.score.gamma.grad.abs().sum() > 0


@pytest.mark.parametrize("score", ["dot", "scaled_dot"])
def test_dot_scores_reject_different_widths(score):
    with pytest.raises(ValueError, match="query_dim == key_dim"):
        Attention(7, 5, score=score)


def test_dot_scores_accept_different_widths_with_heads():
    attention = Attention(7, 5, 6, score="dot", heads=2)  # per-head projections make widths equal
    context, weights = attention(torch.randn(1, 3, 7), torch.randn(1, 5, 5), torch.randn(1, 5, 6))
    assert context.shape == (1, 3, 6) and weights.shape == (1, 2, 3, 5)


@pytest.mark.parametrize("score", registry.names("score"))
def test_gradcheck_soft_scores(score):
    torch.manual_seed(6)
    width = 5  # the keys' width: every score compares queries and keys of one width
    attention = Attention(width, 5, 7, score=score).double()
    query = torch.randn(2, 3, width, dtype=torch.float64, requires_grad=True)
    keys = torch.randn(2, 5, 5, dtype=torch.float64, requires_grad=True)
    values = torch.randn(2, 5, 7, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    assert torch.autograd.gradcheck(
        lambda q, k, v: attention(q, k, v, mask)[0], (query, keys, values)
    )


def test_bad_arguments_give_clear_errors():
    with pytest.raises(ValueError, match="score must be one of"):
        Attention(5, 5, score="bilinearr")
    with pytest.raises(ValueError, match="region must be one of"):
        Attention(5, 5, region="global")
    with pytest.raises(ValueError, match="not divisible by heads"):
        Attention(5, 5, 5, heads=2)
    with pytest.raises(ValueError, match="dropout"):
        Attention(5, 5, dropout=1.0)
    attention = Attention(5, 5)
    keys = torch.randn(1, 4, 5)
    with pytest.raises(ValueError, match="query must be"):
        attention(torch.randn(1, 2, 3), keys, keys)
    with pytest.raises(ValueError, match="mask must be bool"):
        attention(torch.randn(1, 2, 5), keys, keys, torch.ones(1, 4))
    with pytest.raises(ValueError, match="mask must be"):
        attention(torch.randn(1, 2, 5), keys, keys, torch.ones(1, 3, dtype=torch.bool))
