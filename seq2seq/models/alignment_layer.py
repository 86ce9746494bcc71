"""The alignment layer: an attention that learns word links beside the one that translates.

Guided alignment on the translation attention (`seq2seq.training.guided_alignment`) asks
one head to do two jobs: predict the next word before reading it, and point at the
source word of the word it is about to write. This layer does the second job alone, with
its own parameters, and is never used to predict (Zenkel et al. 2019 and 2020; Chen et al.
2020, "Accurate Word Alignment Induction from Neural Machine Translation" (Shift-AET), whose
separate alignment module reads the target word it aligns).

For target piece t (row t of `tgt_out`) the query is the decoder's output after it has read
piece t, the output at input position t + 1 (`tgt_in[t + 1]` is piece t); in every family
(Transformer, ConvS2S, RNN in both styles) that output is a function of its own input
token. The keys are the encoder's outputs (the bridge's memory). With H heads of width
d = hidden / H:

    q_t = W_q LN(h_{t+1}),   k_s = W_k m_s
    α_t(s) = mean over heads of softmax_s(q_t^h · k_s^h / √d)     (source padding masked)

The last row (EOS's, which no later position has read) is all zero: it links nothing.
With `embed_dim` (`alignment.embeddings`) the pieces' own embeddings join in, each through
its own projection: q_t += W_e e(y_t), k_s += W_f e(x_s).

`query="full_context"` (a decoder with a pass without the future mask, the Transformer's)
takes h from that pass instead, every position seeing the whole target (Garg et al. 2019).

`gradient` g scales what the layer's loss sends back into the shared states h and m:
g = 0 stops it (the translation model then trains exactly as without the layer, the
layer's parameters being clipped on their own: `Seq2Seq.parameter_groups`; unsupervised, up
to the rounding of the attention weights the teacher needs, which a fused kernel would not
compute), g = 1 lets it
through whole, and in between x ↦ x.detach() + g·(x − x.detach()) keeps the value and
scales the gradient.
"""

from __future__ import annotations

import math

import torch
from torch import nn

QUERIES = ("next", "full_context")


def scaled_gradient(x: torch.Tensor, scale: float) -> torch.Tensor:
    """x in value; its gradient multiplied by `scale` (0: cut, 1: whole)."""
    if scale == 1.0:
        return x
    if scale == 0.0:
        return x.detach()
    return x.detach() + scale * (x - x.detach())


class AlignmentLayer(nn.Module):
    """α (batch, heads, tgt_len, src_len) of the module docstring, from the decoder's
    outputs (batch, tgt_len, hidden) and the encoder's memory (batch, src_len, hidden)."""

    def __init__(
        self,
        hidden_size: int,
        heads: int = 1,
        gradient: float = 0.0,
        query: str = "next",
        embed_dim: int | None = None,
    ) -> None:
        super().__init__()
        if heads < 1 or hidden_size % heads:
            raise ValueError(f"heads must divide hidden_size {hidden_size}, got {heads}")
        if not 0.0 <= gradient <= 1.0:
            raise ValueError(f"gradient must be in [0, 1], got {gradient}")
        if query not in QUERIES:
            raise ValueError(f"query must be one of {', '.join(QUERIES)}, got {query!r}")
        self.heads, self.head_dim = heads, hidden_size // heads
        self.gradient, self.query = gradient, query
        self.query_norm = nn.LayerNorm(hidden_size)
        self.query_proj = nn.Linear(hidden_size, hidden_size)
        self.key_proj = nn.Linear(hidden_size, hidden_size)
        # `embeddings`: the pieces' own embeddings added to the query and the keys
        self.embedding_query = None if embed_dim is None else nn.Linear(embed_dim, hidden_size)
        self.embedding_key = None if embed_dim is None else nn.Linear(embed_dim, hidden_size)

    def forward(
        self,
        hidden: torch.Tensor,  # (B, T, hidden): decoder outputs at the input positions
        memory: torch.Tensor,  # (B, S, hidden)
        src_mask: torch.Tensor,  # (B, S) bool, True = real
        embedded: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """The weights per head, (B, heads, T, S), in float32; row T − 1 all zero.
        `embedded`: the (target inputs (B, T, E), source (B, S, E)) embeddings, for a
        layer made with `embed_dim`."""
        hidden = scaled_gradient(hidden, self.gradient)
        memory = scaled_gradient(memory, self.gradient)
        batch, length, _ = hidden.shape
        read = hidden[:, 1:]  # (B, T - 1, hidden): row t from the output that read piece t
        queries = self.query_proj(self.query_norm(read))  # (B, T - 1, hidden)
        keys = self.key_proj(memory)  # (B, S, hidden)
        if self.embedding_query is not None:
            if embedded is None:
                raise ValueError("this alignment layer reads the embeddings: pass `embedded`")
            target, source = (scaled_gradient(x, self.gradient) for x in embedded)
            queries = queries + self.embedding_query(target[:, 1:])  # piece t is input t + 1
            keys = keys + self.embedding_key(source)
        queries, keys = self._split(queries), self._split(keys)  # (B, H, T - 1 | S, d)
        scores = queries.float() @ keys.float().transpose(-1, -2) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~src_mask[:, None, None, :], float("-inf"))
        weights = torch.softmax(scores, dim=-1)  # (B, H, T - 1, S)
        last = weights.new_zeros(batch, self.heads, 1, weights.size(-1))
        return torch.cat([weights, last], dim=2)  # (B, H, T, S)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        """(B, L, hidden) → (B, heads, L, head_dim)."""
        batch, length, _ = x.shape
        return x.view(batch, length, self.heads, self.head_dim).transpose(1, 2)

    @staticmethod
    def flops(batch: int, src_len: int, tgt_len: int, hidden: int) -> int:
        """Forward FLOPs: the two projections and the scores (2 per multiply-add)."""
        projections = 2 * batch * (tgt_len + src_len) * hidden * hidden
        return projections + 2 * batch * tgt_len * src_len * hidden
