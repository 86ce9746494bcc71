"""One sentence's alignment in several trained models, as panels drawn side by side
(`seq2seq.visualise.heatmap.draw_comparison`; used by `scripts/compare_alignments.py`).

Each panel is the last attention layer's head mean: of the model's own greedy translation,
or, given a reference, of that reference teacher-forced, so that every panel has the same
rows. Models without attention weights (attention=none) give no panel. A model with an
alignment layer (`alignment=layer`) gives a second panel, `layer_panel`: the layer's head
mean over the same rows, fed the source and those rows.
"""

from __future__ import annotations

from seq2seq.align.extract import hypothesis_layer_weights
from seq2seq.align.teacher_forced import LAYER, has_alignment_layer, teacher_forced_weights
from seq2seq.config.search_settings import SearchSettings
from seq2seq.search.translator import Translator
from seq2seq.special_tokens import EOS_PIECE
from seq2seq.visualise.alignment import attention_summary, teacher_forced_attention
from seq2seq.visualise.heatmap import AlignmentPanel
from seq2seq.visualise.probes import probes_for


def greedy_panel(translator: Translator, sentence: str) -> AlignmentPanel | None:
    """The model's own translation and its attention; None without attention."""
    (translation,) = translator.translate(
        [sentence], SearchSettings(beam_size=1), need_weights=True
    )
    if not translation.hypotheses or translation.hypotheses[0].attention is None:
        return None
    weights = attention_summary(translation.hypotheses[0].attention)  # (tgt_len, src_len)
    return AlignmentPanel(
        translation.source_pieces, translation.target_pieces[0], weights.numpy(), translation.text
    )


def teacher_forced_panel(
    translator: Translator, sentence: str, reference: str
) -> AlignmentPanel | None:
    """The attention while the model is fed `reference`; None without attention."""
    src_ids = translator.src_tokenizer.encode(sentence)
    tgt_ids = translator.tgt_tokenizer.encode(reference)
    matrices = teacher_forced_attention(translator.model, [(src_ids, tgt_ids)], translator.device)
    if matrices is None:
        return None
    source = [translator.src_tokenizer.id_to_piece(i) for i in src_ids] + [EOS_PIECE]
    target = [translator.tgt_tokenizer.id_to_piece(i) for i in tgt_ids] + [EOS_PIECE]
    return AlignmentPanel(source, target, matrices[0].numpy(), reference)


def alignment_panel(
    translator: Translator, sentence: str, reference: str | None, title: str
) -> AlignmentPanel | None:
    """The panel of one model titled `title` over its text (see the module docstring)."""
    if reference:
        panel = teacher_forced_panel(translator, sentence, reference)
    else:
        panel = greedy_panel(translator, sentence)
    if panel is not None:
        panel.title = f"{title}\n{panel.title}"
    return panel


def layer_panel(
    translator: Translator, sentence: str, reference: str | None, title: str
) -> AlignmentPanel | None:
    """The alignment layer's head mean over the rows of `alignment_panel` (the greedy output,
    or `reference`), the layer fed the source and those rows (its EOS row is empty), titled
    `title · alignment layer`; None for a model without the layer or an empty output."""
    if not has_alignment_layer(translator.model):
        return None
    if reference:
        src_ids = translator.src_tokenizer.encode(sentence)
        tgt_ids = translator.tgt_tokenizer.encode(reference)
        [weights] = teacher_forced_weights(
            translator.model, [(src_ids, tgt_ids)], translator.device, LAYER
        )  # (1, heads, len(tgt_ids) + 1, len(src_ids) + 1)
        source = [translator.src_tokenizer.id_to_piece(i) for i in src_ids] + [EOS_PIECE]
        target = [translator.tgt_tokenizer.id_to_piece(i) for i in tgt_ids] + [EOS_PIECE]
        text = reference
    else:
        (translation,) = translator.translate([sentence], SearchSettings(beam_size=1))
        if not translation.hypotheses:
            return None
        [weights] = hypothesis_layer_weights(translator, translation)  # (1, heads, tgt, src)
        source, target = translation.source_pieces, translation.target_pieces[0]
        text = translation.text
    weights = attention_summary(weights)  # (tgt_len, src_len)
    return AlignmentPanel(source, target, weights.numpy(), f"{title} · alignment layer\n{text}")


def default_sentence(translator: Translator) -> str | None:
    """The first built-in probe of the model's language pair; None when there is none.
    (A probe file named in a checkpoint, `logging.probe_file`, is never read.)"""
    data = translator.run_config["data"]
    probes = probes_for(data["src_lang"], data["tgt_lang"])
    return probes[0].source if probes else None
