"""Regions (soft, sparsemax, entmax15, hard, local), masks and causality: which keys get
weight, and how much.

What every registered region owes (hidden keys get exactly 0, an empty row is 0 with finite
gradients, one query at a time = all, inside a decoder too) is the contract suite's
(`seq2seq.testing`, tests/test_contracts.py); here are each region's own equations."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from seq2seq import registry
from seq2seq.models.attention import Attention
from seq2seq.models.attention.regions import build_region

BATCH, TGT, SRC = 2, 3, 7
MASK = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])  # row 1 has 4 real keys

# Every registered region at its defaults, and local attention's other mode.
REGION_SETTINGS = [{"region": name} for name in registry.names("region")] + [
    {"region": {"name": "local", "mode": "monotonic", "window": 1}}
]


def make_inputs(
    seed: int, query_dim: int = 5, key_dim: int = 5, value_dim: int = 3, tgt: int = TGT
):
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(BATCH, tgt, query_dim, generator=generator)
    keys = torch.randn(BATCH, SRC, key_dim, generator=generator)
    values = torch.randn(BATCH, SRC, value_dim, generator=generator)
    return query, keys, values


@pytest.mark.parametrize("region", ["soft", "sparsemax", "entmax15", "hard"])
def test_weights_sum_to_one_over_real_keys(region):
    torch.manual_seed(0)
    attention = Attention(5, 5, 3, score="general", region=region)
    _, weights = attention(*make_inputs(2), MASK)
    torch.testing.assert_close(weights.sum(-1), torch.ones(BATCH, 1, TGT))


@pytest.mark.parametrize("settings", REGION_SETTINGS)
def test_causal_queries_see_only_keys_up_to_their_position(settings):
    torch.manual_seed(0)
    attention = Attention(5, 5, 3, score="dot", **settings)
    query, keys, values = make_inputs(4, tgt=3)
    _, weights = attention(query, keys, values, causal=True)  # queries at positions 4, 5, 6
    for i, position in enumerate(range(SRC - 3, SRC)):
        assert torch.all(weights[:, :, i, position + 1 :] == 0)


def test_hard_is_exact_one_hot_argmax_at_evaluation_and_skips_masked_keys():
    query = torch.tensor([[[1.0, 0.0, 0.0]]])  # (1, 1, 3)
    keys = torch.tensor([[[0.1, 0, 0], [0.5, 0, 0], [0.3, 0, 0], [9.0, 0, 0]]])  # key 3 scores best
    values = torch.arange(12.0).view(1, 4, 3)
    attention = Attention(3, 3, score="dot", region="hard").eval()
    mask = torch.tensor([[True, True, True, False]])  # ... but is padding
    context, weights = attention(query, keys, values, mask)
    assert weights.tolist() == [[[[0.0, 1.0, 0.0, 0.0]]]]
    assert torch.equal(context, values[:, 1:2])


def test_hard_training_samples_one_key_from_the_softmax_and_passes_gradients():
    torch.manual_seed(0)
    samples = 4000
    keys = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]])  # (1, 3, 2)
    query = torch.tensor([1.0, -0.5]).expand(1, samples, 2).clone().requires_grad_(True)
    attention = Attention(2, 2, score="dot", region={"name": "hard", "gumbel_tau": 0.5}).train()
    context, weights = attention(query, keys, keys)
    assert torch.all((weights == 0) | (weights == 1)) and torch.all(weights.sum(-1) == 1)
    frequencies = weights[0, 0].mean(dim=0)  # Gumbel-max: P(key j) = softmax(s)_j
    torch.testing.assert_close(
        frequencies, torch.softmax(torch.tensor([1.0, -0.5, 0.25]), 0), atol=0.03, rtol=0
    )
    context.sum().backward()
    assert query.grad.abs().sum() > 0


SPARSE = ["sparsemax", "entmax15"]


def sparsemax_reference(scores: list[float]) -> list[float]:
    """Martins & Astudillo 2016 in closed form: `p_j = max(s_j − τ, 0)`, `τ = (Σ_{i<=k} s_(i)
    − 1) / k` over the sorted scores, k the largest with `1 + k s_(k) > Σ_{i<=k} s_(i)`."""
    ordered = sorted(scores, reverse=True)
    prefix = [sum(ordered[:k]) for k in range(1, len(ordered) + 1)]
    k = max(k for k in range(1, len(ordered) + 1) if 1 + k * ordered[k - 1] > prefix[k - 1])
    tau = (prefix[k - 1] - 1) / k
    return [max(score - tau, 0.0) for score in scores]


def entmax15_reference(scores: list[float]) -> list[float]:
    """1.5-entmax (Peters et al. 2019) by bisection on τ: `p_j = max(s_j / 2 − τ, 0)²` with
    Σ p_j = 1; the sum falls as τ rises, from >= 1 at max(s)/2 − 1 to 0 at max(s)/2."""
    halves = [score / 2 for score in scores]
    low, high = max(halves) - 1, max(halves)
    for _ in range(100):
        tau = (low + high) / 2
        if sum(max(half - tau, 0.0) ** 2 for half in halves) > 1:
            low = tau
        else:
            high = tau
    return [max(half - high, 0.0) ** 2 for half in halves]


REFERENCES = {"sparsemax": sparsemax_reference, "entmax15": entmax15_reference}


@pytest.mark.parametrize("region", SPARSE)
def test_sparse_regions_give_exact_zeros_and_skip_masked_keys(region):
    double = dict(dtype=torch.float64)
    query = torch.tensor([[[1.0, 0, 0], [2.0, 0, 0]]], **double)  # (1, 2, 3): scores s and 2s
    scores = [1.0, 0.6, 0.2, -0.4, -1.5, 0.9, 9.0]  # key 6 scores best ...
    keys = torch.tensor([[[score, 0, 0] for score in scores]], **double)  # (1, 7, 3)
    mask = torch.tensor([[True] * 5 + [False] * 2])  # ... but keys 5 and 6 are padding
    _, weights = Attention(3, 3, score="dot", region=region)(query, keys, keys, mask)
    for row, scale in enumerate([1, 2]):
        expected = REFERENCES[region]([scale * score for score in scores[:5]]) + [0.0, 0.0]
        assert weights[0, 0, row].tolist() == pytest.approx(expected, abs=1e-12)
        assert (weights[0, 0, row] == 0).tolist() == [share == 0 for share in expected]
        assert 0 < sum(share == 0 for share in expected[:5]) < 4  # sparse, not one-hot
    assert sparsemax_reference(scores[:5])[:3] == pytest.approx([0.7, 0.3, 0.0])


@pytest.mark.parametrize("region", SPARSE)
def test_sparse_regions_match_their_references_on_random_scores(region):
    generator = torch.Generator().manual_seed(11)
    scores = 2 * torch.randn(BATCH, 2, TGT, SRC, generator=generator, dtype=torch.float64)
    visible = MASK[:, None, None, :]  # (batch, 1, 1, src_len)
    weights = build_region(region, 5, 2)(scores, visible, None, None, None)
    for b, h, t in itertools.product(range(BATCH), range(2), range(TGT)):
        row = weights[b, h, t]
        expected = REFERENCES[region](scores[b, h, t][MASK[b]].tolist())
        torch.testing.assert_close(row[MASK[b]], torch.tensor(expected, dtype=torch.float64))
        assert torch.all(row[~MASK[b]] == 0) and row.sum().item() == pytest.approx(1.0)
    assert (weights == 0).any(dim=-1)[0].all()  # every row of 7 real keys has exact zeros


@pytest.mark.parametrize("region", SPARSE)
def test_sparse_regions_never_take_the_fused_kernel(region):
    attention = Attention(6, 6, 6, score="scaled_dot", region=region, heads=2)
    assert not attention.uses_fused_kernel
    context, weights = attention(*make_inputs(12, 6, 6, 6), MASK, need_weights=False)
    assert weights is not None
    torch.testing.assert_close(context, attention(*make_inputs(12, 6, 6, 6), MASK)[0])


def test_local_monotonic_window_is_centred_on_the_clipped_position():
    torch.manual_seed(0)
    window = 1
    local = {"name": "local", "mode": "monotonic", "window": window}
    attention = Attention(5, 5, 3, score="general", region=local)
    query, keys, values = make_inputs(5, tgt=4)
    positions = torch.tensor([0, 2, 5, 6])  # row 1 has 4 real keys: centres 0, 2, 3, 3
    _, weights = attention(query, keys, values, MASK, query_positions=positions)
    scores = attention.score(query.unsqueeze(1), attention.score.project_keys(keys.unsqueeze(1)))[
        :, 0
    ]
    for b, real in enumerate([7, 4]):
        for t, position in enumerate(positions.tolist()):
            centre = min(position, real - 1)
            lo, hi = max(centre - window, 0), min(centre + window, real - 1)
            expected = torch.zeros(SRC)
            expected[lo : hi + 1] = torch.softmax(scores[b, t, lo : hi + 1], dim=0)
            torch.testing.assert_close(weights[b, 0, t], expected)


def test_local_predictive_matches_luong_equations():
    torch.manual_seed(0)
    window = 2
    local = {"name": "local", "mode": "predictive", "window": window}
    attention = Attention(5, 5, 3, score="dot", region=local)
    query, keys, values = make_inputs(6)
    _, weights = attention(query, keys, values, MASK)
    region = attention.region
    w_p, v_p = region.centre_map.weight[0], region.centre_out[0]  # (5, 5), (5,)
    sigma = window / 2
    for b, real in enumerate([7, 4]):
        for t in range(TGT):
            centre = (real - 1) * torch.sigmoid(v_p @ torch.tanh(query[b, t] @ w_p))
            in_window = [s for s in range(real) if abs(s - centre.item()) <= window]
            scores = torch.stack([query[b, t] @ keys[b, s] for s in in_window])
            expected = torch.zeros(SRC)
            for share, s in zip(torch.softmax(scores, 0), in_window, strict=True):
                expected[s] = share * math.exp(-((s - centre.item()) ** 2) / (2 * sigma**2))
            torch.testing.assert_close(weights[b, 0, t], expected)


@pytest.mark.parametrize(
    ("settings", "learning"),
    [
        (dict(region={"name": "local", "window": 2}), "region.centre_out"),  # local-p's predictor
        (dict(region="sparsemax"), "score.key_map.weight"),
        (dict(region="entmax15"), "score.key_map.weight"),
    ],
)
def test_gradcheck_and_the_gradient_reaches_the_parameters(settings, learning):
    torch.manual_seed(7)
    attention = Attention(3, 5, 3, score="general", **settings).double()
    generator = torch.Generator().manual_seed(8)
    query = torch.randn(2, 3, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    keys = torch.randn(2, 7, 5, dtype=torch.float64, generator=generator, requires_grad=True)
    values = torch.randn(2, 7, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda q, k, v: attention(q, k, v, MASK)[0], (query, keys, values)
    )
    attention(query, keys, values, MASK)[0].sum().backward()
    assert attention.get_parameter(learning).grad.abs().sum() > 0


def test_local_rejects_bad_settings():
    with pytest.raises(ValueError, match="region.mode must be one of predictive, monotonic"):
        Attention(5, 5, region={"name": "local", "mode": "sideways"})
    with pytest.raises(ValueError, match="region.window must be an integer of at least 1"):
        Attention(5, 5, region={"name": "local", "window": 0})
    with pytest.raises(ValueError, match=r"region.gumbel_tau must be a finite number > 0"):
        Attention(5, 5, region={"name": "hard", "gumbel_tau": 0.0})
    with pytest.raises(ValueError, match="query_positions"):
        Attention(5, 5, region={"name": "local", "mode": "monotonic"})(
            torch.randn(1, 3, 5),
            torch.randn(1, 4, 5),
            torch.randn(1, 4, 5),
            query_positions=torch.zeros(2),
        )


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "settings",
    [
        dict(score="additive"),
        dict(score="scaled_dot", heads=4),
        dict(score="general", region="local"),
        dict(score="additive", region="sparsemax"),
        dict(score="scaled_dot", region="entmax15", heads=4),
    ],
)
@pytest.mark.parametrize("need_weights", [True, False])
def test_bf16_autocast_is_close_to_float32(device, settings, need_weights):
    torch.manual_seed(0)
    attention = Attention(8, 8, **settings).to(device)
    query, keys, values = (tensor.to(device) for tensor in make_inputs(9, 8, 8, 8))
    mask = MASK.to(device)
    reference, _ = attention(query, keys, values, mask)
    with torch.autocast(device, dtype=torch.bfloat16):
        context, weights = attention(query, keys, values, mask, need_weights=need_weights)
    torch.testing.assert_close(context.float(), reference, atol=0.05, rtol=0.05)
    if weights is not None:
        assert torch.all(weights[1, ..., 4:] == 0)
