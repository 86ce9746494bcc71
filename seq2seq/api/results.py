"""A translation as the Python API gives it (`Result`), and results side by side
(`compare`): the text, the pieces, the attention and the word links, shown inline in
Jupyter by `seq2seq.visualise.notebook` (imported when first drawn)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from seq2seq.align.extract import hypothesis_layer_weights
from seq2seq.align.teacher_forced import has_alignment_layer
from seq2seq.align.words import words
from seq2seq.search.translator import Translation, Translator
from seq2seq.visualise.heatmap import run_title

FIGURE_DPI = 100  # a result's heat map in a notebook


@dataclass(frozen=True, eq=False, repr=False)
class Result:
    """One source text and its translation by a `Model`, with the attention behind it.

    Attributes: `translation` and `translator`, the project's own objects it wraps
    (`seq2seq.search.translator`); `links`, the word links of the best output as
    (source word, target word) pairs counted from 0 over `source_words` and
    `target_words` (as `seq2seq-translate --alignments` prints them: Pharaoh `i-j`; None
    for a model without attention); `notes`, what to know about the input (cut to the
    model's limit, apparently in another language), one clause each.

    In Jupyter a result shows itself as the interactive attention viewer
    (`_repr_html_`), or as a heat map where HTML is not shown (`_repr_png_`)."""

    translation: Translation
    translator: Translator
    links: list[tuple[int, int]] | None
    notes: list[str] = field(default_factory=list)

    @property
    def source(self) -> str:
        """The text that was translated, as given."""
        return self.translation.source

    @property
    def text(self) -> str:
        """The best translation ("" for an empty source)."""
        return self.translation.text

    @property
    def texts(self) -> list[str]:
        """The n-best translations, best first."""
        return list(self.translation.texts)

    @property
    def scores(self) -> list[float]:
        """The model's log-probability of each of `texts` (EOS included), as
        `seq2seq-translate --n-best` prints them."""
        return [hypothesis.score for hypothesis in self.translation.hypotheses]

    @property
    def source_pieces(self) -> list[str]:
        """The pieces the model read, EOS (`</s>`) last: the attention's columns."""
        return list(self.translation.source_pieces)

    @property
    def target_pieces(self) -> list[str]:
        """The pieces of the best output, EOS last: the attention's rows ([] for an empty
        source)."""
        pieces = self.translation.target_pieces
        return list(pieces[0]) if pieces else []

    @property
    def source_words(self) -> list[str]:
        """The source's words, which `links` count (`seq2seq.align.words`)."""
        return words(self.source)

    @property
    def target_words(self) -> list[str]:
        """The best output's words, which `links` count."""
        return words(self.text)

    @property
    def attention(self) -> np.ndarray | None:
        """The cross-attention of the best output: a float32 array [layers, heads, target
        pieces, source pieces] (layers and heads from 0; row t is how much target piece t
        looks at each source piece, and sums to 1). None for a model without attention
        (attention=none) or an empty source."""
        hypotheses = self.translation.hypotheses
        if not hypotheses or hypotheses[0].attention is None:
            return None
        return hypotheses[0].attention.detach().float().cpu().numpy().copy()

    @property
    def alignment_layer(self) -> np.ndarray | None:
        """The alignment layer's weights for the best output, a float32 array [heads,
        target pieces, source pieces] (row t: where target piece t comes from, read after
        the model has read it; the EOS row is 0), for a model trained with
        `alignment=layer`; `links` are read from it. None for a model without the layer or
        an empty source."""
        if not self.translation.hypotheses or not has_alignment_layer(self.translator.model):
            return None
        weights = hypothesis_layer_weights(self.translator, self.translation)[0]
        return weights[0].numpy().copy()  # (heads, target pieces, source pieces)

    def word_links(self) -> list[tuple[str, str]]:
        """`links` as (source word, target word) pairs, in the order of `links`; [] for a
        model without attention."""
        sources, targets = self.source_words, self.target_words
        return [(sources[source], targets[target]) for source, target in self.links or []]

    def plot(
        self, layer: int | None = None, head: int | None = None, source: str | None = None
    ) -> Any:
        """A matplotlib Figure of one head's attention: by default what the viewer opens
        on (the alignment layer of a model trained with `alignment=layer`, else a guided or
        chosen head, else layer 0's head mean), else `layer` and `head` (from 0; a `layer`
        alone: its head mean) of the cross-attention, or `source="layer"` for the alignment
        layer and `source="attention"` for the cross-attention. Jupyter shows it as a
        picture. Raises ValueError when there is no attention to draw or the layer or head
        is out of range."""
        from seq2seq.visualise.notebook import attention_figure

        figure = attention_figure(
            self.translator, self.translation, layer=layer, head=head, source=source
        )
        return shown_as_png(figure)

    def to_bertviz(self) -> dict[str, Any]:
        """The keyword arguments of `bertviz.head_view` for this result's attention."""
        from seq2seq.visualise.notebook import bertviz_inputs

        return bertviz_inputs(self.translator, self.translation)

    def _repr_html_(self) -> str:
        """Jupyter's HTML: the attention viewer of this translation, as
        `seq2seq-translate --html` draws it (a short note when there is nothing to show)."""
        from seq2seq.visualise.notebook import inline_html

        return inline_html(self.translator, self.translation)

    def _repr_png_(self) -> bytes | None:
        """Jupyter's PNG, where HTML is not shown: the heat map of `plot()`; None when
        there is nothing to draw (no attention, an empty source)."""
        if self.attention is None:
            return None
        return figure_png(self.plot())

    def __repr__(self) -> str:
        shown = f"Result({self.source!r} → {self.text!r}"
        if len(self.texts) > 1:
            shown += f", {len(self.texts)} best"
        if self.notes:
            shown += f"; {'; '.join(self.notes)}"
        return shown + ")"


def figure_png(figure: Any) -> bytes:
    """A matplotlib figure as PNG bytes."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=FIGURE_DPI)
    return buffer.getvalue()


def shown_as_png(figure: Any) -> Any:
    """`figure` with its own `_repr_png_`, so that Jupyter shows it: a figure made without
    pyplot (`seq2seq.visualise.notebook`, no global pyplot state) has no picture of its
    own in a notebook, only `<Figure size ...>`."""
    figure._repr_png_ = lambda: figure_png(figure)
    return figure


@dataclass(frozen=True)
class Comparison:
    """Results shown side by side in Jupyter (`compare`), each under its title."""

    results: tuple[Result, ...]
    titles: tuple[str, ...]

    def _repr_html_(self) -> str:
        from seq2seq.visualise.notebook import side_by_side_html

        entries = [(title, result.translator, result.translation)
                   for title, result in zip(self.titles, self.results)]  # fmt: skip
        return side_by_side_html(entries)

    def __repr__(self) -> str:
        shown = [f"{title}: {result.text!r}" for title, result in zip(self.titles, self.results)]
        return f"Comparison({', '.join(shown)})"


def compare(*results: Result, titles: Sequence[str] | None = None) -> Comparison:
    """Results (of one model or several) to show side by side in Jupyter, each under its
    title; by default each model's description (`Model.title`).

    Raises TypeError for something other than results, ValueError for no results or a
    number of titles that differs from the number of results."""
    if not results:
        raise ValueError("compare needs at least one result")
    for index, result in enumerate(results):
        if not isinstance(result, Result):
            hint = " (give results as separate arguments: compare(*results))"
            hint = hint if isinstance(result, (list, tuple)) else ""
            raise TypeError(
                f"compare: argument {index} is a {type(result).__name__}, not a Result{hint}"
            )
    if titles is None:
        titles = [run_title(result.translator.run_config) for result in results]
    if isinstance(titles, str) or len(titles) != len(results):
        count = 1 if isinstance(titles, str) else len(titles)
        raise ValueError(f"compare: {len(results)} results but {count} titles")
    return Comparison(tuple(results), tuple(str(title) for title in titles))
