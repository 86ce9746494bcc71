"""The attention zoo: score (dot, scaled_dot, general, additive, cosine) × region (soft,
hard, local) × heads, plus `NoAttention`, the fixed-context baseline.

Both classes share one call API: `project_memory(keys, values)` once per sentence, then
`attend(query, proj_keys, proj_values, mask, causal=..., query_positions=...,
need_weights=...) -> (context, weights)`; `forward` does both.
"""

from seq2seq.models.attention.attention import Attention, self_attention
from seq2seq.models.attention.none import NoAttention
from seq2seq.models.attention.regions import LOCAL_MODES, REGION_NAMES
from seq2seq.models.attention.scores import SCORE_NAMES

__all__ = [
    "Attention",
    "NoAttention",
    "self_attention",
    "SCORE_NAMES",
    "REGION_NAMES",
    "LOCAL_MODES",
]
