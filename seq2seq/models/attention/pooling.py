"""`AttentionPooling`: attention that turns a whole sequence into one vector (N vs 1).

The notes' "traditional attention", `Attention(Q) = softmax(Wᵀ Uᵀ Q) · Q`: no query comes
from outside; one learned vector w scores every position of the sequence itself,

    s_i = wᵀ tanh(U h_i + b),   α = softmax_i(s) over the real positions,   c = Σ_i α_i h_i

(Yang et al. 2016, "Hierarchical Attention Networks for Document Classification", eqs.
5-7, where w is called the context vector u_w). The weights α are a distribution over
the positions (0 on padding) and c is one vector for the whole sequence, in place of an
encoder's last state or the mean of its states.

A concatenation score without a nonlinearity, `s(q, k_i) = vᵀ[q; k_i] = v_qᵀ q + v_kᵀ k_i`,
adds the same term `v_qᵀ q` to every key's score; softmax is unchanged by a constant
added to all its inputs, so such an attention ignores its query and is this pooling with
a linear scorer (`linear_scores`; the identity is checked in tests/test_attention_pooling.py).

It is used as the summary that starts the decoder (`model.summary=attention_pool`,
`seq2seq.models.model.Bridge`) and as the one context of `attention=none` with
`attention.context=attention_pool` (`seq2seq.models.attention.none`).
"""

from __future__ import annotations

import torch
from torch import nn

from seq2seq.models.costs import linear


class AttentionPooling(nn.Module):
    """`(values (batch, time, dim), mask (batch, time)) -> (context (batch, dim),
    weights (batch, time))`: the module docstring's equations. `attention_dim` is the width
    of U (the input's width by default)."""

    def __init__(self, dim: int, attention_dim: int | None = None):
        super().__init__()
        attention_dim = dim if attention_dim is None else attention_dim
        if dim <= 0 or attention_dim <= 0:
            raise ValueError(f"attention pooling widths must be > 0, got {dim} and {attention_dim}")
        self.dim, self.attention_dim = dim, attention_dim
        self.project = nn.Linear(dim, attention_dim)  # U, b
        self.query = nn.Linear(attention_dim, 1, bias=False)  # w, the one learned query

    def scores(self, values: torch.Tensor) -> torch.Tensor:
        """s_i = wᵀ tanh(U h_i + b): `(batch, time, dim) -> (batch, time)`, padding included
        (the mask is applied by `weights`)."""
        return self.query(torch.tanh(self.project(values))).squeeze(-1)

    def weights(self, values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """α = softmax(s) over the real positions: `(batch, time)`, 0 on padding, each row
        summing to 1 (all 0 for a row with no real position)."""
        return masked_softmax(self.scores(values), mask)

    def forward(
        self, values: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if values.dim() != 3 or values.size(-1) != self.dim:
            raise ValueError(f"values must be (batch, time, {self.dim}), got {tuple(values.shape)}")
        if mask.shape != values.shape[:2]:
            raise ValueError(f"mask must be {tuple(values.shape[:2])}, got {tuple(mask.shape)}")
        weights = self.weights(values, mask)  # (batch, time)
        context = (weights.unsqueeze(1).to(values.dtype) @ values).squeeze(1)  # (batch, dim)
        return context, weights

    @staticmethod
    def flops(batch: int, time: int, dim: int, attention_dim: int) -> int:
        """U h + b and wᵀ tanh(·) at every position, then the weighted sum:
        lin(B·T, d, a) + lin(B·T, a, 1) + 2·B·T·d (`seq2seq.models.costs`)."""
        positions = batch * time
        scores = linear(positions, dim, attention_dim) + linear(positions, attention_dim, 1)
        return scores + 2 * positions * dim


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """softmax over the last dim where `mask` is True; 0 elsewhere, and 0 for a row with no
    True entry. `mask` broadcasts against `scores`."""
    filled = scores.float().masked_fill(~mask, float("-inf"))
    weights = torch.softmax(filled, dim=-1)
    return torch.nan_to_num(weights, nan=0.0)  # a row with no real position: 0 / 0


def linear_scores(query: torch.Tensor, keys: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The concatenation score without a nonlinearity, s(q, k_i) = vᵀ[q; k_i]:
    `query (batch, q_dim), keys (batch, time, k_dim), v (q_dim + k_dim,) -> (batch, time)`.
    Its softmax does not depend on the query (module docstring)."""
    q_part = query @ v[: query.size(-1)]  # (batch,), the same for every key
    k_part = keys @ v[query.size(-1) :]  # (batch, time)
    return q_part.unsqueeze(-1) + k_part
