"""A loaded model behind the one interface the service uses, and what it answers per sentence.

Two engines:

* `TorchEngine`: a checkpoint loaded by `Translator.load`, searched by the project's own
  beam search. Links come from the attention `seq2seq-translate --alignments` reads
  (`seq2seq.align.defaults.default_settings`: the alignment layer of a model trained with
  `alignment=layer`, else the guided head, else the head chosen on the valid gold, else
  the last layer's head mean), and `GET /models` names it (`alignment`: its source and
  description, `the alignment layer, head mean (...)` for a layer); the attention of a
  sentence is every layer and head of every kind the viewer shows
  (`seq2seq.visualise.viewer.sentence_views`): the cross-attention, then the alignment
  layer's view (`"name": "layer"`, one layer, its heads, rows and columns as the
  cross-attention's) where the model has one, then the self-attention. The layer's view
  is one more entry of the list: the entries before it are as without a layer. The page's
  data (`viewer_base`) opens on the layer (`alignment.start.view`).
* `CTranslate2Engine`: a `seq2seq-export --format ctranslate2` folder
  (`seq2seq.export.ctranslate2_translator.CTranslate2Translator`). CTranslate2 returns the attention of the
  one head the export recorded for alignments, so links come from it and the attention is
  that single head (one layer, one head, cross-attention only).

`sentence_results` turns a batch of translations into the JSON of `POST /translate`: per
sentence the best output and its score, the n-best list, whether its source was cut to the
model's limit (with the pieces given and kept), the warnings its writer should read
(`seq2seq.search.translator.input_notes`: the cut, a sentence not in the script of the
model's source language, characters outside the source vocabulary), and on request the Pharaoh links of each hypothesis and the best
output's attention views.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from seq2seq.align.defaults import DefaultSettings, default_settings
from seq2seq.align.extract import AlignmentError, AlignSettings, translation_links
from seq2seq.align.pharaoh import Links, format_links
from seq2seq.config.search_settings import SearchSettings
from seq2seq.export.ctranslate2_translator import CTranslate2Translator
from seq2seq.search.translator import Translation, Translator, input_notes
from seq2seq.visualise.heatmap import describe_run, run_title
from seq2seq.visualise.viewer import AttentionView, alignment_data, sentence_views, view_data

PAGE_TITLE = "seq2seq-serve"


class BatchKey(NamedTuple):
    """What a request asks of the search: requests with equal keys are translated together."""

    beam_size: int
    n_best: int
    alignments: bool
    attention: bool

    def settings(self, base: SearchSettings) -> SearchSettings:
        """The service's search settings with this request's beam and n-best."""
        return replace(base, beam_size=self.beam_size, n_best=self.n_best)


class Engine(Protocol):
    """What the service needs of a loaded model."""

    name: str  # "pytorch" or "ctranslate2"
    links_problem: str | None  # why it cannot give links, or None
    attention_problem: str | None  # why it cannot give attention, or None

    def translate(
        self, sentences: Sequence[str], settings: SearchSettings, need_weights: bool
    ) -> list[Translation]: ...

    def links(self, translation: Translation) -> list[Links]: ...

    def views(self, translation: Translation) -> list[dict[str, Any]]: ...

    def notes(self, translation: Translation) -> list[str]: ...

    def model_info(self) -> dict[str, Any]: ...

    def viewer_base(self) -> dict[str, Any]: ...


class TorchEngine:
    """A checkpoint and the project's own search (module docstring)."""

    name = "pytorch"

    def __init__(self, translator: Translator, path: str | Path):
        self.translator, self.path = translator, Path(path)
        self.shape = translator.attention_shape()  # (layers, heads) of the cross-attention
        self.alignment: DefaultSettings | None = None
        self.links_problem: str | None = None
        try:
            self.alignment = default_settings(translator)
        except AlignmentError as error:
            self.links_problem = str(error)
        self.attention_problem = (
            None
            if self.shape is not None
            else "the model has no attention weights (attention=none)"
        )

    def translate(
        self, sentences: Sequence[str], settings: SearchSettings, need_weights: bool
    ) -> list[Translation]:
        return self.translator.translate(sentences, settings, need_weights)

    def links(self, translation: Translation) -> list[Links]:
        assert self.alignment is not None, self.links_problem
        return translation_links(self.translator, translation, self.alignment.settings) or [Links()]

    def views(self, translation: Translation) -> list[dict[str, Any]]:
        if not translation.hypotheses:
            return []
        return [view_data(view) for view in sentence_views(self.translator, translation)]

    def notes(self, translation: Translation) -> list[str]:
        return input_notes(translation, self.translator.src_tokenizer)

    def model_info(self) -> dict[str, Any]:
        config = self.translator.config
        return {
            "name": self.path.name, "engine": self.name,
            "src_lang": str(config.data.src_lang), "tgt_lang": str(config.data.tgt_lang),
            "architecture": checkpoint_architecture(self.translator.run_config),
            "parameters": self.translator.parameters,
            "quantization": self.translator.quantization,
            "max_source_pieces": self.translator.max_source_len,
            "attention": None if self.shape is None else {"layers": self.shape[0], "heads": self.shape[1]},
            "alignment": None if self.alignment is None else _alignment_info(self.alignment),
        }  # fmt: skip

    def viewer_base(self) -> dict[str, Any]:
        config = self.translator.config
        alignment = None if self.shape is None else alignment_data(self.translator, self.shape[0])
        return {"title": PAGE_TITLE, "pair": f"{config.data.src_lang}→{config.data.tgt_lang}",
                "model": run_title(self.translator.run_config), "alignment": alignment, "sentences": []}  # fmt: skip


def checkpoint_architecture(run_config: Mapping[str, Any]) -> dict[str, Any]:
    """The model's components as `describe_run` names them for titles, its numbers as
    numbers: `heads` is read from the config, not from the title's text."""
    described: dict[str, Any] = dict(describe_run(run_config))
    if "heads" in described:
        described["heads"] = int(run_config["attention"]["heads"])
    return described


def _alignment_info(found: DefaultSettings) -> dict[str, Any]:
    """The head links are read from: layer and head from 0 (head None: the head mean);
    with source `layer` the alignment layer (its one layer 0), named so in `description`."""
    return {"layer": found.settings.layer, "head": found.settings.head,
            "source": found.source, "description": found.description}  # fmt: skip


class CTranslate2Engine:
    """A CTranslate2 export folder (module docstring)."""

    name = "ctranslate2"
    NOTE = "row: an output piece; its weights over the source pieces sum to 1"

    def __init__(self, translator: CTranslate2Translator, path: str | Path):
        self.translator, self.path = translator, Path(path)
        head = translator.meta.get("alignment")
        described = isinstance(head, dict) and isinstance(head.get("description"), str)
        self.description: str | None = head["description"] if described else None
        self.links_problem = (
            None if described else "the export records no alignment head; export it again"
        )
        self.attention_problem = self.links_problem

    def translate(
        self, sentences: Sequence[str], settings: SearchSettings, need_weights: bool
    ) -> list[Translation]:
        """The export's translations, each with its source's piece count, which the
        export's translator does not keep: counted here with the same tokeniser."""
        translations = self.translator.translate(sentences, settings, need_weights)
        return [translation if translation.pieces_given is not None else
                replace(translation, pieces_given=len(self.translator.src_tokenizer.encode(translation.source)))
                for translation in translations]  # fmt: skip

    def links(self, translation: Translation) -> list[Links]:
        # Each hypothesis holds the recorded head's attention alone, as layer 0, head 0.
        only = AlignSettings(layer=0, head=0)
        return translation_links(self.translator, translation, only) or [Links()]  # type: ignore[arg-type]

    def views(self, translation: Translation) -> list[dict[str, Any]]:
        if not translation.hypotheses:
            return []
        best = translation.hypotheses[0]  # attention (1, 1, tgt_len, src_len)
        view = AttentionView("cross", "cross-attention (the alignment head)",
                             translation.target_pieces[0], translation.source_pieces,
                             best.attention, self.NOTE)  # fmt: skip
        return [view_data(view)]

    def notes(self, translation: Translation) -> list[str]:
        return input_notes(translation, self.translator.src_tokenizer)

    def model_info(self) -> dict[str, Any]:
        meta = self.translator.meta
        return {
            "name": self.path.name, "engine": self.name,
            "src_lang": str(meta.get("src_lang")), "tgt_lang": str(meta.get("tgt_lang")),
            "architecture": {"family": "transformer", "export": "ctranslate2",
                             "quantization": str(meta.get("quantization")),
                             "checkpoint": str(meta.get("checkpoint"))},
            "parameters": None,  # CTranslate2 does not expose its weights' sizes
            "quantization": self.translator.compute_type,
            "max_source_pieces": self.translator.max_source_len,
            "attention": None if self.description is None else {"layers": 1, "heads": 1},
            "alignment": None if self.description is None else {
                "layer": 0, "head": 0, "source": "export", "description": self.description},
        }  # fmt: skip

    def viewer_base(self) -> dict[str, Any]:
        meta = self.translator.meta
        alignment = {"description": self.description, "source": "export",
                     "reason": "the head the export recorded", "start": {"layer": 0, "head": 0},
                     "marks": []}  # fmt: skip
        return {"title": PAGE_TITLE, "pair": f"{meta.get('src_lang')}→{meta.get('tgt_lang')}",
                "model": f"CTranslate2 export of {meta.get('checkpoint')} ({meta.get('quantization')})",
                "alignment": alignment, "sentences": []}  # fmt: skip


# ---------------------------------------------------------------- the answer per sentence


def sentence_results(
    engine: Engine, key: BatchKey, base: SearchSettings, sentences: list[str]
) -> list[dict[str, Any]]:
    """Translate one batch of sentences with one key: the JSON of each (module docstring)."""
    need_weights = key.alignments or key.attention
    translations = engine.translate(sentences, key.settings(base), need_weights)
    return [sentence_result(engine, key, translation) for translation in translations]


def sentence_result(engine: Engine, key: BatchKey, translation: Translation) -> dict[str, Any]:
    """One sentence's answer. A sentence without pieces has one empty hypothesis of score
    0, as `seq2seq-translate` prints it."""
    hypotheses = [{"text": text, "score": float(hypothesis.score)} for hypothesis, text
                  in zip(translation.hypotheses, translation.texts)] or [{"text": "", "score": 0.0}]  # fmt: skip
    if key.alignments:
        for hypothesis, links in zip(hypotheses, engine.links(translation)):
            hypothesis["links"] = format_links(links)
    result: dict[str, Any] = {"source": translation.source, **hypotheses[0], "nbest": hypotheses,
                              "truncated": translation.truncated,
                              "pieces_given": translation.pieces_given,
                              "pieces_kept": translation.pieces_kept,
                              "warnings": engine.notes(translation)}  # fmt: skip
    if key.attention:
        result["attention"] = engine.views(translation)
    return result
