"""A score or a region run alone, the way `Attention` runs them, on tensors per head.

    scores  = score(query, score.project_keys(keys))        (batch, heads, tgt_len, src_len)
    weights = region(scores, visible, query, positions, lengths)

`visible` is the padding mask spread over the queries (`(batch, 1, tgt_len, src_len)`),
`positions` the target positions of the queries (`(1, tgt_len)`, local-m centres its
window there) and `lengths` the real keys per row. A score is checked under the soft region
and a region under given scores, so a failure belongs to the component checked.
"""

from __future__ import annotations

import torch

from seq2seq.models.attention.masks import key_lengths, visible_keys
from seq2seq.models.attention.regions import build_region
from seq2seq.models.attention.scores import build_score
from seq2seq.testing.inputs import BATCH, SRC_LEN, TGT_LEN, randn, source_mask

WIDTH = 6  # per-head width of queries and keys
HEADS = (1, 2)


def score_module(node: dict, heads: int, key_width: int = WIDTH) -> torch.nn.Module:
    return build_score(node, WIDTH, key_width, heads)


def region_module(node: dict, heads: int) -> torch.nn.Module:
    return build_region(node, WIDTH, heads)


def per_head(heads: int, length: int, seed: int, width: int = WIDTH) -> torch.Tensor:
    """`(batch, heads, length, width)` random queries or keys."""
    return randn(BATCH, heads, length, width, seed=seed)


def run_region(
    region: torch.nn.Module,
    scores: torch.Tensor,  # (batch, heads, tgt_len, src_len)
    query: torch.Tensor,  # (batch, heads, tgt_len, width)
    mask: torch.Tensor,  # (batch, src_len) bool
    positions: torch.Tensor | None = None,  # (1, tgt_len) long
) -> torch.Tensor:
    """The region's weights `(batch, heads, tgt_len, src_len)` (module docstring)."""
    batch, _, tgt_len, src_len = scores.shape
    visible = visible_keys(mask, False, tgt_len, src_len)  # (batch, 1, tgt_len, src_len)
    if positions is None:
        positions = torch.arange(tgt_len).unsqueeze(0)  # (1, tgt_len)
    lengths = key_lengths(mask, batch, src_len, scores.device)  # (batch,)
    return region(scores, visible, query, positions, lengths)


def soft_weights(score: torch.nn.Module, query, keys, mask) -> torch.Tensor:
    """The score's weights under the soft region: `(batch, heads, tgt_len, src_len)`."""
    scores = score(query, score.project_keys(keys))
    return run_region(region_module({"name": "soft"}, query.size(1)), scores, query, mask)


def region_case(heads: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Scores `(batch, heads, tgt, src)`, queries `(batch, heads, tgt, width)`, the mask."""
    scores = 2 * randn(BATCH, heads, TGT_LEN, SRC_LEN, seed=seed)
    return scores, per_head(heads, TGT_LEN, seed + 1), source_mask()
