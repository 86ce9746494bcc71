"""What the alignment layer learns from (`alignment=layer`, `seq2seq.models.alignment_layer`).

The layer's weights α (batch, tgt_len, src_len; the mean of its heads), row t that of target
piece t, learn by the loss of guided alignment (`seq2seq.training.guided_alignment`,
`alignment_loss`: cross-entropy against row-normalised targets p*, or the squared error),
summed over the rows that have a target and added with its weight λ:

    L = L_translation + λ · L_align(α, p*)

`training: guided`: p* are the links of the training split (`batch.align`: a statistical
aligner's, a Pharaoh file's or a toy task's known alignment), rows of target pieces.

`training: unsupervised`: p* comes from the model's own translation attention A (the mean of
`teacher_heads` of layer `teacher_layer`), cut from the graph, read k = `teacher_shift`
steps on (null: the decoder's lag, `Decoder.target_read_lag`, the first step that has read
piece t, as Chen et al. 2020's "Shift-Att" reads a Transformer's):

    p*(t, ·) = A(t + k, ·) without the source's EOS column, renormalised     (labels: soft)
    p*(t, ·) = one-hot of argmax_s A(t + k, s), EOS left out                 (labels: argmax)

for the rows t + k that are real target steps (the last k pieces have none). The default,
k = 0, reads the step that predicts piece t: it was by far the better teacher on the valid
gold, for the `make train` model (AER of its last layer's head mean: k = 0 0.389, k = 1
0.770, k = 2 0.829) and for the GRU of the toy reversal (accuracy 0.46 at k = 0, 0.15 at
its lag, 2), so these small models attend where they are about to write, not where they
have just read. The layer
thus learns to read, from the piece itself, where the attention that translates looked
once it had read it; the attention keeps translating as it would without the layer when
the layer's gradient is stopped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from seq2seq.special_tokens import PAD_ID
from seq2seq.training.guided_alignment import LOSSES, supervised_attention

TRAININGS = ("guided", "unsupervised")
LABELS = ("argmax", "soft")


def _name(value: Any) -> str:
    """An enum's name, or the value as text."""
    return str(getattr(value, "name", value))


@dataclass(frozen=True)
class LayerTraining:
    """How the alignment layer learns (the `alignment` section of `alignment=layer`)."""

    training: str = "guided"
    weight: float = 0.5  # λ
    loss: str = "ce"
    teacher_layer: int = -1
    teacher_heads: tuple[int, ...] | None = None
    labels: str = "argmax"
    lag: int = 1  # unsupervised: piece t learns from step t + lag (`teacher_shift`)

    def __post_init__(self) -> None:
        for name, value, allowed in (
            ("training", self.training, TRAININGS),
            ("loss", self.loss, LOSSES),
            ("labels", self.labels, LABELS),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")

    @property
    def guided(self) -> bool:
        return self.training == "guided"

    @classmethod
    def from_config(cls, node: Mapping[str, Any], model: torch.nn.Module) -> LayerTraining:
        """From the plain `alignment` section, with the lag of `model`'s decoder."""
        heads = node.get("teacher_heads")
        return cls(
            training=_name(node.get("training", "guided")),
            weight=float(node.get("weight", 0.5)),
            loss=_name(node.get("loss", "ce")),
            teacher_layer=int(node.get("teacher_layer", -1)),
            teacher_heads=None if heads is None else tuple(int(head) for head in heads),
            labels=_name(node.get("labels", "argmax")),
            lag=_teacher_shift(node.get("teacher_shift", 0), model),
        )


def _teacher_shift(shift: Any, model: torch.nn.Module) -> int:
    """`teacher_shift`, null read as the model's decoder's lag (`target_read_lag`)."""
    if shift is not None:
        return int(shift)
    return int(getattr(model.decoder, "target_read_lag", 1))


def teacher_labels(
    attention: torch.Tensor,  # (batch, layers, heads, tgt_len, src_len)
    src_mask: torch.Tensor,  # (batch, src_len) bool, the source's EOS included
    tgt_out: torch.Tensor,  # (batch, tgt_len)
    training: LayerTraining,
) -> torch.Tensor:
    """p* of the unsupervised layer (module docstring), (batch, tgt_len, src_len) float32,
    rows without a label all zero."""
    teacher = supervised_attention(attention.detach(), training.teacher_layer,
                                   training.teacher_heads)  # (batch, tgt_len, src_len)  # fmt: skip
    lag, length = training.lag, teacher.size(1)
    moved = torch.zeros_like(teacher)
    moved[:, : max(length - lag, 0)] = teacher[:, lag:]  # row t: step t + lag
    steps = (tgt_out != PAD_ID).sum(dim=1)  # (batch,) real steps, EOS's included
    rows = torch.arange(length, device=teacher.device)  # (tgt_len,)
    labelled = rows.unsqueeze(0) + lag < steps.unsqueeze(1)  # (batch, tgt_len)
    source_eos = src_mask.sum(dim=1) - 1  # (batch,)
    pieces = src_mask.clone()
    pieces[torch.arange(src_mask.size(0), device=src_mask.device), source_eos] = False
    moved = moved * pieces.unsqueeze(1).to(moved.dtype) * labelled.unsqueeze(-1).to(moved.dtype)
    if training.labels == "soft":
        total = moved.sum(dim=-1, keepdim=True)
        return torch.where(total > 0, moved / total.clamp_min(1e-12), moved)
    best = moved.argmax(dim=-1, keepdim=True)  # (batch, tgt_len, 1)
    one_hot = torch.zeros_like(moved).scatter_(-1, best, 1.0)
    return one_hot * (moved.sum(dim=-1, keepdim=True) > 0).to(moved.dtype)
