"""Score functions: how well each query matches each key ("打分函数", docs/attention-taxonomy.md).

Every score works per head: the query is `(batch, heads, tgt_len, query_width)`, the
keys `(batch, heads, src_len, key_width)`, and the scores `(batch, heads, tgt_len,
src_len)`. Whatever depends only on the keys is done in `project_keys`, which decoders
call once per sentence, so each decoding step only touches the query.

Each score is registered under its name (`seq2seq.registry`, group "score") with the
dataclass of its options (`options=AdditiveOptions`; none for a score without options) and
its FLOP formula, the static method `flops`. Its options are the node `attention.score`
(`{name: additive, hidden_dim: 64}`, `seq2seq.models.attention.options`), and every score is
built as `cls(query_width, key_width, heads, **options)` by `build_score`, which checks
them against the dataclass first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from seq2seq import registry
from seq2seq.models.attention.head_maps import HeadLinear
from seq2seq.models.attention.options import component_node
from seq2seq.models.costs import linear
from seq2seq.option_rules import at_least, greater_than


class Score(nn.Module):
    """`score(q, k)` for every query/key pair of every head.

    A registered score also has the static method `flops(rows, queries, keys, width,
    **options) -> int`: the matrix-product FLOPs of its scores for `rows` = batch·heads
    blocks of `queries` × `keys` pairs, every width `width` (used by `seq2seq.flops`).
    """

    def project_keys(self, keys: torch.Tensor) -> torch.Tensor:
        """`(batch, heads, src_len, key_width) -> (batch, heads, src_len, *)`; identity here."""
        return keys

    def forward(self, query: torch.Tensor, proj_keys: torch.Tensor) -> torch.Tensor:
        """`(batch, heads, tgt_len, query_width), projected keys -> (batch, heads, tgt_len, src_len)`."""
        raise NotImplementedError


class DotProductScore(Score):
    """Scores of the form `s = scale · q̃ᵀ k̃`, with `q̃ = dot_query(q)`, `k̃ = project_keys(k)`.

    Because the score is a scaled dot product of two tensors,
    `F.scaled_dot_product_attention(q̃, k̃, v, scale=scale)` computes exactly the same soft
    attention with a fused kernel; `Attention` uses that when no weights are needed.
    """

    scale: float = 1.0

    def dot_query(self, query: torch.Tensor) -> torch.Tensor:
        return query

    def forward(self, query: torch.Tensor, proj_keys: torch.Tensor) -> torch.Tensor:
        dot = self.dot_query(query) @ proj_keys.transpose(
            -1, -2
        )  # (batch, heads, tgt_len, src_len)
        return dot if self.scale == 1.0 else dot * self.scale

    @staticmethod
    def flops(rows: int, queries: int, keys: int, width: int, **options) -> int:
        """`q̃ᵀ k̃` for every pair: 2·rows·queries·keys·width (scaling and normalising are
        element-wise, so no option changes the count)."""
        return 2 * rows * queries * keys * width


def _require_equal_widths(score: str, query_width: int, key_width: int) -> None:
    if query_width != key_width:
        raise ValueError(
            f"score={score!r} needs query_dim == key_dim (per head), got {query_width} and "
            f"{key_width}; use score='general' or 'additive', or make the widths equal"
        )


@registry.register("score", "dot")
class DotScore(DotProductScore):
    """`s(q, k) = qᵀ k`  (点积模型, docs/attention-taxonomy.md; Luong et al. 2015, eq. 8, "dot").

    Has no parameters, so query and key must have the same width: a different width is a
    ValueError rather than a hidden projection (which would make it the "general" score).
    """

    def __init__(self, query_width: int, key_width: int, heads: int = 1):
        super().__init__()
        _require_equal_widths("dot", query_width, key_width)


@registry.register("score", "scaled_dot")
class ScaledDotScore(DotProductScore):
    """`s(q, k) = qᵀ k / √d`, d = key width  (Vaswani et al. 2017, eq. 1).

    Dividing by √d keeps the score variance near 1 for unit-variance inputs, so the
    softmax does not saturate as d grows. Same equal-width rule as `DotScore`.
    """

    def __init__(self, query_width: int, key_width: int, heads: int = 1):
        super().__init__()
        _require_equal_widths("scaled_dot", query_width, key_width)
        self.scale = 1.0 / math.sqrt(key_width)


@registry.register("score", "general")
class GeneralScore(DotProductScore):
    """`s(q, k) = qᵀ W k`  (bilinear; Luong et al. 2015, eq. 8, "general").

    `W` (one per head, `query_width × key_width`) is applied to the keys in
    `project_keys`, once per sentence; each step is then a plain dot product `qᵀ (W k)`.
    """

    def __init__(self, query_width: int, key_width: int, heads: int):
        super().__init__()
        self.key_map = HeadLinear(heads, key_width, query_width, bias=False)

    def project_keys(self, keys: torch.Tensor) -> torch.Tensor:
        return self.key_map(keys)  # (batch, heads, src_len, query_width)

    @staticmethod
    def flops(rows: int, queries: int, keys: int, width: int) -> int:
        """`W k` once per key, then `qᵀ (W k)` for every pair."""
        return linear(rows * keys, width, width) + DotProductScore.flops(rows, queries, keys, width)


@dataclass
class AdditiveOptions:
    """`attention.score` of the additive score."""

    hidden_dim: int | None = field(default=None, metadata=at_least(1))  # A; None = key width


@registry.register("score", "additive", options=AdditiveOptions)
class AdditiveScore(Score):
    """`s(q, k) = vᵀ tanh(W q + U k + b)`  (Bahdanau et al. 2015, eq. 6; Luong's "concat").

    Also called MLP attention (加性模型, docs/attention-taxonomy.md). `U k + b` is computed in
    `project_keys`, once per sentence; each step adds `W q` and reduces with `v`. The
    hidden width defaults to the key width.
    """

    def __init__(self, query_width: int, key_width: int, heads: int, hidden_dim: int | None = None):
        super().__init__()
        hidden_dim = key_width if hidden_dim is None else hidden_dim
        self.query_map = HeadLinear(heads, query_width, hidden_dim, bias=False)  # W
        self.key_map = HeadLinear(heads, key_width, hidden_dim, bias=True)  # U, b
        bound = 1.0 / math.sqrt(hidden_dim)
        self.energy = nn.Parameter(torch.empty(heads, hidden_dim).uniform_(-bound, bound))  # v

    def project_keys(self, keys: torch.Tensor) -> torch.Tensor:
        return self.key_map(keys)  # (batch, heads, src_len, hidden)

    def forward(self, query: torch.Tensor, proj_keys: torch.Tensor) -> torch.Tensor:
        mapped_query = self.query_map(query)  # (batch, heads, tgt_len, hidden)
        hidden = torch.tanh(
            mapped_query.unsqueeze(3) + proj_keys.unsqueeze(2)
        )  # (b, h, t, s, hidden)
        return torch.einsum(
            "bhtsd,hd->bhts", hidden, self.energy
        )  # (batch, heads, tgt_len, src_len)

    @staticmethod
    def flops(rows: int, queries: int, keys: int, width: int, hidden_dim: int | None = None) -> int:
        """`W q` per query, `U k` per key, then `vᵀ tanh(·)` for every pair, hidden width A."""
        hidden = hidden_dim or width
        mapped = linear(rows * queries, width, hidden) + linear(rows * keys, width, hidden)
        return mapped + 2 * rows * queries * keys * hidden


@dataclass
class CosineOptions:
    """`attention.score` of the cosine score."""

    scale: float | None = field(default=None, metadata=greater_than(0))  # γ; None = learnable


@registry.register("score", "cosine", options=CosineOptions)
class CosineScore(DotProductScore):
    """`s(q, k) = γ · qᵀ k / (‖q‖ ‖k‖)`  (cosine similarity, 余弦相似度, docs/attention-taxonomy.md).

    A cosine lies in [-1, 1], so without a scale the softmax could never be sharp: γ is a
    fixed number (`attention.score.scale`) or, when it is None, a learnable scalar per head
    started at 10. When query and key widths differ the keys are first mapped to the query
    width by a learned linear map (no bias), inside `project_keys`. γ is folded into the
    query (`dot_query`), so the fused kernel's `self.scale` stays 1.
    """

    def __init__(self, query_width: int, key_width: int, heads: int, scale: float | None = None):
        super().__init__()
        needs_map = query_width != key_width
        self.key_map = HeadLinear(heads, key_width, query_width, bias=False) if needs_map else None
        gamma = torch.full((heads, 1, 1), 10.0 if scale is None else float(scale))
        if scale is None:
            self.gamma = nn.Parameter(gamma)
        else:
            self.register_buffer("gamma", gamma)

    def project_keys(self, keys: torch.Tensor) -> torch.Tensor:
        if self.key_map is not None:
            keys = self.key_map(keys)  # (batch, heads, src_len, query_width)
        return F.normalize(keys, dim=-1)

    def dot_query(self, query: torch.Tensor) -> torch.Tensor:
        return F.normalize(query, dim=-1) * self.gamma  # γ folded into the query: scale stays 1


def build_score(
    node: str | Mapping[str, Any], query_width: int, key_width: int, heads: int
) -> Score:
    """The score `node` chooses (a registered name, or `{name, **options}`) for the given
    per-head widths, with its options checked and completed (`component_node`: an
    OptionError names the bad key and lists the registered names)."""
    options = component_node("score", node)
    component = registry.get("score", options.pop("name"))
    return component.builder(query_width, key_width, heads, **options)
