"""Regions: which keys get weight and how scores become weights ("计算区域", docs/attention-taxonomy.md).

* soft:      a softmax over every visible key.
* sparsemax: a Euclidean projection onto the simplex: keys far below the best get exactly 0
             (Martins & Astudillo 2016).
* entmax15:  1.5-entmax, between softmax and sparsemax (Peters, Niculae & Martins 2019).
* hard:      exactly one key gets weight 1 (straight-through Gumbel-softmax or REINFORCE).
* local:     a softmax inside a window of 2D+1 keys around a centre (Luong et al. 2015, §3.2).

Every region maps scores `(batch, heads, tgt_len, src_len)` and the bool `visible`
`(batch or 1, 1, tgt_len, src_len)` (True = the query may see the key) to weights of the
same shape as the scores. Hidden keys get exactly 0; a row with no visible key gets all
zeros (never NaN).

Each region is registered under its name (`seq2seq.registry`, group "region") with the
dataclass of its options (`options=LocalOptions`; none for a region without options) and
its FLOP formula, the static method `flops`. Its options are the node `attention.region`
(`{name: local, window: 3, mode: monotonic}`, `seq2seq.models.attention.options`), and every
region is built as `cls(query_width, heads, **options)` by `build_region`, which checks them
against the dataclass first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import entmax
import torch
from torch import nn

from seq2seq import registry
from seq2seq.models.attention.head_maps import HeadLinear
from seq2seq.models.attention.options import component_node
from seq2seq.models.costs import linear
from seq2seq.option_rules import at_least, greater_than

LOCAL_MODES = ("predictive", "monotonic")
LocalMode = Enum("LocalMode", {mode: mode for mode in LOCAL_MODES})  # the schema's choice
HARD_ESTIMATORS = ("straight_through", "reinforce")
HardEstimator = Enum("HardEstimator", {name: name for name in HARD_ESTIMATORS})
BASELINE_DECAY = 0.9  # β of the REINFORCE baseline's moving average


def masked_softmax(scores: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """`α_j = exp(s_j) / Σ_{visible i} exp(s_i)` on visible keys, exactly 0 elsewhere.

    Hidden keys are filled with the most negative finite number (not -inf), so a row
    with no visible key is a harmless uniform softmax that is then zeroed: no NaN in the
    values or the gradients.
    """
    filled = scores.masked_fill(~visible, torch.finfo(scores.dtype).min)
    return torch.softmax(filled, dim=-1).masked_fill(~visible, 0.0)


ENTMAX = {2.0: entmax.sparsemax, 1.5: entmax.entmax15}  # α -> the entmax package's function


def masked_entmax(scores: torch.Tensor, visible: torch.Tensor, alpha: float) -> torch.Tensor:
    """α-entmax (α = 2: sparsemax, α = 1.5: entmax15) over visible keys, exactly 0 elsewhere.

    `p_j = [(α − 1) s_j − τ]_+^{1/(α−1)}` with τ such that Σ p = 1; every p_j is at most 1,
    so `(α − 1) s_max − τ <= 1` and a key scoring more than `1/(α − 1)` below the best gets
    exactly 0. Hidden keys are filled with a finite score `1/(α − 1) + 1` below the best
    visible one: outside the support, they change no weight. (The entmax package fails on a
    row of -inf, as `-inf − (-inf)` is NaN, and with the most negative float its sums
    overflow.) A row with no visible key is constant, a harmless uniform result that is then
    zeroed. Computed in at least float32, returned in the dtype of the scores.
    """
    dtype = torch.promote_types(scores.dtype, torch.float32)
    wide = scores.to(dtype)
    best = wide.masked_fill(~visible, torch.finfo(dtype).min).amax(dim=-1, keepdim=True)
    floor = best.detach() - (1 / (alpha - 1) + 1)  # (batch, heads, tgt_len, 1)
    weights = ENTMAX[alpha](torch.where(visible, wide, floor), dim=-1)
    return weights.masked_fill(~visible, 0.0).to(scores.dtype)


def masked_log_softmax(scores: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """`log α_j = s_j − log Σ_{visible i} exp(s_i)` on visible keys, 0 elsewhere (a finite
    stand-in, never -inf: a hidden key is never chosen, and 0 · log α stays 0); in at least
    float32. A row with no visible key is finite too, with zero gradients."""
    dtype = torch.promote_types(scores.dtype, torch.float32)
    filled = scores.to(dtype).masked_fill(~visible, torch.finfo(dtype).min)
    return torch.log_softmax(filled, dim=-1).masked_fill(~visible, 0.0)


def one_hot_argmax(scores: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """1 at the best visible key of each row, 0 elsewhere (all 0 if no key is visible)."""
    best = scores.masked_fill(~visible, float("-inf")).argmax(dim=-1, keepdim=True)  # (..., 1)
    one_hot = torch.zeros_like(scores).scatter_(-1, best, 1.0)
    return one_hot.masked_fill(~visible, 0.0)


def gumbel_noise(like: torch.Tensor) -> torch.Tensor:
    """Gumbel(0, 1) samples `g = -log(-log u)`, `u ~ U(0, 1)`, at least float32 precision."""
    dtype = torch.promote_types(like.dtype, torch.float32)
    finfo = torch.finfo(dtype)
    uniform = torch.rand(like.shape, dtype=dtype, device=like.device).clamp(
        finfo.tiny, 1 - finfo.eps
    )
    return -torch.log(-torch.log(uniform))


class Region(nn.Module):
    """Scores -> weights. Soft and hard use only `scores` and `visible`.

    A registered region also has the static method `flops(query_rows, width, **options)
    -> int`: the matrix-product FLOPs of its own for `query_rows` = batch·heads·tgt_len
    queries of width `width` (used by `seq2seq.flops`).
    """

    def __init__(self, query_width: int, heads: int):
        super().__init__()

    def forward(
        self,
        scores: torch.Tensor,  # (batch, heads, tgt_len, src_len)
        visible: torch.Tensor,  # (batch or 1, 1, tgt_len, src_len) bool
        query: torch.Tensor,  # (batch, heads, tgt_len, query_width), for local-p
        query_positions: torch.Tensor,  # (batch or 1, tgt_len) long, for local-m
        lengths: torch.Tensor,  # (batch,) long, real keys per row, for local
    ) -> torch.Tensor:
        raise NotImplementedError

    @staticmethod
    def flops(query_rows: int, width: int, **options) -> int:
        """Normalising scores is element-wise: no products, whatever the options."""
        return 0


@registry.register("region", "soft")
class SoftRegion(Region):
    """`α = softmax(s)` over all visible keys (Bahdanau et al. 2015; Luong's global attention)."""

    def forward(self, scores, visible, query, query_positions, lengths):
        return masked_softmax(scores, visible)


class EntmaxRegion(Region):
    """Weights `p = α-entmax(s)` over the visible keys (Peters, Niculae & Martins 2019), α > 1
    its parameter (not the attention weights):

        α-entmax(s) = argmax_{p ∈ Δ} pᵀs + H_α(p),   H_α(p) = Σ_j (p_j − p_j^α) / (α(α − 1)),
        p_j = [(α − 1) s_j − τ]_+^{1/(α−1)},   τ the threshold that makes Σ_j p_j = 1,

    Δ the probability simplex and H_α the Tsallis entropy. α → 1 gives softmax and α = 2
    sparsemax; for every α > 1 the keys scoring more than 1/(α − 1) below the best get
    exactly 0. Never the fused kernel (`Attention.uses_fused_kernel` takes soft only).
    """

    alpha: float

    def forward(self, scores, visible, query, query_positions, lengths):
        return masked_entmax(scores, visible, self.alpha)


@registry.register("region", "sparsemax")
class SparsemaxRegion(EntmaxRegion):
    """`p = sparsemax(s) = argmin_{p ∈ Δ} ‖p − s‖²` (Martins & Astudillo 2016): the Euclidean
    projection of the scores onto the simplex, `p_j = [s_j − τ]_+`; with the scores sorted
    `s_(1) >= s_(2) >= …`, `k = max{k : 1 + k s_(k) > Σ_{i<=k} s_(i)}` and
    `τ = (Σ_{i<=k} s_(i) − 1) / k`. α-entmax with α = 2.
    """

    alpha = 2.0


@registry.register("region", "entmax15")
class Entmax15Region(EntmaxRegion):
    """`p = 1.5-entmax(s)`, `p_j = [s_j / 2 − τ]_+²` (Peters, Niculae & Martins 2019): sparse
    like sparsemax, with weights that fall off more smoothly; τ found exactly by sorting."""

    alpha = 1.5


@dataclass
class HardOptions:
    """`attention.region` of the hard region."""

    gumbel_tau: float = field(default=1.0, metadata=greater_than(0))  # τ while training
    # How the scores learn: straight_through (Gumbel-softmax) | reinforce (score function)
    estimator: HardEstimator = HardEstimator.straight_through


@registry.register("region", "hard", options=HardOptions)
class HardRegion(Region):
    """Exactly one key per query gets weight 1 (hard attention, docs/lab/hard_attention.md).

    Evaluation (`not self.training`): the one-hot argmax of the scores. Training draws one
    key k ~ softmax(s) over the visible keys, per query and head, and gives it weight 1.
    Choosing is not differentiable, so the scores learn by one of two estimators
    (`attention.region.estimator`):

    * `straight_through` (default; Jang et al. 2017): with Gumbel noise g,
      `y_soft = softmax((s + g) / τ)`; the forward value is the one-hot argmax of `y_soft`
      (a sample from softmax(s)) and the backward pass uses the gradient of `y_soft`,
      computed as `y_hard + (y_soft − y_soft.detach())`, exactly one-hot. Biased (the
      gradient is that of a relaxation), little noise.
    * `reinforce` (Williams 1992; Xu et al. 2015, "hard" attention): the weights are the
      exact one-hot of k with no gradient path to the scores; the scores learn from the
      score function instead. Per sentence i with sampled keys k_{i,q} (every query q of
      every target position and head), the training loop
      (`seq2seq.training.reinforce`) adds the surrogate

          L_RL = −Σ_i (R_i − b) · Σ_q log p(k_{i,q}),   p = softmax over visible keys,

          R_i = −(1/T_i) Σ_t −log p_model(y_{i,t} | ...)   (the sentence's mean token
                log-likelihood of the reference, detached, T_i its real target tokens),

      whose gradient −Σ_i (R_i − b) ∇log p(k_i) is, in expectation over k, −∇ E_k[R]
      (the likelihood-ratio identity ∇E[R] = E[R ∇log p(k)]; b does not depend on k, so
      E[b ∇log p(k)] = b ∇Σ_k p_k = 0: unbiased for every b). The baseline b is the
      moving average of the batches' mean reward R̄, updated after the surrogate is formed:

          b ← R̄ at the first update,   then b ← β·b + (1 − β)·R̄,   β = BASELINE_DECAY = 0.9,

      and b = 0 before the first (plain REINFORCE). It is the persistent buffer `baseline`
      (NaN until set), which exists only with this estimator, so the state dict of a
      straight-through model is unchanged. The rest of the model learns from the usual loss
      through the chosen value. Log-probabilities are kept only while the training loop
      records them (`choices` is a list): a training forward pass outside it samples
      but teaches the scores nothing. Target positions that are padding are left out of
      Σ_q by the training loop (their keys do not change R).

    A query with no visible key gets all-zero weights and, with `reinforce`, log p = 0.
    """

    def __init__(
        self,
        query_width: int,
        heads: int,
        gumbel_tau: float = 1.0,
        estimator: str = "straight_through",
    ):
        super().__init__(query_width, heads)
        self.tau = gumbel_tau
        self.estimator = estimator
        # (log p(k) summed over heads (batch, tgt_len), query positions (batch or 1,
        # tgt_len)) per call while recording (`seq2seq.training.reinforce`), else None.
        self.choices: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        if estimator == "reinforce":
            self.register_buffer("baseline", torch.tensor(float("nan")))  # b; NaN: not yet set

    def forward(self, scores, visible, query, query_positions, lengths):
        if not self.training:
            return one_hot_argmax(scores, visible)
        if self.estimator == "reinforce":
            return self.sampled(scores, visible, query_positions)
        soft = masked_softmax((scores + gumbel_noise(scores)) / self.tau, visible)
        return one_hot_argmax(soft, visible) + (soft - soft.detach())

    def sampled(self, scores, visible, query_positions) -> torch.Tensor:
        """REINFORCE's forward: the one-hot of k ~ softmax(s) (the Gumbel-max trick), no
        gradient to the scores; records log p(k) per query while `choices` is a list."""
        log_probs = masked_log_softmax(scores, visible)  # (batch, heads, tgt_len, src_len)
        chosen = one_hot_argmax(log_probs.detach() + gumbel_noise(log_probs), visible)
        if self.choices is not None:
            taken = (chosen * log_probs).sum(dim=(1, 3))  # (batch, tgt_len) Σ_heads log p(k)
            self.choices.append((taken, query_positions))
        return chosen.to(scores.dtype)

    def baseline_value(self) -> torch.Tensor:
        """b for the surrogate: the moving average, or 0 before the first update."""
        return torch.nan_to_num(self.baseline, nan=0.0)

    @torch.no_grad()
    def update_baseline(self, mean_reward: torch.Tensor) -> None:
        """`b ← R̄` the first time, then `b ← β·b + (1 − β)·R̄`; a non-finite R̄ is ignored
        (no host sync)."""
        mean_reward = mean_reward.detach().to(self.baseline.dtype)
        average = BASELINE_DECAY * self.baseline + (1 - BASELINE_DECAY) * mean_reward
        updated = torch.where(torch.isnan(self.baseline), mean_reward, average)
        self.baseline.copy_(torch.where(torch.isfinite(mean_reward), updated, self.baseline))


@dataclass
class LocalOptions:
    """`attention.region` of local attention."""

    window: int = field(default=5, metadata=at_least(1))  # half-width D of the window
    mode: LocalMode = LocalMode.predictive  # local-p | local-m (monotonic)


@registry.register("region", "local", options=LocalOptions)
class LocalRegion(Region):
    """Local attention (Luong et al. 2015, §3.2): attend only to keys in `[p_t − D, p_t + D]`.

    * local-m (`mode="monotonic"`): `p_t = t`, the query position, clipped to `S_len − 1`;
      the weights are the softmax of the scores inside the window (Luong eq. 7 restricted
      to the window).
    * local-p (`mode="predictive"`): `p_t = (S_len − 1) · sigmoid(v_pᵀ tanh(W_p h_t))`
      (eq. 9, 0-based so the centre stays on a real key), and
      `α_t(s) = softmax_window(score)_s · exp(−(s − p_t)² / (2σ²))`, σ = D/2 (eq. 10).

    S_len is the number of real keys of the row. Keys outside the window get exactly 0.
    Like Luong, local-p does NOT renormalise after the Gaussian: its weights sum to at
    most 1 (the Gaussian down-weights keys away from p_t), which is also what carries
    the gradient to the position predictor. With several heads each head predicts its own
    centre from its own query.
    """

    def __init__(self, query_width: int, heads: int, window: int = 5, mode: str = "predictive"):
        super().__init__(query_width, heads)
        self.window = window
        self.mode = mode
        self.sigma = window / 2
        if mode == "predictive":
            self.centre_map = HeadLinear(heads, query_width, query_width, bias=False)  # W_p
            bound = 1.0 / math.sqrt(query_width)
            self.centre_out = nn.Parameter(
                torch.empty(heads, query_width).uniform_(-bound, bound)
            )  # v_p

    def forward(self, scores, visible, query, query_positions, lengths):
        centre = self.centres(query, query_positions, lengths)  # (batch, heads or 1, tgt_len)
        key_positions = torch.arange(scores.size(-1), device=scores.device, dtype=centre.dtype)
        distance = key_positions - centre.unsqueeze(-1)  # (batch, heads or 1, tgt_len, src_len)
        weights = masked_softmax(scores, visible & (distance.abs() <= self.window))
        if self.mode == "monotonic":
            return weights
        return weights * torch.exp(-distance.square() / (2 * self.sigma**2))

    def centres(self, query, query_positions, lengths) -> torch.Tensor:
        """The window centre p_t per query, `(batch, heads or 1, tgt_len)`, in float (>= float32)."""
        dtype = torch.promote_types(query.dtype, torch.float32)
        last_key = (lengths - 1).clamp(min=0).to(dtype)[:, None, None]  # (batch, 1, 1)
        if self.mode == "monotonic":
            return torch.minimum(
                query_positions.to(dtype).unsqueeze(1), last_key
            )  # (batch, 1, tgt_len)
        hidden = torch.tanh(self.centre_map(query))  # (batch, heads, tgt_len, query_width)
        logit = torch.einsum("bhtd,hd->bht", hidden, self.centre_out)  # (batch, heads, tgt_len)
        return last_key * torch.sigmoid(logit.to(dtype))

    @staticmethod
    def flops(query_rows: int, width: int, window: int = 5, mode: str = "predictive") -> int:
        """local-p's centre predictor `v_pᵀ tanh(W_p h_t)` (eq. 9) per query; local-m has no
        products of its own. The scores are counted over the whole source, like soft, so
        the window does not change the count."""
        if mode != "predictive":
            return 0
        return linear(query_rows, width, width) + 2 * query_rows * width


def build_region(node: str | Mapping[str, Any], query_width: int, heads: int) -> Region:
    """The region `node` chooses (a registered name, or `{name, **options}`), with its
    options checked and completed (`component_node`: an OptionError names the bad key and
    lists the registered names)."""
    options = component_node("region", node)
    component = registry.get("region", options.pop("name"))
    return component.builder(query_width, heads, **options)
