"""Guided alignment: one attention layer's heads learn word links (Garg et al. 2019).

The supervised attention α is the mean over the chosen heads of one decoder layer's
cross-attention, α_t(s) for target position t (a row of tgt_out) over source position s.
Against the target p* of the batch (`seq2seq.data.links`: each linked row of the links
normalised to sum 1, unlinked rows 0), summed over the linked rows T_linked:

    ce:   L_align = −Σ_{t ∈ T_linked} Σ_s p*(t, s) · log max(α_t(s), ε)      (Garg et al.)
    mse:  L_align =  Σ_{t ∈ T_linked} Σ_s (α_t(s) − p*(t, s))²

The objective (`seq2seq.training.objectives.GuidedAlignment`) adds λ·L_align to the summed
translation loss, and the trainer divides both by the batch's target tokens, as fairseq's
`transformer_align` does (its per-sentence mean over linked rows, -(1/|T_linked|) Σ ...,
is what `train/align_loss` reports).

ε = 1e-6: a region whose weights are exactly 0 at a linked position (sparsemax, entmax,
hard, local's window edge) gives a finite loss, log ε per unit of p* there, and no gradient
through that weight (the clamp cuts it; those regions' Jacobians are zero there anyway),
so with them `mse` is the loss that also pushes the unlinked weights down. The loss is
computed in float32 whatever the autocast.

Layer: counted from 0, negative from the end, clamped to the stack, so the default −2 (the
penultimate layer, Garg et al.) is the only layer of a one-layer stack (the RNN decoders).
Heads: the listed ones averaged (Garg et al. supervise one, the default [0]); None: all.

Shift k (`alignment.shift`): the links of target piece t supervise the attention of decoder
step t + k, the step that has read piece t (k = 1 for a Transformer or a Luong-style RNN,
2 for a Bahdanau-style RNN, which attends with its state before reading its input), as
Chen et al. 2020 read an unguided model's attention one step later:

    p*_k(t, s) = p*(t − k, s) for k ≤ t < n_target (the rows of tgt_out, EOS included), else 0

so the last k pieces' links fall on EOS's row or are dropped with it (k = 2), and no
padded row is ever supervised. With k = 0 the head must foresee which source word the piece
it is about to predict translates; with k ≥ 1 it looks up the piece it has just read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

EPSILON = 1e-6
LOSSES = ("ce", "mse")


@dataclass(frozen=True)
class Guidance:
    """What guided alignment supervises and how (`alignment.*` of the config)."""

    layer: int = -2
    heads: tuple[int, ...] | None = (0,)
    weight: float = 0.5  # λ
    loss: str = "ce"
    full_context: bool = False
    shift: int = 0

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        if self.shift < 0:
            raise ValueError(f"shift must be 0 or more, got {self.shift}")

    @classmethod
    def from_config(cls, node: Mapping[str, Any]) -> Guidance:
        """From the plain `alignment` section (enums as their names)."""
        heads = node.get("heads")
        return cls(
            layer=int(node.get("layer", -2)),
            heads=None if heads is None else tuple(int(head) for head in heads),
            weight=float(node.get("weight", 0.5)),
            loss=str(node.get("loss", "ce")),
            full_context=bool(node.get("full_context", False)),
            shift=int(node.get("shift") or 0),  # null (the decoder's lag): `for_model`
        )


    def for_model(self, model: torch.nn.Module) -> Guidance:
        """These settings with the shift the built model reads its attention with
        (`alignment.shift`, null resolved to its decoder's lag by `build_model`)."""
        return replace(self, shift=int(getattr(model, "alignment_shift", self.shift)))


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


def shifted_target(target: torch.Tensor, shift: int, rows: torch.Tensor) -> torch.Tensor:
    """p*_k of the module docstring: the target (batch, tgt_len, src_len) moved `shift` rows
    down, the rows that are not a target position (`rows`, (batch, tgt_len) bool) emptied."""
    if shift == 0:
        return target
    moved = torch.zeros_like(target)
    moved[:, shift:] = target[:, : target.size(1) - shift]
    return moved * rows.unsqueeze(-1).to(moved.dtype)


def guided_loss(
    attention: torch.Tensor | None,
    target: torch.Tensor,
    guidance: Guidance,
    rows: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`alignment_loss` of the supervised heads of a decoder's `attention`
    (batch, layers, heads, tgt_len, src_len) against p* `target` moved by `guidance.shift`
    rows (`rows`: (batch, tgt_len) bool, the target positions; needed for a shift);
    ValueError when the decoder returned no weights."""
    if attention is None:
        raise ValueError(
            "guided alignment needs the decoder's attention weights, and it returned none"
        )
    if guidance.shift:
        if rows is None:
            raise ValueError("a shifted guidance needs the target positions (rows)")
        target = shifted_target(target, guidance.shift, rows)
    weights = supervised_attention(attention, guidance.layer, guidance.heads)
    return alignment_loss(weights, target, guidance.loss)
