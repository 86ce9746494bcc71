"""A model's attention while it is fed a reference translation (teacher forcing).

The model reads the source and the reference shifted right (BOS first), as in training,
and returns its cross-attention weights α (layers, heads, tgt_len, src_len): α_t(s) is how
much target position t looks at source position s (Bahdanau et al. 2015, eq. 6). The
reference gives every model the same target positions, so alignments of different models
and training steps compare (a model's own outputs would not line up).

A model guided with `alignment.shift` k learned the links of target piece t at decoder step
t + k (`seq2seq.training.guided_alignment`), so its rows are read k steps later (`read_later`):
row t of what these functions return is step t + k, and the last k rows are empty.

A model with a separate alignment layer (`alignment=layer`) is also read through it
(`source=LAYER`): its row t is already that of piece t, the EOS row empty.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from seq2seq.data.batching import collate

TEACHER_FORCING_BATCH = 64  # sentences per forward pass


def attention_summary(attention: torch.Tensor) -> torch.Tensor:
    """(..., layers, heads, tgt_len, src_len) → (..., tgt_len, src_len): last layer, head mean."""
    return attention[..., -1, :, :, :].float().mean(dim=-3)


ATTENTION, LAYER = "attention", "layer"  # what is read: the translation attention, or
# the separate alignment layer (`seq2seq.models.alignment_layer`)
SOURCES = (ATTENTION, LAYER)


def has_alignment_layer(model: torch.nn.Module) -> bool:
    """Whether the model has a separate alignment layer (`alignment=layer`)."""
    return getattr(model, "alignment_layer", None) is not None


@torch.no_grad()
def teacher_forced_weights(
    model: torch.nn.Module,
    examples: Sequence[tuple[Sequence[int], Sequence[int]]],
    device: torch.device,
    source: str = ATTENTION,
) -> list[torch.Tensor] | None:
    """Every layer's and head's attention of each `(src_ids, tgt_ids)` example (no
    specials) under teacher forcing: (layers, heads, len(tgt) + 1, len(src) + 1) in float32
    on the CPU, the EOS row and column included. `source=LAYER`: the alignment layer's
    weights as one layer, (1, its heads, ...), row t that of piece t (the layer reads each
    piece itself: no shift).

    Runs in eval mode (no dropout, hard attention takes its argmax) and restores the
    model's mode. None when the model has no attention weights (attention=none), or no
    alignment layer for `source=LAYER`.
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
    if source == LAYER and not has_alignment_layer(model):
        return None
    batch_weights = _layer_weights if source == LAYER else _batch_weights
    was_training = model.training
    model.eval()
    try:
        matrices: list[torch.Tensor] = []
        for start in range(0, len(examples), TEACHER_FORCING_BATCH):
            chunk = examples[start : start + TEACHER_FORCING_BATCH]
            weights = batch_weights(model, chunk, device)
            if weights is None:
                return None
            matrices.extend(weights)
        return matrices
    finally:
        model.train(was_training)


def _layer_weights(model, examples, device) -> list[torch.Tensor]:
    batch = collate(list(examples), list(range(len(examples)))).to(device)
    weights = model.alignment_weights(batch.src, batch.src_mask, batch.tgt_in)
    weights = weights.float().cpu().unsqueeze(1)  # (batch, 1, heads, tgt_len, src_len)
    return [weights[row, :, :, : len(tgt) + 1, : len(src) + 1]
            for row, (src, tgt) in enumerate(examples)]  # fmt: skip


def teacher_forced_attention(
    model: torch.nn.Module,
    examples: Sequence[tuple[Sequence[int], Sequence[int]]],
    device: torch.device,
) -> list[torch.Tensor] | None:
    """`attention_summary` (last layer, head mean) of each example under teacher forcing:
    (len(tgt) + 1, len(src) + 1) on the CPU; None when the model has no attention."""
    weights = teacher_forced_weights(model, examples, device)
    if weights is None:
        return None
    return [attention_summary(sentence) for sentence in weights]


def read_later(attention: torch.Tensor, shift: int) -> torch.Tensor:
    """(..., tgt_len, src_len) weights whose row t is the input's row t + `shift`, the last
    `shift` rows zero (weight on no source position, so they link nothing)."""
    if shift == 0:
        return attention
    moved = torch.zeros_like(attention)
    moved[..., : max(attention.size(-2) - shift, 0), :] = attention[..., shift:, :]
    return moved


def _batch_weights(model, examples, device) -> list[torch.Tensor] | None:
    batch = collate(list(examples), list(range(len(examples)))).to(device)
    _, attention = model(batch.src, batch.src_mask, batch.tgt_in, need_weights=True)
    if attention is None:
        return None
    attention = attention.float().cpu()  # (batch, layers, heads, tgt_len, src_len)
    shift = getattr(model, "alignment_shift", 0)
    return [
        read_later(attention[row, :, :, : len(tgt) + 1, : len(src) + 1], shift)
        for row, (src, tgt) in enumerate(examples)
    ]
