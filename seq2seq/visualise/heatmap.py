"""Attention heatmaps with legible Chinese: target pieces down, source pieces across.

How to read one:

* One panel is one attention matrix: row t is the distribution the decoder used while
  predicting target piece t, column s is source piece s; colour = weight on a fixed 0..1
  scale (so images at different training steps compare directly). The weight is printed
  in each cell when the matrix is at most 16 × 16 and the figure has at most 5 panels
  (more numbers would be unreadable, and slow to draw).
* Several heads: one panel per head plus their mean, one grid row per decoder attention
  layer. A single head: one panel per layer. Layers and heads are numbered from 0, as
  everywhere in the project (`layer 1 · head 2` is `seq2seq-align --layer 1 --head 2`).
  A marked panel says so in its title (`layer 1 · head 2 · chosen`): the head training
  chose on the valid gold, the guided head (`seq2seq.align.defaults`).
* Cells whose weight is exactly 0 are hatched grey, and where a row has such cells its
  non-zero span is outlined: hard attention shows the one chosen cell, local attention
  its window; soft attention has no exact zeros and no outlines.
* sentencepiece's word-boundary mark ▁ is shown as "␣" (open box, U+2423) at the start
  of a piece: `▁love` → `␣love`. A visible space mark cannot be mistaken for text (the
  middle dot "·" can: Chinese writes it between the parts of foreign names).
  Chinese source pieces are written top to bottom (每/天/早/上), so they stay upright in
  a narrow column; long Latin source pieces are turned 90°.

Figures are built with `matplotlib.figure.Figure` and the Agg canvas, never pyplot, so
nothing here touches a global backend or opens a window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.patches import Rectangle

from seq2seq import registry
from seq2seq.align.defaults import HeadMark
from seq2seq.models.attention.options import attention_choice, component_node
from seq2seq.visualise.fonts import cjk_font_family
from seq2seq.visualise.text_matrix import WORD_BOUNDARY, display_width

SHOWN_BOUNDARY = "␣"
COLOUR_MAP = "Blues"
ZERO_COLOUR = "#eeeeee"  # background showing through cells of exactly zero weight
CELL_INCHES = 0.42  # side of one matrix cell
MAX_ANNOTATED_SIDE = 16  # print weights in the cells when T and S are at most this
MAX_ANNOTATED_PANELS = 5  # ... and the figure has at most this many panels (drawing cost)
MAX_UPRIGHT_LABEL = 5  # wider Latin source labels (in terminal columns) are turned 90°
DPI = 100
TITLE_INCHES_PER_COLUMN = 0.09  # width of the title per terminal column (CJK: 2 columns)
MAX_TITLE_TEXT = 60  # characters of a sentence shown in a title


@dataclass
class AlignmentPanel:
    """One matrix to draw: weights (tgt_len, src_len) with its labels and panel title."""

    source_pieces: list[str]
    target_pieces: list[str]
    weights: np.ndarray  # (tgt_len, src_len)
    title: str = ""


def display_piece(piece: str) -> str:
    """sentencepiece's ▁ shown as a visible space mark: `▁love` → `␣love`."""
    return piece.replace(WORD_BOUNDARY, SHOWN_BOUNDARY)


def draw_alignment(
    source_pieces: Sequence[str],
    target_pieces: Sequence[str],
    weights: torch.Tensor,
    title: str,
    *,
    layer_numbers: Sequence[int] | None = None,
    marks: Mapping[tuple[int, int | None], str] | None = None,
) -> Figure:
    """Heatmap(s) of `weights` (layers, heads, tgt_len, src_len), one grid row per layer.

    With one head each row holds one panel; with H > 1 heads it holds H panels and their
    mean. Only the first column shows the target labels and the first row the source
    labels, since every panel shares them. Layers and heads are numbered from 0.
    `layer_numbers` names the layers in the panel titles (default 0, 1, ...; pass e.g. [2]
    when `weights` holds only the last of three). `marks` adds a word to the titles of some
    panels: {(layer number, head number, or None for the head mean and for a one-head
    layer): "chosen"}.
    """
    matrices = _as_numpy(weights)  # (layers, heads, tgt_len, src_len)
    _check_shape(matrices, len(source_pieces), len(target_pieces))
    numbers = list(layer_numbers) if layer_numbers is not None else list(range(len(matrices)))
    if len(numbers) != len(matrices):
        raise ValueError(f"layer_numbers has {len(numbers)} entries for {len(matrices)} layers")
    rows = [
        _layer_panels(number, layer, source_pieces, target_pieces, marks or {})
        for number, layer in zip(numbers, matrices, strict=True)
    ]
    if len(rows) == 1 and len(rows[0]) == 1:
        rows[0][0].title = ""
    return _draw_grid(rows, title, shared_labels=True)


def draw_comparison(
    panels: Sequence[AlignmentPanel], title: str, per_row: int | None = None
) -> Figure:
    """Panels side by side, each with its own labels (e.g. one per run of a sweep), at most
    `per_row` in a row (None: all in one row)."""
    if not panels:
        raise ValueError("draw_comparison needs at least one panel")
    if per_row is not None and per_row < 1:
        raise ValueError(f"per_row must be at least 1, got {per_row}")
    for panel in panels:
        _check_shape(panel.weights[None, None], len(panel.source_pieces), len(panel.target_pieces))
    width = per_row or len(panels)
    rows = [list(panels[start : start + width]) for start in range(0, len(panels), width)]
    return _draw_grid(rows, title, shared_labels=False)


def figure_to_rgb(fig: Figure) -> np.ndarray:
    """Render with Agg: (height, width, 3) uint8, ready for TensorBoard."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def panel_marks(marks: Sequence[HeadMark]) -> dict[tuple[int, int | None], str]:
    """`draw_alignment`'s marks of some `HeadMark`s, both counted from 0: {(layer, head or
    None for the head mean): "guided, chosen"}."""
    panels: dict[tuple[int, int | None], str] = {}
    for mark in marks:
        key = (mark.layer, mark.head)
        panels[key] = f"{panels[key]}, {mark.label}" if key in panels else mark.label
    return panels


def save_translation_heatmap(
    translator: Any, translation: Any, path: str | Path, marks: Sequence[HeadMark] = ()
) -> Path:
    """PNG of the best hypothesis's attention for one `seq2seq.search.translator.Translation`,
    with `marks` (the guided and chosen heads) in their panels' titles.

    Raises ValueError when there is nothing to draw (an empty input line, or a model
    without attention / weights not requested).
    """
    if not translation.hypotheses:
        raise ValueError(f"no translation to plot for the input line {translation.source!r}")
    attention = translation.hypotheses[0].attention  # (layers, heads, tgt_len, src_len)
    if attention is None:
        raise ValueError(
            "no attention weights to plot: the model uses attention=none, "
            "or the translation was made with need_weights=False"
        )
    title = translation_title(translation.source, translation.text, translator.run_config)
    fig = draw_alignment(
        translation.source_pieces,
        translation.target_pieces[0],
        attention,
        title,
        marks=panel_marks(marks),
    )
    path = Path(path)
    fig.savefig(path, dpi=150)
    return path


# ---------------------------------------------------------------- titles from a run's config


def describe_run(config: Mapping[str, Any]) -> dict[str, str]:
    """What distinguishes a model: encoder, decoder and attention settings, as short strings
    (a local region's mode and window, `local-p D=5`; a hard region's estimator when it is
    not the default, `hard (reinforce)`), `alignment: guided` for a model trained with guided
    alignment, and the summary that starts the decoder (`model.summary`) and the fixed context
    of `attention=none` (`attention.context`) where they are not the defaults (auto, mean).
    `config` is the run's config as plain data (`Translator.run_config`,
    `TrainerSettings.run_config`)."""
    described = {group: _part_name(group, config[group]) for group in ("encoder", "decoder")}
    model = config.get("model")  # older configs: no summary key
    summary = model.get("summary", "auto") if isinstance(model, Mapping) else "auto"
    if summary != "auto":
        described["summary"] = summary
    attention = config["attention"]
    choice = attention_choice(attention)
    if choice is None:  # attention=none
        described["attention"] = registry.of_node("attention", attention).name
        context = attention.get("context", "mean")
        return described | ({"context": context} if context != "mean" else {})
    score, region = choice
    if region in ("local", "hard"):
        region = _region_name(region, component_node("region", attention["region"]))
    described |= {"score": score, "region": region, "heads": str(attention["heads"])}
    if (config.get("alignment") or {}).get("guided"):
        described["alignment"] = "guided"
    return described


def _region_name(name: str, options: Mapping[str, Any]) -> str:
    """`local-p D=5` / `local-m D=5`; `hard (reinforce)` for a hard region whose estimator
    is not the default (straight-through keeps the plain name `hard`)."""
    if name == "local":
        return f"local-{options['mode'][0]} D={options['window']}"
    estimator = options.get("estimator", "straight_through")
    return name if estimator == "straight_through" else f"{name} ({estimator})"


def run_title(cfg: Mapping[str, Any], step: int | None = None) -> str:
    """`encoder=gru · decoder=gru · score=additive · region=soft · heads=1 · step 500`."""
    parts = [f"{key}={value}" for key, value in describe_run(cfg).items()]
    if step is not None:
        parts.append(f"step {step}")
    return " · ".join(parts)


def translation_title(
    source: str, output: str, cfg: Mapping[str, Any], step: int | None = None
) -> str:
    """`我爱中国。 → I love China.` over the run's description on two lines (encoder and
    decoder, then attention and step), so that the title does not widen the figure."""
    parts = run_title(cfg, step).split(" · ")
    description = " · ".join(parts[:2]) + "\n" + " · ".join(parts[2:])
    return f"{_shorten(source)}  →  {_shorten(output)}\n{description}"


def _shorten(text: str) -> str:
    return text if len(text) <= MAX_TITLE_TEXT else text[: MAX_TITLE_TEXT - 1] + "…"


def _part_name(group: str, node: Mapping[str, Any]) -> str:
    """The registered family name ("cnn", "transformer"); a recurrent part shows its cell
    ("gru")."""
    return str(node.get("cell", registry.of_node(group, node).name))


# ---------------------------------------------------------------- drawing


def _as_numpy(weights: torch.Tensor | np.ndarray) -> np.ndarray:
    if isinstance(weights, torch.Tensor):
        weights = weights.detach().float().cpu().numpy()
    matrices = np.asarray(weights, dtype=np.float32)
    if matrices.ndim != 4:
        raise ValueError(
            f"weights must be (layers, heads, tgt_len, src_len), got shape {matrices.shape}"
        )
    return matrices


def _check_shape(matrices: np.ndarray, num_source: int, num_target: int) -> None:
    if matrices.shape[-2:] != (num_target, num_source):
        raise ValueError(
            f"weights of shape {matrices.shape} do not fit {num_target} target × "
            f"{num_source} source pieces (expected (..., {num_target}, {num_source}))"
        )
    if matrices.shape[-1] == 0 or matrices.shape[-2] == 0:
        raise ValueError("cannot draw an alignment with no source or no target pieces")


def _layer_panels(
    layer: int,
    heads: np.ndarray,
    source_pieces: Sequence[str],
    target_pieces: Sequence[str],
    marks: Mapping[tuple[int, int | None], str],
) -> list[AlignmentPanel]:
    """heads (heads, tgt_len, src_len) → one panel per head (numbered from 0), plus the
    mean when heads > 1; a marked panel's title ends in its mark (`draw_alignment`)."""
    src, tgt = list(source_pieces), list(target_pieces)

    def title(text: str, head: int | None) -> str:
        mark = marks.get((layer, head))
        return f"{text} · {mark}" if mark else text

    if len(heads) == 1:
        return [AlignmentPanel(src, tgt, heads[0], title(f"layer {layer}", None))]
    panels = [
        AlignmentPanel(src, tgt, matrix, title(f"layer {layer} · head {head}", head))
        for head, matrix in enumerate(heads)
    ]
    mean_title = title(f"layer {layer} · mean of {len(heads)} heads", None)
    return panels + [AlignmentPanel(src, tgt, heads.mean(axis=0), mean_title)]


def _draw_grid(rows: list[list[AlignmentPanel]], title: str, shared_labels: bool) -> Figure:
    """A figure with one axes per panel, a shared colour bar and the title."""
    with matplotlib.rc_context({"font.family": list(cjk_font_family())}):
        fig = _new_figure(rows, title, shared_labels)
        axes = fig.subplots(len(rows), max(len(row) for row in rows), squeeze=False)
        image = None
        annotate = sum(len(row) for row in rows) <= MAX_ANNOTATED_PANELS
        for r, row in enumerate(rows):
            for c, ax in enumerate(axes[r]):
                if c >= len(row):
                    ax.set_axis_off()
                    continue
                show_x, show_y = (r == 0, c == 0) if shared_labels else (True, True)
                image = _draw_panel(ax, row[c], show_x, show_y, annotate)
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="attention weight")
        fig.suptitle(title)
    return fig


def _new_figure(rows: list[list[AlignmentPanel]], title: str, shared_labels: bool) -> Figure:
    """Size the figure so that every cell is CELL_INCHES square, whatever the matrix size,
    and the title fits."""
    widest = max(sum(panel.weights.shape[1] for panel in row) for row in rows)
    tallest = max(panel.weights.shape[0] for row in rows for panel in row)
    panels_across = max(len(row) for row in rows)
    label_margin = 0.4 if shared_labels else 1.2  # inches beside each panel
    width = CELL_INCHES * widest + label_margin * panels_across + 2.5  # + labels, colour bar
    title_width = TITLE_INCHES_PER_COLUMN * max(display_width(line) for line in title.split("\n"))
    height = len(rows) * (CELL_INCHES * tallest + 1.4) + 0.8  # + labels, titles, suptitle
    fig = Figure(figsize=(max(width, title_width), height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _draw_panel(
    ax: Axes, panel: AlignmentPanel, show_x: bool, show_y: bool, annotate: bool
) -> AxesImage:
    """The matrix, its labels, the printed weights and the outlines of non-zero spans."""
    weights = panel.weights  # (tgt_len, src_len)
    colours = matplotlib.colormaps[COLOUR_MAP].with_extremes(bad=(0, 0, 0, 0))
    ax.patch.set_facecolor(ZERO_COLOUR)
    ax.patch.set_hatch("////")
    ax.patch.set_hatchcolor("#c8c8c8")
    image = ax.imshow(np.ma.masked_equal(weights, 0.0), cmap=colours, vmin=0.0, vmax=1.0)
    _label_axes(ax, panel, show_x, show_y)
    if annotate and max(weights.shape) <= MAX_ANNOTATED_SIDE:
        _print_weights(ax, weights)
    _outline_nonzero_spans(ax, weights)
    if panel.title:
        ax.set_title(panel.title, fontsize=9)
    return image


def _label_axes(ax: Axes, panel: AlignmentPanel, show_x: bool, show_y: bool) -> None:
    """Source pieces along the top, target pieces down the left."""
    sources = [_column_label(display_piece(piece)) for piece in panel.source_pieces]
    targets = [display_piece(piece) for piece in panel.target_pieces]
    ax.xaxis.tick_top()
    ax.set_xticks(range(len(sources)), sources if show_x else [])
    ax.set_yticks(range(len(targets)), targets if show_y else [])
    ax.tick_params(length=0, labelsize=10)
    for label in ax.get_xticklabels():
        if max(display_width(line) for line in label.get_text().split("\n")) > MAX_UPRIGHT_LABEL:
            label.set_rotation(90)
    for spine in ax.spines.values():
        spine.set_visible(False)


def _column_label(label: str) -> str:
    """Chinese is written top to bottom, one character a line, so it stays upright and narrow."""
    if any(display_width(ch) == 2 for ch in label):
        return "\n".join(label)
    return label


def _print_weights(ax: Axes, weights: np.ndarray) -> None:
    """`.87` in each non-zero cell, white on dark cells; `1` for a full weight."""
    for (t, s), value in np.ndenumerate(weights):
        if value == 0.0:
            continue
        label = "1" if value >= 0.995 else f"{value:.2f}".lstrip("0")
        colour = "white" if value > 0.55 else "#333333"
        ax.text(s, t, label, ha="center", va="center", fontsize=7, color=colour, in_layout=False)


def _outline_nonzero_spans(ax: Axes, weights: np.ndarray) -> None:
    """Box the non-zero span of each row that has exact zeros (hard choice, local window)."""
    for t, row in enumerate(weights):
        nonzero = np.flatnonzero(row)
        if 0 < len(nonzero) < len(row):
            first, last = int(nonzero.min()), int(nonzero.max())
            box = Rectangle(
                (first - 0.5, t - 0.5),
                last - first + 1,
                1.0,
                fill=False,
                edgecolor="#d62728",
                linewidth=1.2,
            )
            ax.add_patch(box)
