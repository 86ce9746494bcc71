"""The attention package: one `Attention` class for every score × region × heads, and
`NoAttention`, the fixed-context baseline, and `HierarchicalAttention`, words within each
sentence, then the sentences (`hierarchical.py`).

Every attention implements the contract of `interface.MemoryAttention` (shapes there):
`project_memory(keys, values)` once per sentence, then `attend(query, proj_keys,
proj_values, mask, causal=..., query_positions=..., need_weights=...) -> (context,
weights)`; `forward` does both.

The scores (`scores.py`) and regions (`regions.py`) are components of the registry, found
by name (`seq2seq.registry.names("score")`, `names("region")`); the site's reference lists
them with their options and FLOP formulas, generated from the code
(docs/reference/components.md). Each is chosen by a node `{name, <its options>}` or its
bare name (`options.py`: `component_node` completes and checks one,
`attention_choice(cfg.attention)` gives the chosen names).
"""

from seq2seq.models.attention.attention import (
    Attention,
    recording_weights,
    self_attention,
    self_attention_flops,
)
from seq2seq.models.attention.hierarchical import HierarchicalAttention
from seq2seq.models.attention.none import NoAttention
from seq2seq.models.attention.options import attention_choice, component_name, component_node
from seq2seq.models.attention.regions import LOCAL_MODES

__all__ = [
    "Attention",
    "HierarchicalAttention",
    "NoAttention",
    "recording_weights",
    "self_attention",
    "self_attention_flops",
    "attention_choice",
    "component_name",
    "component_node",
    "LOCAL_MODES",
]
