"""Each score function against its formula, written out independently on small tensors."""

from __future__ import annotations

import math

import pytest
import torch

from seq2seq.models.attention import Attention

BATCH, TGT, SRC = 2, 3, 5


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


def test_general_score_is_bilinear_with_different_widths():
    torch.manual_seed(1)
    query, keys = torch.randn(BATCH, TGT, 7), torch.randn(BATCH, SRC, 5)
    attention = Attention(7, 5, score="general")
    bilinear = attention.score.key_map.weight[0].T  # W: (query 7, key 5)
    expected = torch.zeros(BATCH, TGT, SRC)
    for b in range(BATCH):
        for t in range(TGT):
            for s in range(SRC):
                expected[b, t, s] = query[b, t] @ bilinear @ keys[b, s]
    torch.testing.assert_close(raw_scores(attention, query, keys), expected)


def test_additive_score_is_v_tanh_wq_plus_uk():
    torch.manual_seed(2)
    query, keys = torch.randn(BATCH, TGT, 7), torch.randn(BATCH, SRC, 5)
    attention = Attention(7, 5, score="additive", hidden_dim=3)
    w_query = attention.score.query_map.weight[0]  # (7, 3)
    u_key, bias = (
        attention.score.key_map.weight[0],
        attention.score.key_map.bias[0, 0],
    )  # (5, 3), (3,)
    energy = attention.score.energy[0]  # (3,)
    expected = torch.zeros(BATCH, TGT, SRC)
    for b in range(BATCH):
        for t in range(TGT):
            for s in range(SRC):
                expected[b, t, s] = energy @ torch.tanh(
                    query[b, t] @ w_query + keys[b, s] @ u_key + bias
                )
    torch.testing.assert_close(raw_scores(attention, query, keys), expected)


def test_cosine_score_with_fixed_scale():
    torch.manual_seed(3)
    query, keys = torch.randn(BATCH, TGT, 5), torch.randn(BATCH, SRC, 5)
    attention = Attention(5, 5, score="cosine", cosine_scale=2.5)
    expected = 2.5 * torch.nn.functional.cosine_similarity(
        query.unsqueeze(2), keys.unsqueeze(1), dim=-1
    )
    torch.testing.assert_close(raw_scores(attention, query, keys), expected)
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
    cosine = torch.nn.functional.cosine_similarity(
        query.unsqueeze(2), mapped_keys.unsqueeze(1), dim=-1
    )
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


@pytest.mark.parametrize("score", ["dot", "scaled_dot", "general", "additive", "cosine"])
def test_fused_and_explicit_paths_agree_for_every_score(score):
    torch.manual_seed(5)
    width = 5 if score in ("dot", "scaled_dot") else 7
    query, keys, values = (
        torch.randn(BATCH, TGT, width),
        torch.randn(BATCH, SRC, 5),
        torch.randn(BATCH, SRC, 3),
    )
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    attention = Attention(width, 5, 3, score=score)
    explicit, weights = attention(query, keys, values, mask)
    fast, _ = attention(query, keys, values, mask, need_weights=False)
    torch.testing.assert_close(fast, explicit)
    assert weights[1, ..., 2:].abs().max() == 0


@pytest.mark.parametrize("score", ["additive", "general"])
def test_gradcheck_soft_scores(score):
    torch.manual_seed(6)
    attention = Attention(3, 5, 7, score=score).double()
    query = torch.randn(2, 3, 3, dtype=torch.float64, requires_grad=True)
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
