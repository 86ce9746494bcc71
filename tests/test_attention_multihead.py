"""Multi-head attention against torch's own implementations, causality, and the call API."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from seq2seq.models.attention import Attention

BATCH, HEADS, HEAD_DIM = 2, 3, 4
MODEL_DIM = HEADS * HEAD_DIM  # 12


def projections(attention: Attention, query, keys, values):
    """Q, K, V per head `(batch, heads, time, head_dim)` from the module's own linear maps."""

    def split(x):
        return x.view(x.size(0), x.size(1), HEADS, HEAD_DIM).transpose(1, 2)

    return (
        split(attention.query_proj(query)),
        split(attention.key_proj(keys)),
        split(attention.value_proj(values)),
    )


def reference(attention: Attention, query, keys, values, attn_mask=None, is_causal=False):
    """`W_O · concat(SDPA(Q, K, V))` computed with torch's fused kernel."""
    q, k, v = projections(attention, query, keys, values)
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal)
    return attention.output_proj(
        heads.transpose(1, 2).reshape(query.size(0), query.size(1), MODEL_DIM)
    )


def make_inputs(seed: int, tgt: int = 3, src: int = 5):
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(BATCH, tgt, 7, generator=generator)
    keys = torch.randn(BATCH, src, 5, generator=generator)
    values = torch.randn(BATCH, src, MODEL_DIM, generator=generator)
    return query, keys, values


@pytest.fixture
def attention() -> Attention:
    torch.manual_seed(0)
    return Attention(7, 5, MODEL_DIM, score="scaled_dot", heads=HEADS)


@pytest.mark.parametrize("need_weights", [True, False])
def test_matches_sdpa_given_the_same_projections(attention, need_weights):
    query, keys, values = make_inputs(1)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    context, weights = attention(query, keys, values, mask, need_weights=need_weights)
    torch.testing.assert_close(
        context, reference(attention, query, keys, values, mask[:, None, None, :])
    )
    if need_weights:
        q, k, _ = projections(attention, query, keys, values)
        scores = (q @ k.transpose(-1, -2) / HEAD_DIM**0.5).masked_fill(
            ~mask[:, None, None, :], float("-inf")
        )
        torch.testing.assert_close(weights, torch.softmax(scores, dim=-1))
    else:
        assert weights is None


@pytest.mark.parametrize("need_weights", [True, False])
def test_matches_nn_multihead_attention(need_weights):
    torch.manual_seed(2)
    ours = Attention(MODEL_DIM, 5, MODEL_DIM, score="scaled_dot", heads=HEADS)
    theirs = nn.MultiheadAttention(MODEL_DIM, HEADS, kdim=5, vdim=MODEL_DIM, batch_first=True)
    with torch.no_grad():
        theirs.q_proj_weight.copy_(ours.query_proj.weight)
        theirs.k_proj_weight.copy_(ours.key_proj.weight)
        theirs.v_proj_weight.copy_(ours.value_proj.weight)
        theirs.in_proj_bias.copy_(
            torch.cat([ours.query_proj.bias, ours.key_proj.bias, ours.value_proj.bias])
        )
        theirs.out_proj.weight.copy_(ours.output_proj.weight)
        theirs.out_proj.bias.copy_(ours.output_proj.bias)
    query = torch.randn(BATCH, 3, MODEL_DIM)
    _, keys, values = make_inputs(3)
    mask = torch.tensor([[True] * 4 + [False], [True] * 5])
    context, weights = ours(query, keys, values, mask, need_weights=need_weights)
    expected, expected_weights = theirs(
        query, keys, values, key_padding_mask=~mask, average_attn_weights=False
    )
    torch.testing.assert_close(context, expected)
    if need_weights:
        torch.testing.assert_close(weights, expected_weights)


@pytest.mark.parametrize("need_weights", [True, False])
def test_causal_self_attention_matches_sdpa_is_causal(attention, need_weights):
    _, keys, values = make_inputs(4, src=5)
    query = torch.randn(BATCH, 5, 7)
    context, _ = attention(query, keys, values, causal=True, need_weights=need_weights)
    torch.testing.assert_close(context, reference(attention, query, keys, values, is_causal=True))


@pytest.mark.parametrize("need_weights", [True, False])
def test_causal_with_fewer_queries_than_keys_uses_the_last_positions(attention, need_weights):
    query, keys, values = make_inputs(5, tgt=2, src=5)
    mask = torch.tensor([[True] * 5, [True] * 5])
    allowed = torch.tensor(
        [[True, True, True, True, False], [True] * 5]
    )  # queries at positions 3, 4
    context, _ = attention(query, keys, values, mask, causal=True, need_weights=need_weights)
    torch.testing.assert_close(context, reference(attention, query, keys, values, allowed))


@pytest.mark.parametrize("need_weights", [True, False])
def test_incremental_decoding_equals_the_full_causal_pass(attention, need_weights):
    _, keys, values = make_inputs(6, src=5)
    query = torch.randn(BATCH, 5, 7)
    full, full_weights = attention(query, keys, values, causal=True)
    proj_keys, proj_values = attention.project_memory(keys, values)
    for step in range(5):  # a self-attention cache: keys 0..step, one query (T=1, S=step+1)
        context, weights = attention.attend(
            query[:, step : step + 1],
            proj_keys[:, :, : step + 1],
            proj_values[:, :, : step + 1],
            causal=True,
            need_weights=need_weights,
        )
        torch.testing.assert_close(context, full[:, step : step + 1])
        if need_weights:
            torch.testing.assert_close(weights, full_weights[:, :, step : step + 1, : step + 1])


@pytest.mark.parametrize("need_weights", [True, False])
def test_a_query_without_a_visible_key_reads_nothing_and_the_others_are_unchanged(
    attention, need_weights
):
    """The first sentence has no key to see: its heads' context is zero (the output is the
    output layer's bias); the fused path zeroes exactly that row, and only when one exists."""
    query, keys, values = make_inputs(8, tgt=3, src=4)
    mask = torch.ones(BATCH, 4, dtype=torch.bool)
    mask[0] = False
    context, _ = attention(query, keys, values, mask, need_weights=need_weights)
    nothing = attention.output_proj(torch.zeros(3, MODEL_DIM))
    torch.testing.assert_close(context[0], nothing)
    torch.testing.assert_close(context[1:], reference(attention, query[1:], keys[1:], values[1:]))
    everything, _ = attention(query, keys, values, torch.ones_like(mask), need_weights=False)
    torch.testing.assert_close(everything, reference(attention, query, keys, values))


def test_fused_kernel_runs_exactly_when_weights_are_not_needed(attention, monkeypatch):
    calls = []
    original = F.scaled_dot_product_attention

    def counting_sdpa(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", counting_sdpa)
    inputs = make_inputs(7)
    assert attention(*inputs, need_weights=True)[1] is not None and not calls
    assert attention(*inputs, need_weights=False)[1] is None and len(calls) == 1
    additive = Attention(7, 5, MODEL_DIM, score="additive", heads=HEADS)
    assert additive(*inputs, need_weights=False)[1] is not None and len(calls) == 1


def test_head_dim_can_differ_from_value_dim_over_heads():
    attention = Attention(7, 5, 6, score="general", heads=4, head_dim=3)
    context, weights = attention(
        *[t[..., :w] for t, w in zip(make_inputs(10), (7, 5, 6), strict=True)]
    )
    assert attention.query_proj.out_features == 12 and context.shape == (BATCH, 3, 6)
    assert weights.shape == (BATCH, 4, 3, 5)


def test_weights_dropout_only_in_training():
    torch.manual_seed(11)
    attention = Attention(7, 5, MODEL_DIM, score="scaled_dot", heads=HEADS, dropout=0.5)
    inputs = make_inputs(12)
    eval_context, _ = attention.eval()(*inputs)
    torch.testing.assert_close(attention(*inputs)[0], eval_context)
    assert not torch.allclose(attention.train()(*inputs)[0], eval_context)
