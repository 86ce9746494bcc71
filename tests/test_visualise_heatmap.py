"""Heatmaps: legible Chinese in the bundled font, one panel per head, faithful cells."""

from __future__ import annotations

import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from helpers import compose_config
from matplotlib import font_manager
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from seq2seq.config.build import plain
from seq2seq.configs import preset_names
from seq2seq.visualise.fonts import cjk_font_family, cjk_font_path
from seq2seq.visualise.heatmap import (
    AlignmentPanel,
    describe_run,
    display_piece,
    draw_alignment,
    draw_comparison,
    figure_to_rgb,
    run_title,
    save_translation_heatmap,
)

PARTS = ("encoder", "decoder")
SOURCE = ["我", "爱", "中国", "。", "</s>"]
TARGET = ["▁I", "▁love", "▁China", ".", "</s>"]


def _weights(layers: int, heads: int, tgt_len: int = 5, src_len: int = 5) -> torch.Tensor:
    torch.manual_seed(0)
    return torch.softmax(torch.randn(layers, heads, tgt_len, src_len), dim=-1)


def _glyph_warnings(draw) -> list[str]:
    """Messages of the missing-glyph warnings raised while `draw()` renders a figure."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        draw()
    return [str(w.message) for w in caught if "missing from font" in str(w.message)]


def _image_axes(fig: Figure) -> list:
    return [ax for ax in fig.axes if ax.images]


def test_chinese_labels_render_in_the_bundled_font_without_missing_glyphs():
    fig = draw_alignment(SOURCE, TARGET, _weights(1, 1), "我爱中国。 → I love China.")
    assert _glyph_warnings(lambda: figure_to_rgb(fig)) == []
    (ax,) = _image_axes(fig)
    labels = [label for label in ax.get_xticklabels() + ax.get_yticklabels() if label.get_text()]
    assert {label.get_text() for label in ax.get_xticklabels()} >= {"我", "爱", "中\n国"}
    for label in labels + [fig._suptitle]:
        assert Path(font_manager.findfont(label.get_fontproperties())) == cjk_font_path()


def test_the_glyph_check_does_detect_boxes_in_a_latin_only_font():
    """The warning test above can fail: matplotlib's default font has no 我."""
    fig = Figure()
    FigureCanvasAgg(fig)
    fig.text(0.5, 0.5, "我爱中国", family="DejaVu Sans")
    assert _glyph_warnings(lambda: fig.canvas.draw())


def test_the_font_family_puts_the_bundled_cjk_font_first_with_a_latin_fallback():
    family = cjk_font_family()
    assert family == ("Noto Sans CJK SC", "DejaVu Sans")
    assert cjk_font_path().name == "NotoSansCJKsc-Regular.otf"


def test_two_layers_of_three_heads_give_a_panel_per_head_plus_the_mean_per_layer():
    weights = _weights(2, 3)
    fig = draw_alignment(SOURCE, TARGET, weights, "multi-head")
    panels = _image_axes(fig)
    assert len(panels) == 2 * (3 + 1)
    titles = [ax.get_title() for ax in panels]
    assert titles[:4] == [  # layers and heads numbered from 0, as weights[layer, head]
        "layer 0 · head 0",
        "layer 0 · head 1",
        "layer 0 · head 2",
        "layer 0 · mean of 3 heads",
    ]
    assert titles[4:7] == ["layer 1 · head 0", "layer 1 · head 1", "layer 1 · head 2"]
    assert titles[7] == "layer 1 · mean of 3 heads"
    mean_of_layer_1 = np.asarray(panels[7].images[0].get_array())
    np.testing.assert_allclose(mean_of_layer_1, weights[1].mean(dim=0).numpy(), rtol=1e-6)
    head_1_of_layer_0 = np.asarray(panels[1].images[0].get_array())
    np.testing.assert_allclose(head_1_of_layer_0, weights[0, 1].numpy(), rtol=1e-6)
    head_2_of_layer_1 = np.asarray(panels[6].images[0].get_array())
    np.testing.assert_allclose(head_2_of_layer_1, weights[1, 2].numpy(), rtol=1e-6)


def test_one_head_gives_one_panel_per_layer_and_layer_numbers_name_them():
    assert len(_image_axes(draw_alignment(SOURCE, TARGET, _weights(1, 1), "one"))) == 1
    fig = draw_alignment(SOURCE, TARGET, _weights(2, 1), "two layers")
    assert [ax.get_title() for ax in _image_axes(fig)] == ["layer 0", "layer 1"]  # from 0
    fig = draw_alignment(SOURCE, TARGET, _weights(2, 1), "two layers", layer_numbers=[3, 4])
    assert [ax.get_title() for ax in _image_axes(fig)] == ["layer 3", "layer 4"]


def test_a_comparison_wraps_its_panels_into_rows_of_per_row():
    panels = [AlignmentPanel(SOURCE, TARGET, _weights(1, 1)[0, 0].numpy(), f"run {i}")
              for i in range(5)]  # fmt: skip
    grid = [ax.get_subplotspec() for ax in _image_axes(draw_comparison(panels, "t", per_row=2))]
    assert [(spec.rowspan.start, spec.colspan.start) for spec in grid] == [
        (0, 0), (0, 1), (1, 0), (1, 1), (2, 0)
    ]  # fmt: skip
    one_row = _image_axes(draw_comparison(panels, "t"))
    assert {ax.get_subplotspec().rowspan.start for ax in one_row} == {0} and len(one_row) == 5
    with pytest.raises(ValueError, match="per_row"):
        draw_comparison(panels, "t", per_row=0)


def test_cells_print_their_weights_and_rows_are_target_pieces():
    weights = torch.tensor([[[[0.25, 0.75], [1.0, 0.0]]]])  # (1, 1, 2, 2)
    fig = draw_alignment(["我", "</s>"], ["▁I", "</s>"], weights, "tiny")
    (ax,) = _image_axes(fig)
    printed = {
        (round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ax.texts
    }
    assert printed == {(0, 0): ".25", (0, 1): ".75", (1, 0): "1"}  # no number on the zero
    assert [label.get_text() for label in ax.get_yticklabels()] == ["␣I", "</s>"]


def test_exact_zeros_are_masked_and_the_nonzero_span_of_each_row_is_outlined():
    window = torch.tensor(
        [
            [0.6, 0.4, 0.0, 0.0, 0.0],  # local window [0, 1]
            [0.0, 0.2, 0.5, 0.3, 0.0],  # local window [1, 3]
            [0.1, 0.2, 0.3, 0.2, 0.2],  # soft: no zero, no outline
            [0.0, 0.0, 0.0, 1.0, 0.0],  # hard choice
            [0.0, 0.0, 0.0, 0.0, 1.0],
        ]
    )
    fig = draw_alignment(SOURCE, TARGET, window[None, None], "local")
    (ax,) = _image_axes(fig)
    masked = np.ma.getmaskarray(ax.images[0].get_array())
    np.testing.assert_array_equal(masked, (window == 0).numpy())
    boxes = [(p.get_x(), p.get_y(), p.get_width()) for p in ax.patches if isinstance(p, Rectangle)]
    assert sorted(boxes) == [(-0.5, -0.5, 2), (0.5, 0.5, 3), (2.5, 2.5, 1), (3.5, 3.5, 1)]


def test_word_boundary_is_shown_as_an_open_box_not_the_raw_glyph():
    assert display_piece("▁love") == "␣love"
    assert display_piece("中国") == "中国"
    fig = draw_alignment(["▁I", "▁love", "</s>"], ["我", "爱", "</s>"], _weights(1, 1, 3, 3), "t")
    (ax,) = _image_axes(fig)
    assert [label.get_text() for label in ax.get_xticklabels()] == ["␣I", "␣love", "</s>"]


def test_weights_that_do_not_fit_the_pieces_are_refused():
    with pytest.raises(ValueError, match="5 target × 4 source"):
        draw_alignment(SOURCE[:4], TARGET, _weights(1, 1), "bad")
    with pytest.raises(ValueError, match="layers, heads, tgt_len, src_len"):
        draw_alignment(SOURCE, TARGET, _weights(1, 1)[0], "bad")


def test_figure_to_rgb_gives_the_canvas_pixels_as_uint8():
    fig = draw_alignment(SOURCE, TARGET, _weights(1, 1), "pixels")
    rgb = figure_to_rgb(fig)
    width, height = fig.get_size_inches() * fig.dpi
    assert rgb.dtype == np.uint8
    assert rgb.shape == (round(height), round(width), 3)
    assert rgb.min() < 100 and rgb.max() == 255  # dark cells and text on white


def test_save_translation_heatmap_writes_a_png_and_refuses_without_weights(tmp_path):
    config = {
        "encoder": {"_target_": "seq2seq.models.encoders.RNNEncoder", "cell": "gru"},
        "decoder": {"_target_": "seq2seq.models.decoders.RNNDecoder", "cell": "gru"},
        "attention": {"_target_": "seq2seq.models.attention.Attention", "score": "additive",
                      "region": "soft", "heads": 1},
    }  # fmt: skip
    translator = SimpleNamespace(run_config=config)
    hypothesis = SimpleNamespace(tokens=[7, 8, 9, 10], attention=_weights(1, 1))
    translation = SimpleNamespace(
        source="我爱中国。",
        source_pieces=SOURCE,
        target_pieces=[TARGET],
        hypotheses=[hypothesis],
        text="I love China.",
    )
    path = save_translation_heatmap(translator, translation, tmp_path / "align.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    hypothesis.attention = None
    with pytest.raises(ValueError, match="attention=none"):
        save_translation_heatmap(translator, translation, tmp_path / "none.png")


def test_run_description_names_the_parts_and_the_attention_settings():
    config = {
        "encoder": {"_target_": "seq2seq.models.encoders.TransformerEncoder"},
        "decoder": {"_target_": "seq2seq.models.decoders.RNNDecoder", "cell": "lstm"},
        "attention": {"_target_": "seq2seq.models.attention.Attention", "score": "general",
                      "region": {"name": "local", "mode": "predictive", "window": 3}, "heads": 2},
    }  # fmt: skip
    assert describe_run(config) == {
        "encoder": "transformer",
        "decoder": "lstm",
        "score": "general",
        "region": "local-p D=3",
        "heads": "2",
    }
    monotonic = {**config["attention"], "score": {"name": "general"}, "region": {"name": "local",
                 "mode": "monotonic"}}  # fmt: skip
    assert describe_run({**config, "attention": monotonic})["region"] == "local-m D=5"
    for estimator, name in (("straight_through", "hard"), ("reinforce", "hard (reinforce)")):
        hard = {**config["attention"], "score": {"name": "additive"},
                "region": {"name": "hard", "estimator": estimator}}  # fmt: skip
        assert describe_run({**config, "attention": hard})["region"] == name
    none = {**config, "attention": {"_target_": "seq2seq.models.attention.NoAttention"}}
    assert run_title(none, step=7) == "encoder=transformer · decoder=lstm · attention=none · step 7"
    pooled = {**none, "model": {"summary": "attention_pool"},
              "attention": {**none["attention"], "context": "attention_pool"}}  # fmt: skip
    assert run_title(pooled) == (
        "encoder=transformer · decoder=lstm · summary=attention_pool · attention=none"
        " · context=attention_pool"
    )
    mean = {**config, "model": {"summary": "mean"}}
    assert describe_run(mean)["summary"] == "mean"
    assert "summary" not in describe_run({**config, "model": {"summary": "auto"}})


@pytest.mark.parametrize(
    ("group", "preset"), [(group, name) for group in PARTS for name in preset_names(group)]
)
def test_every_preset_is_described_by_its_name(group, preset):
    """A recurrent part by its cell (gru), the others by their registered family (cnn)."""
    assert describe_run(plain(compose_config([f"{group}={preset}"])))[group] == preset
