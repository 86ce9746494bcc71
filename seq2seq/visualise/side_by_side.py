"""One sentence's alignment in several trained models, as panels drawn side by side
(`seq2seq.visualise.heatmap.draw_comparison`; used by `scripts/compare_alignments.py`).

Each panel is the last attention layer's head mean: of the model's own greedy translation,
or, given a reference, of that reference teacher-forced, so that every panel has the same
rows. Models without attention weights (attention=none) give no panel. A model with an
alignment layer (`alignment=layer`) gives a second panel: the layer's head mean over the
same rows, fed the source and those rows (its EOS row is empty).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from seq2seq.align.extract import hypothesis_layer_weights
from seq2seq.align.teacher_forced import (
    ATTENTION,
    LAYER,
    has_alignment_layer,
    teacher_forced_weights,
)
from seq2seq.config.search_settings import SearchSettings
from seq2seq.search.translator import Translator
from seq2seq.special_tokens import EOS_PIECE
from seq2seq.visualise.alignment import attention_summary
from seq2seq.visualise.heatmap import AlignmentPanel
from seq2seq.visualise.probes import probes_for


class Rows(NamedTuple):
    """One model's weights over one sentence: the source and target pieces (EOS last), the
    target text, and the (tgt_len, src_len) head means of the translation attention's last
    layer and of the alignment layer, each None where the model has none."""

    source: list[str]
    target: list[str]
    text: str
    attention: torch.Tensor | None
    layer: torch.Tensor | None


def greedy_rows(translator: Translator, sentence: str) -> Rows | None:
    """The model's own greedy translation and its weights; None for an empty output."""
    (translation,) = translator.translate(
        [sentence], SearchSettings(beam_size=1), need_weights=True
    )
    if not translation.hypotheses:
        return None
    attention = translation.hypotheses[0].attention  # (layers, heads, tgt_len, src_len) | None
    layer = None
    if has_alignment_layer(translator.model):
        [layer] = hypothesis_layer_weights(translator, translation)  # (1, heads, tgt, src)
    return Rows(translation.source_pieces, translation.target_pieces[0], translation.text,
                summary_or_none(attention), summary_or_none(layer))  # fmt: skip


def teacher_forced_rows(translator: Translator, sentence: str, reference: str) -> Rows:
    """The model's weights while it is fed `reference`."""
    src_ids = translator.src_tokenizer.encode(sentence)
    tgt_ids = translator.tgt_tokenizer.encode(reference)
    summaries = []
    for reading in (ATTENTION, LAYER):
        found = teacher_forced_weights(translator.model, [(src_ids, tgt_ids)], translator.device,
                                       reading)  # fmt: skip
        summaries.append(None if found is None else attention_summary(found[0]))  # (tgt, src)
    source = [translator.src_tokenizer.id_to_piece(i) for i in src_ids] + [EOS_PIECE]
    target = [translator.tgt_tokenizer.id_to_piece(i) for i in tgt_ids] + [EOS_PIECE]
    return Rows(source, target, reference, *summaries)


def summary_or_none(weights: torch.Tensor | None) -> torch.Tensor | None:
    """`attention_summary` (last layer, head mean) of one sentence's (layers, heads, tgt, src)
    weights; None for None."""
    return None if weights is None else attention_summary(weights)


def model_panels(
    translator: Translator, sentence: str, reference: str | None, title: str
) -> tuple[AlignmentPanel | None, AlignmentPanel | None]:
    """The panels of one model titled `title` (module docstring): its translation attention's
    and its alignment layer's, over the same rows; either None where it has no such weights."""
    if reference:
        rows = teacher_forced_rows(translator, sentence, reference)
    else:
        rows = greedy_rows(translator, sentence)
    if rows is None:
        return None, None
    titles = (f"{title}\n{rows.text}", f"{title} · alignment layer\n{rows.text}")
    return tuple(
        None if weights is None else AlignmentPanel(rows.source, rows.target, weights.numpy(), name)
        for weights, name in zip((rows.attention, rows.layer), titles, strict=True)
    )


def default_sentence(translator: Translator) -> str | None:
    """The first built-in probe of the model's language pair; None when there is none.
    (A probe file named in a checkpoint, `logging.probe_file`, is never read.)"""
    data = translator.run_config["data"]
    probes = probes_for(data["src_lang"], data["tgt_lang"])
    return probes[0].source if probes else None
