"""An interactive attention viewer: one self-contained HTML page for a set of translations.

For every translated sentence the page holds every layer and head of

* cross-attention: row t is how much output piece t looks at each source piece, α_t(s)
  (Bahdanau et al. 2015, eq. 6), the weights of the search that produced the output, as
  `seq2seq-translate --plot` draws them;
* encoder self-attention (Transformer encoders): row i is how much source piece i looks
  at each source piece;
* decoder self-attention (Transformer decoders): row t is the position that outputs piece t;
  it reads the decoder's inputs `<s>`, y₁ … y_{t-1} (causal: nothing after its own input);
* the alignment layer (a model trained with `alignment=layer`,
  `seq2seq.models.alignment_layer`): one layer of its own heads, laid out as the
  cross-attention (row t: output piece t, columns: the source pieces, EOS included; the
  EOS row is empty). It learns word links and predicts nothing
  (`seq2seq.align.extract.hypothesis_layer_weights`: the layer fed the source and the
  model's own output).

The self-attention weights come from one teacher-forced pass over the source and the
model's own output (`recording_weights`), which is the computation the search made step by
step. RNN and CNN models have cross-attention only (an RNN's is one "layer"),
and the alignment layer where they have one.

The page needs no network: style and script are inline, the weights (rounded to 4
decimals) are one JSON blob in a `<script type="application/json">` element with `<`, `>`
and `&` written as JSON escapes, so no text of a sentence can end the element, and the
script puts text into the page with `textContent` only. Hover a row piece (or a row of the
heatmap) to shade the column pieces by its weights, a column piece for the reverse, a cell
for its exact weight; buttons switch the kind of attention, the layer and the head (or the
mean over heads).

Layers and heads are numbered from 0 on the page, in its messages and in its data, as in
the training log, the service's JSON, `seq2seq-align --layer L --head H` and the config
(`docs/guides/alignments.md`, "Layer and head numbers").

The cross-attention buttons mark the head training chose on the valid gold and a guided
model's guided head (`seq2seq.align.defaults.head_marks`; the mark is drawn by CSS, so a
button's text stays its number), and the page opens on the head alignments are read from
by default (`default_settings`); with neither, it opens on layer 0's head mean. A model
with an alignment layer reads its word links from the layer: the page opens on the
layer's head mean, marks its button and says in words that the links come from it
(`alignment.start.view` names the view; without the key the page opens on the first view,
the cross-attention).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from seq2seq.align.defaults import DEFAULT, DefaultSettings, default_settings, head_marks
from seq2seq.align.extract import AlignmentError, hypothesis_layer_weights
from seq2seq.align.teacher_forced import LAYER, has_alignment_layer
from seq2seq.data.batching import collate
from seq2seq.models.attention import recording_weights
from seq2seq.models.attention.hierarchical import sentence_labels, sentence_weights
from seq2seq.models.decoders import TransformerDecoder
from seq2seq.models.encoders import TransformerEncoder
from seq2seq.models.model import document_segments
from seq2seq.search.translator import Translation, Translator
from seq2seq.special_tokens import BOS_PIECE, EOS_ID
from seq2seq.visualise.heatmap import run_title
from seq2seq.visualise.pooling_images import pooled_weights

DECIMALS = 4  # weights in the page are rounded to this many decimals
CROSS_VIEW, LAYER_VIEW = "cross", "layer"  # the cross-attention's and the alignment layer's view
POOLING_VIEW = "pooling"  # attention pooling's weights over the source (N vs 1)
SENTENCE_VIEW = "sentences"  # hierarchical attention's weights over the source's sentences
JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}  # fmt: skip


class ViewerError(ValueError):
    """Nothing to show: every input line is empty, or the model has no attention weights."""


@dataclass
class AttentionView:
    """One kind of attention of one sentence: rows (queries) attend over columns (keys)."""

    name: str  # "cross", "layer" (the alignment layer), "encoder" or "decoder"
    title: str
    rows: list[str]  # query pieces
    columns: list[str]  # key pieces
    weights: torch.Tensor  # (layers, heads, rows, columns)
    note: str  # what a row means, for the page


# ---------------------------------------------------------------- weights from the model


def self_attention_modules(part: torch.nn.Module) -> list[torch.nn.Module]:
    """Each layer's self-attention of a Transformer encoder or decoder; [] for other kinds."""
    if isinstance(part, (TransformerEncoder, TransformerDecoder)):
        return [layer.self_attention for layer in part.layers]
    return []


@torch.no_grad()
def self_attention_weights(
    model: torch.nn.Module, source_ids: Sequence[int], target_ids: Sequence[int], device
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Encoder and decoder self-attention of one sentence pair (ids without specials) under
    teacher forcing, in float32 on the CPU: encoder (layers, heads, S + 1, S + 1), decoder
    (layers, heads, T + 1, T + 1), EOS / BOS included; None for a part without any."""
    encoder_modules = self_attention_modules(model.encoder)
    decoder_modules = self_attention_modules(model.decoder)
    if not encoder_modules and not decoder_modules:
        return None, None
    batch = collate([(list(source_ids), list(target_ids))], [0]).to(device)
    with recording_weights(encoder_modules + decoder_modules) as records:
        model(batch.src, batch.src_mask, batch.tgt_in)
    layers = [record[0][0].float().cpu() for record in records]  # (heads, len, len) each
    encoder, decoder = layers[: len(encoder_modules)], layers[len(encoder_modules) :]
    return (torch.stack(encoder) if encoder else None), (torch.stack(decoder) if decoder else None)


def source_ids_of(translator: Translator, translation: Translation) -> list[int]:
    """The source ids the model translated (truncated to its limit, as `translate` does)."""
    return translator.src_tokenizer.encode(translation.source)[: translator.max_source_len]


def best_only(translation: Translation) -> Translation:
    """The translation with its best hypothesis alone."""
    return replace(translation, hypotheses=translation.hypotheses[:1],
                   texts=translation.texts[:1], target_pieces=translation.target_pieces[:1])  # fmt: skip


def layer_view(translator: Translator, translation: Translation) -> AttentionView:
    """The alignment layer's weights over the best output (`hypothesis_layer_weights`):
    (1, heads, tgt_len, src_len), rows and columns as the cross-attention's."""
    [weights] = hypothesis_layer_weights(translator, best_only(translation))
    note = ("row: an output piece; its weights over the source pieces sum to 1 (the EOS row "
            "is empty); the layer learns word links and predicts nothing")  # fmt: skip
    return AttentionView(LAYER_VIEW, "alignment layer", translation.target_pieces[0],
                         translation.source_pieces, weights, note)  # fmt: skip


def pooling_view(translator: Translator, translation: Translation) -> AttentionView | None:
    """Attention pooling's weights over the source (`model.summary=attention_pool`, or the
    pooled context of `attention=none`): one row per pooling; None for a model without."""
    names, weights = pooled_weights(translator.model, source_ids_of(translator, translation),
                                    translator.device)  # fmt: skip
    if not names:
        return None
    note = ("row: one attention pooling of the whole source (summary: what starts the decoder; "
            "context: the one context of attention=none); its weights sum to 1")  # fmt: skip
    return AttentionView(POOLING_VIEW, "attention pooling", names, translation.source_pieces,
                         weights.unsqueeze(0).unsqueeze(0), note)  # fmt: skip


def sentence_view(translator: Translator, translation: Translation) -> AttentionView | None:
    """The sentence level of hierarchical attention on a document (`seq2seq.models.attention.
    hierarchical`): β_tk, the weight output piece t gives sentence k (its cross-attention
    weights summed per sentence); None for a model that does not read sentences."""
    attention = translation.hypotheses[0].attention  # (layers, heads, tgt_len, src_len)
    separator = getattr(translator.model, "separator_id", None)
    if attention is None or separator is None:
        return None
    source = torch.tensor([source_ids_of(translator, translation) + [EOS_ID]])  # (1, S)
    segments = document_segments(source, separator).expand(attention.size(0), -1)
    weights = sentence_weights(attention.float(), segments)  # (layers, heads, tgt_len, K)
    note = ("row: an output piece; its weights over the source's sentences sum to 1 (the "
            "sentence level of hierarchical attention; the cross-attention view shows the "
            "words, each weighted by its sentence's weight)")  # fmt: skip
    return AttentionView(SENTENCE_VIEW, "sentence level", translation.target_pieces[0],
                         sentence_labels(weights.size(-1)), weights, note)  # fmt: skip


def sentence_views(translator: Translator, translation: Translation) -> list[AttentionView]:
    """Every kind of attention the model has for the best output of one translation:
    cross-attention, the alignment layer, hierarchical attention's sentence level, attention
    pooling, encoder and decoder self-attention (those it has)."""
    best = translation.hypotheses[0]
    source, target = translation.source_pieces, translation.target_pieces[0]
    views = []
    if best.attention is not None:  # (layers, heads, tgt_len, src_len)
        note = "row: an output piece; its weights over the source pieces sum to 1"
        views.append(AttentionView(CROSS_VIEW, "cross-attention", target, source, best.attention, note))  # fmt: skip
    if has_alignment_layer(translator.model):  # (1, heads, tgt_len, src_len)
        views.append(layer_view(translator, translation))
    sentences = sentence_view(translator, translation)  # (layers, heads, tgt_len, K)
    if sentences is not None:
        views.append(sentences)
    pooled = pooling_view(translator, translation)  # (1, 1, poolings, src_len)
    if pooled is not None:
        views.append(pooled)
    encoder, decoder = self_attention_weights(
        translator.model, source_ids_of(translator, translation), best.tokens, translator.device
    )
    if encoder is not None:  # (layers, heads, src_len, src_len)
        note = "row: a source piece; its weights over the source pieces sum to 1"
        views.append(AttentionView("encoder", "encoder self-attention", source, source, encoder, note))  # fmt: skip
    if decoder is not None:  # (layers, heads, tgt_len, tgt_len)
        inputs = [BOS_PIECE] + target[:-1]  # the decoder reads <s>, then its earlier outputs
        note = "row: the position that outputs this piece; columns: the decoder's inputs (causal)"
        views.append(AttentionView("decoder", "decoder self-attention", target, inputs, decoder, note))  # fmt: skip
    return views


# ---------------------------------------------------------------- the page's data


def rounded(matrix: torch.Tensor) -> list[list[float]]:
    """(rows, columns) → nested lists of weights rounded to `DECIMALS`."""
    return [[round(weight, DECIMALS) for weight in row] for row in matrix.float().tolist()]


def view_data(view: AttentionView) -> dict[str, Any]:
    """One view as JSON-ready data: per layer every head's matrix and their mean."""
    expected = (len(view.rows), len(view.columns))
    if view.weights.dim() != 4 or tuple(view.weights.shape[2:]) != expected:
        raise ValueError(
            f"{view.title}: weights {tuple(view.weights.shape)} do not fit "
            f"{expected[0]} row × {expected[1]} column pieces"
        )
    weights = view.weights.float().cpu()  # (layers, heads, rows, columns)
    layers = [
        {"heads": [rounded(head) for head in layer], "mean": rounded(layer.mean(dim=0))}
        for layer in weights
    ]
    return {"name": view.name, "title": view.title, "note": view.note,
            "rows": view.rows, "columns": view.columns, "layers": layers}  # fmt: skip


def viewer_data(
    translator: Translator,
    translations: Sequence[Translation],
    references: Sequence[str | None] | None = None,
    title: str = "Attention viewer",
) -> dict[str, Any]:
    """The page's data: every non-empty translation's views (best output only).

    ViewerError when there is nothing to show (all lines empty, or no attention at all)."""
    references = references or [None] * len(translations)
    sentences = []
    for translation, reference in zip(translations, references):
        if not translation.hypotheses:
            continue  # an empty input line
        views = [view_data(view) for view in sentence_views(translator, translation)]
        if not views:
            raise ViewerError("the model has no attention weights to show (attention=none)")
        sentences.append({"source": translation.source, "output": translation.text,
                          "reference": reference, "views": views})  # fmt: skip
    if not sentences:
        raise ViewerError("nothing to show: every input line is empty")
    data = translator.run_config["data"]
    views = sentences[0]["views"]
    cross = next((view for view in views if view["name"] == CROSS_VIEW), None)
    alignment = (pooling_only() if cross is None and not has_alignment_layer(translator.model)
                 else alignment_data(translator, len((cross or views[0])["layers"])))  # fmt: skip
    return {"title": title, "pair": f"{data['src_lang']}→{data['tgt_lang']}",
            "model": run_title(translator.run_config), "sentences": sentences,
            "alignment": alignment}  # fmt: skip


def pooling_only() -> dict[str, Any]:
    """The alignment data of a model whose only weights are attention pooling's
    (`attention=none attention.context=attention_pool`): no word links, no marked head;
    the page opens on the pooling."""
    return {"description": "attention pooling (no attention per output piece: no word links)",
            "source": POOLING_VIEW, "reason": "the model has no attention per output piece",
            "start": {"view": POOLING_VIEW, "layer": 0, "head": "mean"}, "marks": []}  # fmt: skip


def alignment_data(translator: Translator, layers: int) -> dict[str, Any]:
    """The marked heads of the cross-attention (layer and head from 0, head None for the
    mean), where the page opens (module docstring) and that choice in words."""
    try:
        found, marks = default_settings(translator), head_marks(translator)
    except AlignmentError as error:
        raise ViewerError(str(error)) from error
    return {"description": found.description, "source": found.source,
            "reason": found.reason, "start": opening(found, layers),
            "marks": [{"layer": mark.layer, "head": mark.head, "label": mark.label,
                       "reason": mark.reason} for mark in marks]}  # fmt: skip


def opening(found: DefaultSettings, layers: int) -> dict[str, Any]:
    """Where the page opens for the default settings `found` of a model whose
    cross-attention has `layers` layers: `{"layer": L, "head": H or "mean"}` of the
    cross-attention, or with source LAYER `{"view": "layer", "layer": 0, "head": ...}`, the
    alignment layer (its one layer: the settings' layer 0 is the layer's, not the
    cross-attention's layer 0). The default source opens on layer 0's head mean."""
    head = "mean" if found.settings.head is None else found.settings.head
    if found.source == LAYER:
        return {"view": LAYER_VIEW, "layer": 0, "head": head}
    if found.source == DEFAULT:
        return {"layer": 0, "head": "mean"}
    return {"layer": found.settings.layer % layers, "head": head}


# ---------------------------------------------------------------- the page


def embedded_json(data: Any) -> str:
    """JSON that is safe inside a `<script>` element: `<`, `>`, `&` and the JavaScript line
    separators are written as `\\uXXXX` escapes (valid JSON, the same strings)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return re.sub("[<>&\u2028\u2029]", lambda match: JSON_ESCAPES[match.group()], text)


def viewer_html(data: dict[str, Any]) -> str:
    """The whole page: style, data and script inline (no network access)."""
    parts = {
        "TITLE": html.escape(data["title"]),
        "STYLE": PAGE_STYLE,
        "DATA": embedded_json(data),
        "SCRIPT": PAGE_SCRIPT,
    }  # one pass, so text from the data is never searched for placeholders
    return re.sub(r"@@(TITLE|STYLE|DATA|SCRIPT)@@", lambda match: parts[match.group(1)], PAGE)


def opening_line(data: dict[str, Any]) -> str:
    """Where the page of `data` opens and which head it marks, in words (for a message),
    layer and head counted from 0 as the page counts them."""
    alignment = data["alignment"]
    if alignment["source"] == POOLING_VIEW:
        return f"it opens on {alignment['description']}"
    if alignment["source"] == LAYER:
        return f"it opens on {alignment['description']}, which word links are read from"
    if alignment["source"] == DEFAULT:
        return "it marks no head (the checkpoint stores no choice) and opens on layer 0, head mean"
    start = alignment["start"]
    head = "head mean" if start["head"] == "mean" else f"head {start['head']}"
    return f"it opens on layer {start['layer']}, {head} ({alignment['reason']})"


def write_viewer(
    path: str | Path,
    translator: Translator,
    translations: Sequence[Translation],
    references: Sequence[str | None] | None = None,
) -> dict[str, Any]:
    """Write the viewer page of `translations` (made with need_weights=True) to `path`;
    returns the page's data (`viewer_data`)."""
    data = viewer_data(translator, translations, references)
    Path(path).write_text(viewer_html(data), encoding="utf-8")
    return data


PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>@@TITLE@@</title>
<style>@@STYLE@@</style>
</head>
<body>
<header><h1 id="title"></h1><p id="meta"></p></header>
<noscript>This page needs JavaScript to draw the attention weights.</noscript>
<section id="controls">
  <label id="sentence-choice">sentence <select id="sentence"></select></label>
  <div class="group"><span>attention</span><span id="views"></span></div>
  <div class="group"><span>layer</span><span id="layers"></span></div>
  <div class="group"><span>head</span><span id="heads"></span></div>
</section>
<section id="texts"></section>
<p id="note"></p>
<p id="marks"></p>
<p id="readout" aria-live="polite"></p>
<section id="strips">
  <div class="strip"><span class="side" id="column-side"></span><span id="column-pieces"></span></div>
  <div class="strip"><span class="side" id="row-side"></span><span id="row-pieces"></span></div>
</section>
<div id="scale"><span>0</span><span class="bar"></span><span>1</span></div>
<table id="heatmap"></table>
<script type="application/json" id="attention-data">@@DATA@@</script>
<script>@@SCRIPT@@</script>
</body>
</html>
"""

PAGE_STYLE = """
body { font: 15px/1.45 system-ui, "Noto Sans CJK SC", "PingFang SC", "Microsoft YaHei", sans-serif;
       margin: 1.2em 2em; color: #222; }
h1 { font-size: 1.3em; margin: 0; }
#meta, #note, #marks { color: #555; margin: .2em 0; }
#controls { display: flex; flex-wrap: wrap; gap: .6em 1.6em; margin: .8em 0; align-items: center; }
.group > span:first-child { margin-right: .4em; color: #555; }
button { font: inherit; padding: .1em .55em; margin: 0 .15em .15em 0; border: 1px solid #999;
         background: #f6f6f6; border-radius: 3px; cursor: pointer; }
button[aria-pressed="true"] { background: #2563eb; border-color: #2563eb; color: #fff; }
button[data-mark] { border-color: #f59e0b; box-shadow: inset 0 -3px 0 #f59e0b; }
button[data-mark]::after { content: " · " attr(data-mark); font-size: .8em; }
#texts p { margin: .15em 0; }
#texts b { display: inline-block; min-width: 6em; color: #555; font-weight: normal; }
#readout { min-height: 1.5em; font-variant-numeric: tabular-nums; background: #f3f6fb;
           padding: .3em .6em; border-radius: 3px; }
.strip { display: flex; align-items: flex-start; margin: .4em 0; }
.side { min-width: 9em; color: #555; padding-top: .25em; }
.piece { display: inline-flex; flex-direction: column; align-items: center; margin: 0 2px 2px 0;
         padding: .15em .35em; border: 1px solid #ccc; border-radius: 3px; cursor: default;
         min-width: 1.4em; }
.piece .weight { font-size: .72em; min-height: 1.2em; font-variant-numeric: tabular-nums; }
.focus { outline: 2px solid #f59e0b; outline-offset: -1px; }
#scale { display: flex; align-items: center; gap: .4em; color: #555; font-size: .85em; margin: .6em 0; }
#scale .bar { width: 10em; height: .8em; border: 1px solid #ccc;
              background: linear-gradient(to right, rgba(37,99,235,0), rgba(37,99,235,1)); }
#heatmap { border-collapse: collapse; }
#heatmap th { font-weight: normal; padding: 0 .3em; white-space: nowrap; cursor: default; }
#heatmap thead th { vertical-align: bottom; }
#heatmap td { width: 1.9em; height: 1.9em; border: 1px solid #eee; padding: 0; }
"""

PAGE_SCRIPT = r"""
"use strict";
const data = JSON.parse(document.getElementById("attention-data").textContent);
const alignment = data.alignment || { marks: [], start: { layer: 0, head: "mean" } };
const state = { sentence: 0, view: startView(), layer: alignment.start.layer, head: alignment.start.head };
const byId = (id) => document.getElementById(id);

// The view the page opens on: the one alignment.start names (the alignment layer of a
// model that reads its word links from it), else the first (the cross-attention).
function startView() {
  if (alignment.start.view === undefined || data.sentences.length === 0) return 0;
  return Math.max(data.sentences[0].views.findIndex((view) => view.name === alignment.start.view), 0);
}

// The view word links are read from, marked on its button: the alignment layer's; none
// otherwise (the marks of the cross-attention's heads say it; attention pooling gives none).
function linksMarks(views) {
  const mark = { label: "links", reason: "word links are read from " + alignment.description };
  return views.map((view) => (view.name === "layer" && alignment.source === "layer" ? [mark] : []));
}

function linksLine() {
  return alignment.source !== "layer" ? [] : ["Word links are read from " + alignment.description + "."];
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function current() {
  const sentence = data.sentences[state.sentence];
  const view = sentence.views[state.view];
  const layer = view.layers[state.layer];
  const matrix = state.head === "mean" ? layer.mean : layer.heads[state.head];
  return { sentence, view, matrix };
}

// Layers and heads are numbered from 0, as the training log, the JSON API and
// seq2seq-align number them.
function layerName(layer) {
  return "layer " + layer;
}

function headName(head) {
  return head === null || head === "mean" ? "head mean" : "head " + head;
}

function shade(node, weight) {
  node.style.backgroundColor = "rgba(37, 99, 235, " + weight + ")";
  node.style.color = weight > 0.55 ? "#fff" : "";
}

function viewMarks(view) {
  return view.name === "cross" ? alignment.marks : [];
}

function markText(marks) {
  return marks.map((mark) => mark.label).filter((label, index, all) => all.indexOf(label) === index).join(", ");
}

function buttons(container, labels, selected, choose, marks, names) {
  container.replaceChildren();
  labels.forEach((label, index) => {
    const button = element("button", "", label);
    button.setAttribute("aria-pressed", String(index === selected));
    if (names) button.setAttribute("aria-label", names[index]);
    const marked = marks ? marks[index] : [];
    if (marked.length > 0) {
      button.dataset.mark = markText(marked);
      button.title = marked.map((mark) => mark.label + ": " + mark.reason).join("; ");
    }
    button.addEventListener("click", () => { choose(index); render(); });
    container.append(button);
  });
}

function renderControls() {
  const select = byId("sentence");
  if (select.options.length === 0) {
    data.sentences.forEach((sentence, index) => {
      select.append(element("option", "", (index + 1) + ". " + sentence.source));
    });
    select.addEventListener("change", () => { state.sentence = select.selectedIndex; clampState(); render(); });
  }
  select.selectedIndex = state.sentence;
  byId("sentence-choice").hidden = data.sentences.length < 2;
  const { sentence, view } = current();
  buttons(byId("views"), sentence.views.map((v) => v.title), state.view,
          (index) => { state.view = index; clampState(); }, linksMarks(sentence.views));
  const marks = viewMarks(view);
  const layers = view.layers.map((_, index) => index);  // numbered from 0
  buttons(byId("layers"), layers.map(String), state.layer,
          (index) => { state.layer = index; },
          layers.map((layer) => marks.filter((mark) => mark.layer === layer)), layers.map(layerName));
  const heads = ["mean"].concat(view.layers[state.layer].heads.map((_, index) => index));
  const inLayer = marks.filter((mark) => mark.layer === state.layer);
  buttons(byId("heads"), heads.map(String), state.head === "mean" ? 0 : state.head + 1,
          (index) => { state.head = heads[index]; },
          heads.map((head) => inLayer.filter((mark) => mark.head === (head === "mean" ? null : head))),
          heads.map(headName));
}

function clampState() {
  const views = data.sentences[state.sentence].views;
  state.view = Math.min(state.view, views.length - 1);
  const layers = views[state.view].layers;
  state.layer = Math.min(state.layer, layers.length - 1);
  if (state.head !== "mean") state.head = Math.min(state.head, layers[state.layer].heads.length - 1);
}

function renderTexts() {
  const { sentence, view } = current();
  const texts = byId("texts");
  texts.replaceChildren();
  const lines = [["source", sentence.source], ["output", sentence.output]];
  if (sentence.reference !== null) lines.push(["reference", sentence.reference]);
  for (const [label, text] of lines) {
    const line = element("p");
    line.append(element("b", "", label), element("span", "", text));
    texts.append(line);
  }
  byId("note").textContent = view.title + ", " + layerName(state.layer) + ", " + headName(state.head) +
    ". " + view.note + ".";
  byId("marks").textContent = linksLine().concat(viewMarks(view).map((mark) => "Marked " + mark.label +
    ": " + layerName(mark.layer) + ", " + headName(mark.head) + " (" + mark.reason + ").")).join(" ");
}

function sides(view) {
  if (view.name === "cross" || view.name === "layer") return { columns: "source pieces", rows: "output pieces" };
  if (view.name === "encoder") return { columns: "source (keys)", rows: "source (queries)" };
  return { columns: "decoder inputs", rows: "output pieces" };
}

function renderStrips() {
  const { view } = current();
  byId("column-side").textContent = sides(view).columns;
  byId("row-side").textContent = sides(view).rows;
  fillStrip(byId("column-pieces"), view.columns, "column");
  fillStrip(byId("row-pieces"), view.rows, "row");
}

function fillStrip(container, pieces, side) {
  container.replaceChildren();
  pieces.forEach((piece, index) => {
    const chip = element("span", "piece");
    chip.dataset.side = side;
    chip.dataset.index = String(index);
    chip.append(element("span", "text", piece), element("span", "weight"));
    chip.addEventListener("mouseenter", () => (side === "row" ? focusRow(index) : focusColumn(index)));
    chip.addEventListener("mouseleave", clearFocus);
    container.append(chip);
  });
}

function renderHeatmap() {
  const { view, matrix } = current();
  const table = byId("heatmap");
  table.replaceChildren();
  const head = element("tr");
  head.append(element("th"));
  view.columns.forEach((piece, column) => {
    const cell = element("th", "column-label", piece);
    cell.dataset.index = String(column);
    cell.addEventListener("mouseenter", () => focusColumn(column));
    cell.addEventListener("mouseleave", clearFocus);
    head.append(cell);
  });
  table.appendChild(element("thead")).append(head);
  const body = table.appendChild(element("tbody"));
  matrix.forEach((weights, row) => {
    const line = body.appendChild(element("tr"));
    const label = line.appendChild(element("th", "row-label", view.rows[row]));
    label.dataset.index = String(row);
    label.addEventListener("mouseenter", () => focusRow(row));
    label.addEventListener("mouseleave", clearFocus);
    weights.forEach((weight, column) => {
      const cell = line.appendChild(element("td", "cell"));
      cell.dataset.row = String(row);
      cell.dataset.column = String(column);
      cell.dataset.weight = weight.toFixed(4);
      cell.title = view.rows[row] + " → " + view.columns[column] + ": " + weight.toFixed(4);
      shade(cell, weight);
      cell.addEventListener("mouseenter", () => focusCell(row, column));
      cell.addEventListener("mouseleave", clearFocus);
    });
  });
}

function chips(side) {
  return Array.from(document.querySelectorAll('.piece[data-side="' + side + '"]'));
}

function showWeights(side, weights) {
  chips(side).forEach((chip, index) => {
    shade(chip, weights[index]);
    chip.querySelector(".weight").textContent = weights[index].toFixed(4);
  });
}

function mark(selector, index) {
  document.querySelectorAll(selector).forEach((node) => {
    node.classList.toggle("focus", node.dataset.index === String(index));
  });
}

function focusRow(row) {
  const { view, matrix } = current();
  clearFocus();
  showWeights("column", matrix[row]);
  mark('.piece[data-side="row"]', row);
  mark(".row-label", row);
  const top = matrix[row].indexOf(Math.max(...matrix[row]));
  byId("readout").textContent = "“" + view.rows[row] + "” (row " + (row + 1) + ") attends most to “" +
    view.columns[top] + "”: " + matrix[row][top].toFixed(4) + "; the " + sides(view).columns +
    " show all its weights.";
}

function focusColumn(column) {
  const { view, matrix } = current();
  clearFocus();
  const weights = matrix.map((row) => row[column]);
  showWeights("row", weights);
  mark('.piece[data-side="column"]', column);
  mark(".column-label", column);
  const top = weights.indexOf(Math.max(...weights));
  byId("readout").textContent = "“" + view.columns[column] + "” (column " + (column + 1) +
    ") gets most from “" + view.rows[top] + "”: " + weights[top].toFixed(4) + "; the " +
    sides(view).rows + " show the weight each gives it.";
}

function focusCell(row, column) {
  const { view, matrix } = current();
  focusRow(row);
  mark('.piece[data-side="column"]', column);
  mark(".column-label", column);
  document.querySelector('#heatmap td[data-row="' + row + '"][data-column="' + column + '"]')
    .classList.add("focus");
  byId("readout").textContent = "“" + view.rows[row] + "” (row " + (row + 1) + ") → “" +
    view.columns[column] + "” (column " + (column + 1) + "): " + matrix[row][column].toFixed(4) +
    " (" + view.title + ", " + layerName(state.layer) + ", " + headName(state.head) + ")";
}

function clearFocus() {
  for (const chip of document.querySelectorAll(".piece")) {
    chip.style.backgroundColor = "";
    chip.style.color = "";
    chip.querySelector(".weight").textContent = "";
  }
  document.querySelectorAll(".focus").forEach((node) => node.classList.remove("focus"));
  byId("readout").textContent = "Hover a piece or a cell to read its weights.";
}

function render() {
  clampState();
  renderControls();
  renderTexts();
  renderStrips();
  renderHeatmap();
  clearFocus();
}

byId("title").textContent = data.title;
byId("meta").textContent = data.pair + " · " + data.model + " · " + data.sentences.length +
  (data.sentences.length === 1 ? " sentence" : " sentences") + " · rows attend over columns";
render();
"""
