"""Alignment accuracy of a toy copy / reverse model, teacher-forced on its examples.

The metric itself, `alignment_accuracy`, and the toy tasks' gold links are defined in
`seq2seq.metrics.alignment_accuracy`; the teacher-forced attention it scores comes from
`seq2seq.align.teacher_forced` (word alignments need it and sit below this layer), whose names
stay importable from here for the drawings.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from seq2seq.align.teacher_forced import attention_summary as attention_summary
from seq2seq.align.teacher_forced import teacher_forced_attention
from seq2seq.metrics.alignment_accuracy import alignment_accuracy, toy_links


def toy_alignment_accuracy(
    model: torch.nn.Module,
    examples: Sequence[tuple[Sequence[int], Sequence[int]]],
    task: str,
    device: torch.device,
) -> float | None:
    """`alignment_accuracy` of a toy copy / reverse model on `examples` (teacher forced);
    None without attention."""
    attentions = teacher_forced_attention(model, examples, device)
    if attentions is None:
        return None
    links = [toy_links(task, len(src)) for src, _ in examples]
    return alignment_accuracy(attentions, links)
