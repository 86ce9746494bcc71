"""`Attention`: one module for every combination of score × region × heads.

The three axes (docs/attention-taxonomy.md) are independent and chosen by name:

* score (打分函数): dot, scaled_dot, general, additive, cosine   -> `scores.py`
* region (计算区域): soft, sparsemax, entmax15, hard, local       -> `regions.py`
* structure (结构层次): one head, or `heads` heads                -> here

For every query, `context = Σ_j α_j v_j` with `α = region(score(q, k_j))`
(three steps: score, normalise with the region, read out).

Registered as the attention component "attention" (`seq2seq.registry`), with its config
schema `AttentionConfig`. The AttentionConfig keys it reads are the structure's (`heads`,
`head_dim`, `dropout`) and two nodes, `score` and `region`: each a registered name and the
options of that component (`{name: local, window: 3}`), or just the name for its defaults
(`seq2seq.models.attention.options`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from seq2seq import registry
from seq2seq.models.attention.head_maps import merge_heads, split_heads
from seq2seq.models.attention.input_checks import check_attend_inputs, check_memory, check_sizes
from seq2seq.models.attention.interface import MemoryAttention
from seq2seq.models.attention.masks import key_lengths, visible_keys
from seq2seq.models.attention.options import component_name, component_node
from seq2seq.models.attention.regions import SoftRegion, build_region
from seq2seq.models.attention.scores import DotProductScore, build_score
from seq2seq.models.costs import linear
from seq2seq.models.dropout import element_dropout

SELF_ATTENTION = {"score": "scaled_dot", "region": "soft"}  # every Transformer block's


@dataclass
class AttentionConfig:
    """`attention=<preset>`: the keyword arguments of `Attention`.

    `score` and `region` are each a registered name or a node `{name, <its options>}`
    (typed `Any`: a plugin's components register after Hydra composes the config, so the
    names and options are checked at start-up, `seq2seq.config.value_checks`)."""

    _target_: str = "seq2seq.models.attention.Attention"
    score: Any = "additive"
    region: Any = "soft"
    heads: int = 1
    head_dim: int | None = None  # per-head width when heads > 1; None = value_dim // heads
    dropout: float = 0.0  # on the attention weights, training only


@registry.register("attention", "attention", schema=AttentionConfig)
class Attention(MemoryAttention):
    """Attention of queries over a memory of keys and values.

    One head (`heads == 1`, classic Bahdanau / Luong): the score compares the query with
    the keys directly and `context = Σ_j α_j v_j`, with no value projection, so
    `output_dim == value_dim`.

    Several heads (Vaswani et al. 2017, §3.2.2):
    `MultiHead(Q, K, V) = Concat(head_1, …, head_H) W_O`,
    `head_h = Attention(Q W_Q^h, K W_K^h, V W_V^h)`, each head of width `head_dim`
    (default `value_dim // heads`), with the chosen score and region applied per head and
    `W_O` mapping back to `value_dim`.

    With a dot-product-type score (dot, scaled_dot, general, cosine) and the soft region,
    `attend(..., need_weights=False)` runs `F.scaled_dot_product_attention` (a fused
    kernel, no weights materialised); otherwise the weights are computed explicitly with
    the same math and returned, shaped `(batch, heads, tgt_len, src_len)`.

    `score` and `region` are registered names or nodes `{name, **options}` (`score={"name":
    "additive", "hidden_dim": 64}`); an option the chosen component does not have is an
    OptionError, a ValueError naming it. The widths a score or region sees are per head:
    the additive score's `hidden_dim` defaults to `key_dim` with one head, `head_dim` with
    several. `head_dim` with one head is ignored. Dropout acts on the weights that
    multiply the values, in training only; the returned weights are before dropout.
    A query with no visible key gets all-zero weights and, with one head, an all-zero
    context (with several heads the output projection adds its bias to the zero heads).

    `recording_weights([module, ...])` makes `attend` compute the weights explicitly even
    when they are not asked for (the Transformer's self-attention) and keep them, for
    viewers; the computation is the same and a module that is not recorded is unchanged.
    """

    def __init__(
        self,
        query_dim: int,
        key_dim: int,
        value_dim: int | None = None,
        *,
        score: str | Mapping[str, Any] = "additive",
        region: str | Mapping[str, Any] = "soft",
        heads: int = 1,
        head_dim: int | None = None,
        dropout: float = 0.0,
    ):
        super().__init__()
        value_dim = key_dim if value_dim is None else value_dim
        check_sizes(query_dim=query_dim, key_dim=key_dim, value_dim=value_dim, heads=heads)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.query_dim, self.key_dim, self.value_dim = query_dim, key_dim, value_dim
        self.output_dim = value_dim
        self.heads = heads
        self.dropout = dropout
        query_width, key_width = self._build_head_projections(head_dim)
        self.score = build_score(score, query_width, key_width, heads)
        self.region = build_region(region, query_width, heads)
        self.score_name, self.region_name = component_name(score), component_name(region)
        self.recorded: list[torch.Tensor] | None = None  # set by `recording_weights`

    def _build_head_projections(self, head_dim: int | None) -> tuple[int, int]:
        """Create W_Q, W_K, W_V, W_O for several heads; return the per-head (query, key) widths."""
        if self.heads == 1:
            self.query_proj = self.key_proj = self.value_proj = self.output_proj = None
            return self.query_dim, self.key_dim
        if head_dim is None:
            if self.value_dim % self.heads:
                raise ValueError(
                    f"value_dim ({self.value_dim}) is not divisible by heads "
                    f"({self.heads}); pass head_dim explicitly"
                )
            head_dim = self.value_dim // self.heads
        check_sizes(head_dim=head_dim)
        inner_dim = self.heads * head_dim
        self.query_proj = nn.Linear(self.query_dim, inner_dim)
        self.key_proj = nn.Linear(self.key_dim, inner_dim)
        self.value_proj = nn.Linear(self.value_dim, inner_dim)
        self.output_proj = nn.Linear(inner_dim, self.value_dim)
        return head_dim, head_dim

    @staticmethod
    def flops(node: Mapping[str, Any], batch: int, queries: int, keys: int, dim: int) -> int:
        """One layer, `queries` over `keys` positions, all widths `dim` (`seq2seq.flops`):
        with h > 1 heads of width w the projections W_Q, W_O (per query) and W_K, W_V (per
        key); the registered score's and region's products; the context Σ_j α_j v_j."""
        heads = node["heads"]
        width = dim if heads == 1 else (node["head_dim"] or dim // heads)
        projections = 0
        if heads > 1:
            inner = heads * width
            per_query = linear(batch * queries, dim, inner) + linear(batch * queries, inner, dim)
            projections = per_query + 2 * linear(batch * keys, dim, inner)
        score = component_node("score", node["score"])  # {name, **options}
        region = component_node("region", node["region"])
        score_flops = registry.get("score", score.pop("name")).flops
        region_flops = registry.get("region", region.pop("name")).flops
        rows = batch * heads
        return (
            projections
            + score_flops(rows, queries, keys, width, **score)
            + region_flops(rows * queries, width, **region)
            + 2 * rows * queries * keys * width  # context Σ α v
        )

    @property
    def uses_fused_kernel(self) -> bool:
        """True when `need_weights=False` runs `F.scaled_dot_product_attention`."""
        return isinstance(self.score, DotProductScore) and isinstance(self.region, SoftRegion)

    def extra_repr(self) -> str:
        return (
            f"query_dim={self.query_dim}, key_dim={self.key_dim}, value_dim={self.value_dim}, "
            f"score={self.score_name!r}, region={self.region_name!r}, heads={self.heads}"
        )

    def project_memory(
        self, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`keys (batch, src_len, key_dim), values (batch, src_len, value_dim) ->
        proj_keys (batch, heads, src_len, *), proj_values (batch, heads, src_len, *)`.

        Everything that depends only on the source, done once per sentence.
        """
        check_memory(keys, values, self.key_dim, self.value_dim)
        if self.heads == 1:
            keys_per_head, values_per_head = keys.unsqueeze(1), values.unsqueeze(1)
        else:
            keys_per_head = split_heads(
                self.key_proj(keys), self.heads
            )  # (batch, heads, src_len, head_dim)
            values_per_head = split_heads(self.value_proj(values), self.heads)
        return self.score.project_keys(keys_per_head), values_per_head

    def attend(
        self,
        query: torch.Tensor,
        proj_keys: torch.Tensor,
        proj_values: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        causal: bool = False,
        query_positions: torch.Tensor | None = None,
        need_weights: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`query (batch, tgt_len, query_dim)` over projected memory ->
        `context (batch, tgt_len, output_dim), weights (batch, heads, tgt_len, src_len) | None`.

        mask: `(batch, src_len)` bool, True = real key, or None.
        causal: query i is at absolute position `src_len - tgt_len + i` and sees keys at or
            before it (so one query, tgt_len = 1, sees every key).
        query_positions: `(tgt_len,)` or `(batch, tgt_len)` integer target positions,
            used by local-m only; default `arange(tgt_len)`, so a decoder running one
            step at a time passes the step index.
        need_weights: False allows the fused kernel; weights are None only when it ran.
        """
        check_attend_inputs(query, proj_keys, proj_values, mask, self.query_dim, self.heads)
        query_per_head = self._split_query(query)  # (batch, heads, tgt_len, query_width)
        if not need_weights and self.recorded is None and self.uses_fused_kernel:
            context = self._fused_context(query_per_head, proj_keys, proj_values, mask, causal)
            return self._merge_heads(context), None
        weights = self._weights(query_per_head, proj_keys, mask, causal, query_positions)
        if self.recorded is not None:
            self.recorded.append(weights.detach())  # (batch, heads, tgt_len, src_len)
        dropped = element_dropout(weights, self.dropout, self.training).to(proj_values.dtype)
        context = dropped @ proj_values  # (batch, heads, tgt_len, value_width)
        return self._merge_heads(context), weights

    def _split_query(self, query: torch.Tensor) -> torch.Tensor:
        if self.heads == 1:
            return query.unsqueeze(1)  # (batch, 1, tgt_len, query_dim)
        return split_heads(self.query_proj(query), self.heads)  # (batch, heads, tgt_len, head_dim)

    def _merge_heads(self, context: torch.Tensor) -> torch.Tensor:
        if self.heads == 1:
            return context.squeeze(1)  # (batch, tgt_len, value_dim)
        return self.output_proj(merge_heads(context))  # (batch, tgt_len, value_dim)

    def _weights(self, query_per_head, proj_keys, mask, causal, query_positions) -> torch.Tensor:
        """Explicit weights `(batch, heads, tgt_len, src_len)`: score, then region."""
        batch, _, tgt_len, _ = query_per_head.shape
        src_len, device = proj_keys.size(2), query_per_head.device
        visible = visible_keys(mask, causal, tgt_len, src_len, device)  # (batch or 1, 1, tgt, src)
        scores = self.score(query_per_head, proj_keys)  # (batch, heads, tgt_len, src_len)
        positions = _query_positions(query_positions, batch, tgt_len, device)  # (batch or 1, tgt)
        lengths = key_lengths(mask, batch, src_len, device)  # (batch,)
        return self.region(scores, visible, query_per_head, positions, lengths)

    def _fused_context(self, query_per_head, proj_keys, proj_values, mask, causal) -> torch.Tensor:
        """Soft dot-product attention with `F.scaled_dot_product_attention`."""
        tgt_len, src_len = query_per_head.size(2), proj_keys.size(2)
        attn_mask, has_key = None, None
        if mask is not None or causal:
            visible = visible_keys(mask, causal, tgt_len, src_len, query_per_head.device)
            has_key = visible.any(dim=-1, keepdim=True)  # (batch or 1, 1, tgt_len, 1)
            attn_mask = visible | ~has_key  # a row with no visible key may see all; zeroed below
        context = F.scaled_dot_product_attention(
            self.score.dot_query(query_per_head),
            proj_keys,
            proj_values,
            attn_mask=attn_mask,
            dropout_p=self.dropout if self.training else 0.0,
            scale=self.score.scale,
        )  # (batch, heads, tgt_len, value_width)
        if has_key is None or (context.device.type == "cpu" and bool(has_key.all())):
            return context  # every query sees a key: nothing to zero, no copy (no sync on CPU)
        return context.masked_fill(~has_key, 0.0)


def _query_positions(query_positions, batch: int, tgt_len: int, device) -> torch.Tensor:
    """Target positions as `(batch or 1, tgt_len)` long; default `arange(tgt_len)`."""
    if query_positions is None:
        return torch.arange(tgt_len, device=device).unsqueeze(0)
    if query_positions.is_floating_point() or query_positions.shape not in (
        (tgt_len,),
        (batch, tgt_len),
    ):
        raise ValueError(
            f"query_positions must be integer, (tgt_len={tgt_len},) or "
            f"(batch={batch}, tgt_len={tgt_len}), got {query_positions.dtype} "
            f"{tuple(query_positions.shape)}"
        )
    return query_positions.reshape(-1, tgt_len)


@contextmanager
def recording_weights(modules: Iterable[Attention]) -> Iterator[list[list[torch.Tensor]]]:
    """Within the block, every `attend` call of each module keeps its weights
    `(batch, heads, tgt_len, src_len)`: yields one list per module, filled call by call
    (a teacher-forced pass calls each layer's attention once; step-by-step decoding once
    per step). The modules stop recording when the block ends."""
    modules = list(modules)
    records: list[list[torch.Tensor]] = [[] for _ in modules]
    for module, record in zip(modules, records):
        module.recorded = record
    try:
        yield records
    finally:
        for module in modules:
            module.recorded = None


def self_attention(width: int, heads: int, dropout: float = 0.0) -> Attention:
    """Multi-head scaled dot-product self-attention over `width` features, the Transformer's
    (Vaswani et al. 2017 §3.2.2); it runs the fused kernel when weights are not needed."""
    return Attention(width, width, width, **SELF_ATTENTION, heads=heads, dropout=dropout)


def self_attention_flops(batch: int, length: int, width: int, heads: int) -> int:
    """FLOPs of `self_attention(width, heads)` over `length` positions (all `length` ×
    `length` pairs, as the kernels compute them, causal or not)."""
    node = {**SELF_ATTENTION, "heads": heads, "head_dim": None}
    return Attention.flops(node, batch, length, length, width)
