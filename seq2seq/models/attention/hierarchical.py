"""`HierarchicalAttention`: attention in two levels, words within each sentence, then the
sentences (the notes' 多层 attention), registered as the attention component
"hierarchical".

The source is a document of K sentences (a pseudo-document of `data.documents`, whose
sentences are cut at the separator piece: `segments`, the sentence index of every source
position). For the decoder's query q_t:

    word level, within sentence k:    e_tj = (W q_t)ᵀ h_j / √d,      α_tkj = softmax_{j ∈ k}(e_tj)
    one vector per sentence:          s_tk = Σ_{j ∈ k} α_tkj h_j
    sentence level:                   u_tk = (U q_t)ᵀ s_tk / √d,     β_tk = softmax_k(u_tk)
    the context:                      c_t  = Σ_k β_tk s_tk = Σ_j (β_t,k(j) α_t,k(j),j) h_j

the word and sentence encoders of Yang et al. 2016 ("Hierarchical Attention Networks for
Document Classification", §2.2), with the query of the decoder at both levels as in
Miculicchio et al. 2018 ("Document-Level Neural Machine Translation with Hierarchical
Attention Networks", §2: word-level then sentence-level attention, both queried by the
decoder state); here over the sentences of the source document itself, and the context
is the sentence-weighted sum c_t (their gate with the current sentence's context is left
out: every sentence of the document is current). The weights returned, one per source
position, are γ_tj = β_t,k(j) α_t,k(j),j: they sum to 1 over the source, so heat maps,
alignments and AER read them like any attention's, and the sentence weights are their sums
per sentence, β_tk = Σ_{j ∈ k} γ_tj (`sentence_weights`).

Masks at both levels: a padded (or, with `causal`, future) position gets no word weight,
and a sentence with no visible position gets no sentence weight. Without `segments` (a
corpus of single sentences) the source is one sentence: β = 1, and the attention is
Luong's "general" score, scaled, with the softmax over the whole source.

The sentence score never builds the vectors s_tk: u_tk = Σ_{j ∈ k} α_tkj (U q_t)ᵀ h_j / √d,
so the cost per query is two products with the memory (and the context's), whatever K.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from seq2seq import registry
from seq2seq.models.attention.input_checks import check_attend_inputs, check_memory, check_sizes
from seq2seq.models.attention.interface import MemoryAttention
from seq2seq.models.attention.masks import visible_keys
from seq2seq.models.attention.pooling import masked_softmax
from seq2seq.models.costs import linear


@dataclass
class HierarchicalAttentionConfig:
    """`attention=hierarchical`: nothing to choose but the dropout on its weights (the
    widths come from the model builder; the sentences from the data's separator)."""

    _target_: str = "seq2seq.models.attention.HierarchicalAttention"
    dropout: float = 0.0  # on the word-level weights that multiply the values, training only


@registry.register("attention", "hierarchical", schema=HierarchicalAttentionConfig)
class HierarchicalAttention(MemoryAttention):
    """Words within each sentence, then the sentences (module docstring). One head;
    `output_dim == value_dim`; the keys are the values (the encoder's memory)."""

    heads = 1
    reads_sentences = True  # the model passes `segments` to `attend` (seq2seq.config.build)

    def __init__(
        self, query_dim: int, key_dim: int, value_dim: int | None = None, dropout: float = 0.0
    ):
        super().__init__()
        value_dim = key_dim if value_dim is None else value_dim
        check_sizes(query_dim=query_dim, key_dim=key_dim, value_dim=value_dim)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"attention.dropout must be in [0, 1), got {dropout!r}")
        self.query_dim, self.key_dim, self.value_dim = query_dim, key_dim, value_dim
        self.output_dim = value_dim
        self.word_query = nn.Linear(query_dim, key_dim, bias=False)  # W
        self.sentence_query = nn.Linear(query_dim, value_dim, bias=False)  # U
        self.dropout = nn.Dropout(dropout)

    def project_memory(
        self, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`(batch, src_len, key_dim), (batch, src_len, value_dim) -> (batch, 1, src_len, *)`
        each, unprojected (the query is projected instead)."""
        check_memory(keys, values, self.key_dim, self.value_dim)
        return keys.unsqueeze(1), values.unsqueeze(1)

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
        segments: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`query (batch, tgt_len, query_dim)`, `segments (batch, src_len)` long (the sentence
        of each source position, 0 … K−1; None: one sentence) -> `context (batch, tgt_len,
        value_dim)`, weights γ `(batch, 1, tgt_len, src_len)` (module docstring)."""
        check_attend_inputs(query, proj_keys, proj_values, mask, self.query_dim, heads=1)
        keys, values = proj_keys.squeeze(1), proj_values.squeeze(1)  # (B, S, d) each
        batch, tgt_len, src_len = query.size(0), query.size(1), keys.size(1)
        visible = visible_keys(mask, causal, tgt_len, src_len, query.device)[:, 0]  # (B|1, T, S)
        member = sentence_membership(segments, batch, src_len, query.device)  # (B, K, S)
        # word level: one softmax per sentence, over its visible positions
        scale = math.sqrt(self.key_dim)
        word_scores = self.word_query(query) @ keys.transpose(1, 2) / scale  # (B, T, S)
        in_sentence = visible.unsqueeze(2) & member.unsqueeze(1)  # (B, T, K, S)
        alpha = masked_softmax(word_scores.unsqueeze(2), in_sentence)  # (B, T, K, S)
        # sentence level: u_tk = Σ_j α_tkj (U q_t)ᵀ h_j / √d, softmax over non-empty sentences
        sentence_scale = math.sqrt(self.value_dim)
        read = self.sentence_query(query) @ values.transpose(1, 2) / sentence_scale  # (B, T, S)
        sentence_scores = (alpha * read.float().unsqueeze(2)).sum(-1)  # (B, T, K)
        beta = masked_softmax(sentence_scores, in_sentence.any(-1))  # (B, T, K)
        gamma = (beta.unsqueeze(-1) * alpha).sum(2)  # (B, T, S): sums to 1 over the source
        context = self.dropout(gamma).to(values.dtype) @ values  # (B, T, value_dim)
        return context, gamma.unsqueeze(1)

    @staticmethod
    def flops(node: Mapping[str, Any], batch: int, queries: int, keys: int, dim: int) -> int:
        """W q and U q per query, then three products with the memory per (query, key):
        the word scores, the sentence read-outs and the context,
        `2·lin(B·Tq, H, H) + 3·(2·B·Tq·Sk·H)` (`seq2seq.flops`; the sums per sentence are
        element-wise)."""
        return 2 * linear(batch * queries, dim, dim) + 3 * (2 * batch * queries * keys * dim)


def sentence_membership(
    segments: torch.Tensor | None, batch: int, src_len: int, device: torch.device
) -> torch.Tensor:
    """`(batch, K, src_len)` bool: True where source position j is in sentence k; K = 1 and
    every position in it without `segments`. ValueError for segments of the wrong shape
    or a negative index."""
    if segments is None:
        return torch.ones(batch, 1, src_len, dtype=torch.bool, device=device)
    if segments.shape != (batch, src_len) or segments.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"segments must be ({batch}, {src_len}) integers, got "
                         f"{segments.dtype} {tuple(segments.shape)}")  # fmt: skip
    if segments.numel() and int(segments.min()) < 0:
        raise ValueError("segments must be sentence indices >= 0")
    count = int(segments.max()) + 1 if segments.numel() else 1
    sentences = torch.arange(count, device=segments.device)  # (K,)
    return segments.unsqueeze(1) == sentences[None, :, None]  # (B, K, S)


def sentence_weights(weights: torch.Tensor, segments: torch.Tensor | None) -> torch.Tensor:
    """The sentence-level weights β from the weights γ per position: `(batch, heads,
    tgt_len, src_len)` -> `(batch, heads, tgt_len, K)`, β_tk = Σ_{j ∈ k} γ_tj (module
    docstring); K = 1 without `segments`."""
    batch, _, _, src_len = weights.shape
    member = sentence_membership(segments, batch, src_len, weights.device)  # (B, K, S)
    return weights @ member.transpose(1, 2).unsqueeze(1).to(weights.dtype)  # (B, H, T, K)


def sentence_labels(count: int) -> list[str]:
    """Column labels of sentence-level weights: `sentence 1`, `sentence 2`, ..."""
    return [f"sentence {index + 1}" for index in range(count)]
