"""Guided alignment: one attention layer's heads learn word links (Garg et al. 2019).

The supervised attention α is the mean over the chosen heads of one decoder layer's
cross-attention, α_t(s) for target position t (a row of tgt_out) over source position s.
Against the target p* of the batch (`seq2seq.data.links`: each linked row of the links
normalised to sum 1, unlinked rows 0), summed over the linked rows T_linked:

    ce:   L_align = −Σ_{t ∈ T_linked} Σ_s p*(t, s) · log max(α_t(s), ε)      (Garg et al.)
    mse:  L_align =  Σ_{t ∈ T_linked} Σ_s (α_t(s) − p*(t, s))²

The trainer adds λ·L_align to the summed translation loss, so both are divided by the
batch's target tokens, as fairseq's `transformer_align` does (its per-sentence mean over
linked rows, -(1/|T_linked|) Σ ..., is what `train/align_loss` reports).

ε = 1e-6: a region whose weights are exactly 0 at a linked position (sparsemax, entmax,
hard, local's window edge) gives a finite loss, log ε per unit of p* there, and no gradient
through that weight (the clamp cuts it; those regions' Jacobians are zero there anyway),
so with them `mse` is the loss that also pushes the unlinked weights down. The loss is
computed in float32 whatever the autocast.

Layer: counted from 0, negative from the end, clamped to the stack, so the default −2 (the
penultimate layer, Garg et al.) is the only layer of a one-layer stack (the RNN decoders).
Heads: the listed ones averaged (Garg et al. supervise one, the default [0]); None: all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

EPSILON = 1e-6
LOSSES = ("ce", "mse")


@dataclass(frozen=True)
class Guidance:
    """What guided alignment supervises and how (`alignment.*` of the config)."""

    layer: int = -2
    heads: tuple[int, ...] | None = (0,)
    weight: float = 0.05  # λ
    loss: str = "ce"
    full_context: bool = False

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")

    @classmethod
    def from_config(cls, node: Mapping[str, Any]) -> Guidance:
        """From the plain `alignment` section (enums as their names)."""
        heads = node.get("heads")
        return cls(
            layer=int(node.get("layer", -2)),
            heads=None if heads is None else tuple(int(head) for head in heads),
            weight=float(node.get("weight", 0.05)),
            loss=str(node.get("loss", "ce")),
            full_context=bool(node.get("full_context", False)),
        )


def resolve_layer(layer: int, layers: int) -> int:
    """The index in [0, layers) that `layer` names: negative from the end, clamped."""
    index = layer + layers if layer < 0 else layer
    return min(max(index, 0), layers - 1)


def supervised_attention(
    attention: torch.Tensor, layer: int, heads: Sequence[int] | None
) -> torch.Tensor:
    """(batch, layers, heads, tgt_len, src_len) → α (batch, tgt_len, src_len) in float32:
    the layer `layer` (`resolve_layer`), mean of `heads` (None: every head)."""
    chosen = attention[:, resolve_layer(layer, attention.size(1))]  # (batch, heads, tgt, src)
    if heads is not None:
        chosen = chosen[:, list(heads)]  # (batch, len(heads), tgt, src)
    return chosen.float().mean(dim=1)  # (batch, tgt_len, src_len)


def alignment_loss(
    weights: torch.Tensor, target: torch.Tensor, loss: str = "ce"
) -> tuple[torch.Tensor, torch.Tensor]:
    """(L_align summed over the linked rows, the number of linked rows), both float32
    scalars, of α `weights` against p* `target`, each (batch, tgt_len, src_len)."""
    target = target.float()
    linked = target.sum(dim=-1) > 0  # (batch, tgt_len) rows with links
    if loss == "ce":
        per_row = -(target * weights.float().clamp_min(EPSILON).log()).sum(dim=-1)
    elif loss == "mse":
        per_row = (weights.float() - target).square().sum(dim=-1)  # (batch, tgt_len)
    else:
        raise ValueError(f"loss must be one of {', '.join(LOSSES)}, got {loss!r}")
    summed = per_row.masked_fill(~linked, 0.0).sum()
    return summed, linked.sum().float()


def guided_loss(
    attention: torch.Tensor | None, target: torch.Tensor, guidance: Guidance
) -> tuple[torch.Tensor, torch.Tensor]:
    """`alignment_loss` of the supervised heads of a decoder's `attention`
    (batch, layers, heads, tgt_len, src_len); ValueError when it returned none."""
    if attention is None:
        raise ValueError(
            "guided alignment needs the decoder's attention weights, and it returned none"
        )
    weights = supervised_attention(attention, guidance.layer, guidance.heads)
    return alignment_loss(weights, target, guidance.loss)
