"""Attention in a Jupyter notebook: the viewer page inline, a matplotlib figure, bertviz's input.

Everything here works on one `Translation` made with its weights recorded
(`Translator.translate(lines, settings, need_weights=True)`), the best output only:

* `inline_html`: the page `seq2seq-translate --html` writes (`seq2seq.visualise.viewer`,
  the same page, not a second one) in an `<iframe srcdoc=...>`. The page needs no network
  and the frame is sandboxed to run its own script only (`sandbox="allow-scripts"`, an
  origin of its own: it cannot read the notebook). The viewer's escaping keeps the text
  of a sentence inert inside the page, and the whole page is attribute-escaped once more
  inside `srcdoc`. With nothing to show (attention=none, an empty line, weights not
  recorded) it is a short note instead: displaying a result must never raise.
* `side_by_side_html`: several such pages, each under its title, in a row that wraps
  (two attention mechanisms on the same sentence, say).
* `attention_figure`: one cross-attention heatmap (`seq2seq.visualise.heatmap`, Chinese
  drawn in the bundled CJK font) of one layer and one head or the head mean, or with
  `source="layer"` one of the alignment layer (a model trained with `alignment=layer`),
  which is what it draws by default for a model with one, as the viewer opens on it.
* `bertviz_inputs`: the keyword arguments of bertviz's `head_view` in its
  encoder-decoder form (bertviz is not a dependency; nothing here imports it). bertviz
  has no place for the alignment layer: it is left out.

Layers and heads are counted from 0, as on the viewer page, in `seq2seq-align --layer L
--head H` and everywhere a person reads them.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import torch
from matplotlib.figure import Figure

from seq2seq.align.defaults import default_settings, head_marks
from seq2seq.align.teacher_forced import ATTENTION, LAYER, SOURCES, has_alignment_layer
from seq2seq.search.translator import Translation, Translator
from seq2seq.visualise.heatmap import draw_alignment, panel_marks, translation_title
from seq2seq.visualise.viewer import (
    layer_view,
    opening,
    sentence_views,
    viewer_data,
    viewer_html,
)

# The frame's height, from the page drawn in Chromium 500 to 1000 pixels wide: about 500
# pixels of title, controls, texts and scale, then per row of the heatmap its row (1.9em
# at 15px) and its share of the wrapped strips of pieces above it.
FRAME_BASE_PX = 520
FRAME_ROW_PX = 36
FRAME_MAX_PX = 1600  # taller pages scroll inside their frame
NOTE_STYLE = "padding: .5em .8em; border-left: 3px solid #f59e0b; background: #fff8e6; color: #333;"  # fmt: skip


# ---------------------------------------------------------------- what there is to show


def missing_weights(translator: Translator, translation: Translation) -> str | None:
    """Why there is no cross-attention to show for `translation`, in words; None when
    there is: an empty input line, a model without attention (attention=none), or a
    translation made without `need_weights=True`."""
    if not translation.hypotheses:
        return "nothing to show: the input line is empty"
    if translation.hypotheses[0].attention is not None:
        return None
    if translator.attention_shape() is None:
        return "the model has no attention weights to show (attention=none)"
    return "the translation was made without its attention weights: translate with need_weights=True"  # fmt: skip


def checked_weights(translator: Translator, translation: Translation) -> torch.Tensor:
    """The best output's cross-attention (layers, heads, target pieces, source pieces) in
    float32 on the CPU; ValueError saying why when there is none (`missing_weights`)."""
    problem = missing_weights(translator, translation)
    if problem is not None:
        raise ValueError(problem)
    return translation.hypotheses[0].attention.detach().float().cpu()


# ---------------------------------------------------------------- the viewer page inline


def note_html(text: str) -> str:
    """A short escaped note in place of a page that cannot be drawn."""
    return f'<div class="seq2seq-note" style="{NOTE_STYLE}">{html.escape(text)}</div>'


def frame_height(data: dict[str, Any]) -> int:
    """Pixels for the frame: room for the tallest heatmap of the page's sentence."""
    rows = max(len(view["rows"]) for view in data["sentences"][0]["views"])
    return min(FRAME_BASE_PX + FRAME_ROW_PX * rows, FRAME_MAX_PX)


def inline_html(translator: Translator, translation: Translation) -> str:
    """The viewer page of `seq2seq-translate --html` for this one translation, in an
    `<iframe srcdoc=...>` sandboxed to its own script (module docstring); a short note,
    never an exception, when there is nothing to show."""
    problem = missing_weights(translator, translation)
    if problem is not None:
        return note_html(problem)
    try:
        data = viewer_data(translator, [translation])
    except ValueError as error:  # a ViewerError (a guided head the model lacks), bad shapes
        return note_html(str(error))
    # one line: a page embedded in markdown (the docs site's notebook pages) must not hold
    # the blank lines that would end the HTML block there
    page = html.escape(viewer_html(data), quote=True).replace("\n", "&#10;")
    label = html.escape(f"attention viewer: {translation.source}", quote=True)
    return (
        f'<iframe srcdoc="{page}" sandbox="allow-scripts" title="{label}" '
        f'style="width: 100%; height: {frame_height(data)}px; border: 1px solid #ddd;"></iframe>'
    )


def side_by_side_html(entries: Sequence[tuple[str, Translator, Translation]]) -> str:
    """Each (title, translator, translation)'s `inline_html` under its title, side by side
    in a row that wraps on a narrow screen: e.g. two mechanisms on the same sentence."""
    if not entries:
        return note_html("nothing to compare: no translations given")
    panels = [
        '<figure style="flex: 1 1 480px; min-width: 360px; margin: 0;">'
        f'<figcaption style="font-weight: bold; margin: 0 0 .3em;">{html.escape(title)}</figcaption>'
        f"{inline_html(translator, translation)}</figure>"
        for title, translator, translation in entries
    ]
    return (
        '<div class="seq2seq-compare" style="display: flex; flex-wrap: wrap; gap: 1em; '
        f'align-items: flex-start;">{"".join(panels)}</div>'
    )


# ---------------------------------------------------------------- a matplotlib figure


def opening_head(
    translator: Translator, layers: int, source: str = ATTENTION
) -> tuple[int, int | None]:
    """The layer and head (None: the head mean) the viewer opens on in the cross-attention
    (`source` ATTENTION: the head alignments are read from by default, guided, else chosen
    on the valid gold, else layer 0's mean) or in the alignment layer (LAYER: its head
    mean, in its one layer 0). ValueError for a guided head the model lacks."""
    found = default_settings(translator, use_layer=source == LAYER)  # an AlignmentError is one
    start = opening(found, layers)
    return start["layer"], None if start["head"] == "mean" else start["head"]


def chosen_head(
    attention: torch.Tensor,
    layer: int | None,
    head: int | None,
    default: tuple[int, int | None],
    kind: str = "attention",
) -> tuple[int, int | None]:
    """The layer (from 0; negative counts from the end, as `seq2seq-align --layer -1`) and
    head (None: the mean) to draw of `attention` (layers, heads, ...), whose layers are
    named `kind` in messages. Neither given: `default`; only the head: the default layer;
    only the layer: its head mean. ValueError naming the one out of range."""
    layers, heads = attention.shape[:2]
    if layer is None and head is None:
        return default
    layer = default[0] if layer is None else layer
    if not -layers <= layer < layers:
        raise ValueError(
            f"layer {layer}: the model has {layers} {kind} layer(s), "
            f"0..{layers - 1} (or -{layers}..-1 from the end)"
        )
    if head is not None and not 0 <= head < heads:
        raise ValueError(f"head {head}: the model has {heads} head(s) per layer, 0..{heads - 1}")
    return layer % layers, head


def figure_source(translator: Translator, source: str | None, layer: int | None) -> str:
    """What `attention_figure` draws: `source` when given (ATTENTION, the cross-attention,
    or LAYER, the alignment layer), else the alignment layer of a model with one when no
    `layer` is named (the viewer opens on it), else the cross-attention."""
    if source is None:
        return LAYER if layer is None and has_alignment_layer(translator.model) else ATTENTION
    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
    return source


def figure_weights(translator: Translator, translation: Translation, source: str) -> torch.Tensor:
    """The best output's weights to draw, (layers, heads, target pieces, source pieces):
    the cross-attention (`checked_weights`) or the alignment layer's (one layer, its heads;
    `seq2seq.visualise.viewer.layer_view`). ValueError saying why there are none."""
    if source == ATTENTION:
        return checked_weights(translator, translation)
    if not translation.hypotheses:
        raise ValueError("nothing to show: the input line is empty")
    return layer_view(translator, translation).weights  # an AlignmentError without a layer


def attention_figure(
    translator: Translator,
    translation: Translation,
    layer: int | None = None,
    head: int | None = None,
    source: str | None = None,
) -> Figure:
    """The heatmap of the best output's cross-attention (`source="attention"`) or
    alignment layer (`source="layer"`; default: the layer of a model with one, unless a
    `layer` is named, `figure_source`): one layer and one head (None: the mean over the
    heads), counted from 0 (`chosen_head`); by default the head the viewer opens on. A
    `matplotlib.figure.Figure` on the Agg canvas (no pyplot state), Chinese in the bundled
    font. ValueError when there is nothing to draw or the layer or head is out of range."""
    source = figure_source(translator, source, layer)
    weights = figure_weights(translator, translation, source)  # (layers, heads, tgt, src)
    default = opening_head(translator, weights.shape[0], source)
    kind = "alignment" if source == LAYER else "attention"
    layer, head = chosen_head(weights, layer, head, default, kind)
    chosen = weights[layer].mean(dim=0) if head is None else weights[layer, head]
    head_text = f"head {'mean' if head is None else head}"
    if source == LAYER:
        mark, which = "word links", f"alignment layer · {head_text}"
    else:
        mark = panel_marks(head_marks(translator)).get((layer, head))
        which = f"cross-attention · layer {layer} · {head_text}"
    title = translation_title(translation.source, translation.text, translator.run_config)
    return draw_alignment(
        translation.source_pieces,
        translation.target_pieces[0],
        chosen[None, None],
        f"{title}\n{which}" + (f" · {mark}" if mark else ""),
    )


# ---------------------------------------------------------------- bertviz


def bertviz_inputs(translator: Translator, translation: Translation) -> dict[str, Any]:
    """Keyword arguments for bertviz's `head_view` in its encoder-decoder form:

        from bertviz import head_view
        head_view(**result.to_bertviz())  # or head_view(**bertviz_inputs(translator, translation))

    * `cross_attention`: one tensor per decoder attention layer, (1, heads, target
      pieces, source pieces), the weights the search used;
    * `encoder_attention` (1, heads, source, source) and `decoder_attention` (1, heads,
      target, target) per layer, for a Transformer encoder / decoder only (from one
      teacher-forced pass, as the viewer computes them). An RNN or CNN model has
      cross-attention only, and bertviz draws that alone;
    * `encoder_tokens`: the source pieces (`</s>` included); `decoder_tokens`: the output
      pieces (`</s>` included). bertviz labels both sides of the decoder's self-attention
      with this one list, so a decoder position is named by the piece it outputs (position
      t reads the piece before it, `<s>` first), as the viewer names the rows;
    * `include_layers`: the layers (from 0) that every kind given has. bertviz shows one
      layer list for all kinds and fails on a layer one of them lacks; its head boxes
      follow the first kind given (the encoder's, where there is one).

    ValueError (one line) when there is nothing to show (`missing_weights`).
    """
    checked_weights(translator, translation)
    kinds = {"cross": "cross_attention", "encoder": "encoder_attention", "decoder": "decoder_attention"}  # fmt: skip
    inputs: dict[str, Any] = {}
    for view in sentence_views(translator, translation):
        if view.name not in kinds:  # the alignment layer: no place in bertviz
            continue
        layers = view.weights.detach().float().cpu()  # (layers, heads, rows, columns)
        inputs[kinds[view.name]] = tuple(layer.unsqueeze(0) for layer in layers)
    common = min(len(inputs[name]) for name in kinds.values() if name in inputs)
    inputs |= {
        "encoder_tokens": list(translation.source_pieces),
        "decoder_tokens": list(translation.target_pieces[0]),
        "include_layers": list(range(common)),
    }
    return inputs
