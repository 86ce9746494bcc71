"""Attention in a notebook (`seq2seq.visualise.notebook`): the viewer page inline in a
sandboxed frame, side by side, a matplotlib figure of one layer and head, and bertviz's
keyword arguments, all checked against the model's own weights."""

from __future__ import annotations

import json
import re
import shutil
import warnings
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib import font_manager
from test_viewer import GRU, TRANSFORMER, self_attention_by_hand, toy_checkpoint

from seq2seq.checkpoint import AlignmentChoice
from seq2seq.config.search_settings import SearchSettings
from seq2seq.search.translator import Translation, Translator
from seq2seq.visualise.fonts import cjk_font_path
from seq2seq.visualise.heatmap import figure_to_rgb
from seq2seq.visualise.notebook import (
    attention_figure,
    bertviz_inputs,
    inline_html,
    side_by_side_html,
)
from seq2seq.visualise.viewer import embedded_json, viewer_data, viewer_html

LINE = "a b c d e"
HOSTILE = "</script><script>alert(1)</script>"


@pytest.fixture(scope="module")
def transformer(tmp_path_factory) -> Translator:
    """1 encoder layer of 4 heads; 2 decoder layers, 2 self-attention and 4 cross heads."""
    return Translator.load(toy_checkpoint(tmp_path_factory.mktemp("transformer"), TRANSFORMER))


@pytest.fixture(scope="module")
def gru(tmp_path_factory) -> Translator:
    overrides = GRU + ["attention=additive"]
    return Translator.load(toy_checkpoint(tmp_path_factory.mktemp("gru"), overrides))


@pytest.fixture(scope="module")
def without_attention(tmp_path_factory) -> Translator:
    overrides = GRU + ["attention=none"]
    return Translator.load(toy_checkpoint(tmp_path_factory.mktemp("none"), overrides))


def translated(translator: Translator, line: str = LINE) -> Translation:
    (translation,) = translator.translate([line], SearchSettings(), need_weights=True)
    return translation


class Elements(HTMLParser):
    """The start tags of a piece of HTML with their attributes (values unescaped), and its
    text outside tags."""

    def __init__(self, markup: str):
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def frames(self) -> list[dict[str, str | None]]:
        return [attrs for tag, attrs in self.tags if tag == "iframe"]


def page_data(page: str) -> dict:
    found = re.search(r'<script type="application/json" id="attention-data">(.*?)</script>', page, re.S)  # fmt: skip
    return json.loads(found.group(1))


# ---------------------------------------------------------------- the page inline


def test_the_frame_holds_exactly_the_viewer_page_sandboxed(transformer):
    translation = translated(transformer)
    markup = inline_html(transformer, translation)
    (frame,) = Elements(markup).frames()
    assert frame["srcdoc"] == viewer_html(viewer_data(transformer, [translation]))
    assert frame["sandbox"] == "allow-scripts"  # its own script, an origin of its own
    assert re.search(r"height: \d+px", frame["style"])
    assert "<script" not in markup.lower()  # the page is attribute-escaped, inert here
    for external in ("http://", "https://", "<link", "url("):
        assert external not in frame["srcdoc"]


def test_a_hostile_piece_stays_text_in_the_page(transformer):
    translation = translated(transformer)
    sources = [HOSTILE] + translation.source_pieces[1:]
    targets = [HOSTILE] + translation.target_pieces[0][1:]
    hostile = replace(translation, source_pieces=sources, target_pieces=[targets])
    (frame,) = Elements(inline_html(transformer, hostile)).frames()
    page = frame["srcdoc"]
    assert page.lower().count("<script") == 2 and page.lower().count("</script") == 2  # its own
    assert HOSTILE not in page
    assert embedded_json(HOSTILE)[1:-1] in page  # only JSON-escaped, inside the data
    sentence = page_data(page)["sentences"][0]
    cross = sentence["views"][0]
    assert cross["rows"][0] == HOSTILE and cross["columns"][0] == HOSTILE


def test_nothing_to_show_is_a_note_not_an_exception(without_attention, transformer):
    note = inline_html(without_attention, translated(without_attention))
    assert "attention=none" in note and Elements(note).frames() == []
    empty = inline_html(transformer, translated(transformer, ""))
    assert "empty" in empty and Elements(empty).frames() == []
    (unrecorded,) = transformer.translate([LINE], SearchSettings(), need_weights=False)
    assert "need_weights=True" in inline_html(transformer, unrecorded)


def test_side_by_side_holds_both_pages_under_their_escaped_titles(transformer, gru):
    first, second = translated(transformer), translated(gru)
    titles = ["<b>multihead</b> & co", 'additive "soft"']
    markup = side_by_side_html([(titles[0], transformer, first), (titles[1], gru, second)])
    elements = Elements(markup)
    pages = [viewer_html(viewer_data(t, [x])) for t, x in ((transformer, first), (gru, second))]
    assert [frame["srcdoc"] for frame in elements.frames()] == pages
    assert [tag for tag, _ in elements.tags].count("b") == 0  # a title is text, not markup
    assert [text for text in elements.text if text.strip()] == titles
    assert "flex-wrap: wrap" in elements.tags[0][1]["style"]


# ---------------------------------------------------------------- the figure


def drawn(figure) -> np.ndarray:
    """The weights of the figure's one heatmap (zero cells are masked when drawn)."""
    (image,) = [image for axes in figure.axes for image in axes.images]
    return np.ma.filled(image.get_array(), 0.0)


def test_the_figure_draws_the_chosen_layer_and_head(transformer):
    translation = translated(transformer)
    attention = translation.hypotheses[0].attention.float()  # (2 layers, 4 heads, T, S)
    cases = {(1, 2): attention[1, 2], (1, None): attention[1].mean(0),
             (-1, 0): attention[1, 0], (None, 3): attention[0, 3]}  # fmt: skip
    for (layer, head), expected in cases.items():
        figure = attention_figure(transformer, translation, layer=layer, head=head)
        assert np.allclose(drawn(figure), expected.numpy(), atol=1e-6), (layer, head)
    title = attention_figure(transformer, translation, layer=1, head=2)._suptitle.get_text()
    assert title.endswith("cross-attention · layer 1 · head 2")


def test_by_default_the_figure_shows_the_head_the_viewer_opens_on(transformer, gru):
    translation = translated(transformer)
    attention = translation.hypotheses[0].attention.float()
    figure = attention_figure(transformer, translation)  # no stored choice: layer 0, mean
    assert np.allclose(drawn(figure), attention[0].mean(0).numpy(), atol=1e-6)
    transformer.alignment_choice = AlignmentChoice(layer=1, head=3, aer=0.25, step=2)
    try:
        figure = attention_figure(transformer, translation)
    finally:
        transformer.alignment_choice = None
    assert np.allclose(drawn(figure), attention[1, 3].numpy(), atol=1e-6)
    assert figure._suptitle.get_text().endswith("layer 1 · head 3 · chosen")
    one = translated(gru)
    assert np.allclose(drawn(attention_figure(gru, one)), one.hypotheses[0].attention[0, 0].numpy(), atol=1e-6)  # fmt: skip


def test_a_layer_or_head_out_of_range_is_a_one_line_error(transformer, without_attention):
    translation = translated(transformer)
    for options, words in (({"layer": 2}, "layer 2"), ({"layer": -3}, "layer -3"),
                           ({"layer": 0, "head": 4}, "head 4")):  # fmt: skip
        with pytest.raises(ValueError, match=words) as raised:
            attention_figure(transformer, translation, **options)
        assert "\n" not in str(raised.value)
    with pytest.raises(ValueError, match="attention=none"):
        attention_figure(without_attention, translated(without_attention))


def test_the_figure_writes_chinese_pieces_in_the_cjk_font(transformer):
    translation = translated(transformer)
    chinese = ["我", "爱", "中", "国", "。", "</s>"][-len(translation.source_pieces) :]
    figure = attention_figure(transformer, replace(translation, source_pieces=chinese))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        figure_to_rgb(figure)
    assert not [w for w in caught if "missing from font" in str(w.message)]
    (axes,) = [axes for axes in figure.axes if axes.images]
    labels = [label for label in axes.get_xticklabels() if label.get_text() in chinese]
    assert labels and all(Path(font_manager.findfont(label.get_fontproperties())) == cjk_font_path()
                          for label in labels)  # fmt: skip


# ---------------------------------------------------------------- bertviz


def test_bertviz_inputs_hold_every_kind_of_attention_per_layer(transformer):
    translation = translated(transformer)
    inputs = bertviz_inputs(transformer, translation)
    model, best = transformer.model, translation.hypotheses[0]
    source, target = len(translation.source_pieces), len(translation.target_pieces[0])
    assert inputs["encoder_tokens"] == translation.source_pieces
    assert inputs["decoder_tokens"] == translation.target_pieces[0]
    shapes = {name: [tuple(layer.shape) for layer in inputs[name]]
              for name in ("encoder_attention", "decoder_attention", "cross_attention")}  # fmt: skip
    assert shapes == {
        "encoder_attention": [(1, 4, source, source)] * len(model.encoder.layers),
        "decoder_attention": [(1, 2, target, target)] * len(model.decoder.layers),
        "cross_attention": [(1, 4, target, source)] * len(model.decoder.layers),
    }
    cross = torch.cat(inputs["cross_attention"])  # (layers, heads, T, S)
    assert torch.allclose(cross.sum(-1), torch.ones(cross.shape[:-1]), atol=1e-5)
    assert torch.allclose(cross, best.attention.float(), atol=1e-6)
    source_ids = transformer.src_tokenizer.encode(translation.source)
    encoder, decoder = self_attention_by_hand(model, source_ids, best.tokens)
    assert torch.allclose(torch.cat(inputs["encoder_attention"]), encoder, atol=1e-5)
    assert torch.allclose(torch.cat(inputs["decoder_attention"]), decoder, atol=1e-5)
    assert inputs["include_layers"] == [0]  # the one layer every kind has


def test_bertviz_inputs_of_an_rnn_are_cross_attention_only(gru, without_attention):
    translation = translated(gru)
    inputs = bertviz_inputs(gru, translation)
    assert set(inputs) == {"cross_attention", "encoder_tokens", "decoder_tokens", "include_layers"}  # fmt: skip
    (layer,) = inputs["cross_attention"]
    assert layer.shape == (1, 1, len(translation.target_pieces[0]), len(translation.source_pieces))
    assert torch.allclose(layer.sum(-1), torch.ones(layer.shape[:-1]), atol=1e-5)
    with pytest.raises(ValueError, match="attention=none"):
        bertviz_inputs(without_attention, translated(without_attention))


def test_bertviz_draws_them_when_it_is_installed(transformer):
    bertviz = pytest.importorskip("bertviz", reason="bertviz is optional and not installed")
    translation = translated(transformer)
    page = bertviz.head_view(**bertviz_inputs(transformer, translation), html_action="return")
    assert "Cross" in page.data and "Encoder" in page.data


# ---------------------------------------------------------------- in a browser


@pytest.mark.slow
def test_each_frame_runs_its_own_page_and_nothing_else(transformer, gru, tmp_path):
    """Headless Chromium (skips without it): each sandboxed frame draws its heatmap, the
    hostile piece is a label's text, no dialog opens, and a frame cannot reach the page
    around it."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no chromium on PATH (apt-get install chromium)")
    first, second = translated(transformer), translated(gru)
    targets = [HOSTILE] + first.target_pieces[0][1:]
    hostile = replace(first, target_pieces=[targets])
    markup = side_by_side_html([("multihead", transformer, hostile), ("additive", gru, second)])
    document = tmp_path / "notebook.html"
    document.write_text(f'<!DOCTYPE html><meta charset="utf-8"><title>outer</title>{markup}', encoding="utf-8")  # fmt: skip
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        problems: list[str] = []
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.on("dialog", lambda dialog: (problems.append(dialog.message), dialog.dismiss()))
        page.goto(document.as_uri())
        frames = [frame for frame in page.frames if frame != page.main_frame]
        for frame, translation in zip(frames, (hostile, second)):
            frame.wait_for_selector("#heatmap td")
            cells = frame.eval_on_selector_all("#heatmap td", "cells => cells.length")
            assert cells == len(translation.target_pieces[0]) * len(translation.source_pieces)
            reach = (
                "() => { try { return parent.document.title; } catch (e) { return 'blocked'; } }"
            )
            assert frame.evaluate(reach) == "blocked"
        labels = frames[0].eval_on_selector_all(".row-label", "nodes => nodes.map(n => n.textContent)")  # fmt: skip
        browser.close()
    assert len(frames) == 2 and labels[0] == HOSTILE and problems == []
