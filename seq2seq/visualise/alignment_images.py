"""The alignment hook: TensorBoard images of attention alignments forming during training.

After each validation the trainer calls `hook(context)` with a
`seq2seq.training.hooks.ValidationContext` (model, device, logger, step). The alignment hook

* translates its probe sentences greedily (corpus data: the probe list of
  `seq2seq.visualise.probes`, or, for a language pair without one, the first short valid
  sentences; toy data: the first few valid examples), draws the last
  attention layer of each and logs it as the image `alignment/<NN>_<start of the
  sentence>`: one tag per sentence, so TensorBoard's step slider under each image replays
  how that alignment formed. With several heads that image is the head mean, one panel
  large enough to read in TensorBoard's image card, and `alignment_heads/<NN>_...` holds
  every head beside their mean;
* for a model with a separate alignment layer (`alignment=layer`,
  `seq2seq.models.alignment_layer`), also logs the layer's weights on the same greedy
  translation (teacher-forced on the model's own output, so its rows are the image's) as
  `alignment_layer/<NN>_...`: its heads' mean, one panel, titled `alignment layer`.
  Models without one get no such tag;
* for a model whose attention reads the source's sentences (hierarchical attention on
  pseudo-documents, `seq2seq.models.attention.hierarchical`), also logs the sentence level,
  each output piece's weights summed per sentence of the source, as
  `alignment_sentences/<NN>_...`;
* logs `valid/alignment_accuracy` (`seq2seq.visualise.alignment`), teacher-forced on the
  probes' references (corpus) or on the valid split (toy). The valid sentences shown for a
  pair without probes have no gold links, so they get images only.

The AER hook (`seq2seq.align.aer_hook`) runs before this one: its chosen head and a guided
model's guided head are marked in the panels (`alignment_heads/...` also draws their layers
when they are not the last). Panel titles number layers and heads from 0, as the AER hook's
log line and `valid/aer_chosen_layer` do.

Models with attention=none get no hook: they have no weights to show or score.

It is the registered validation hook `alignment` (`seq2seq.training.hooks`, the registry's
"hook" group), registered after `aer` (imported here first); the class makes a run's hooks
with `for_run`. It reports the validation metric `alignment_accuracy`, which
`trainer.select_metric` can select.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

import torch

from seq2seq import registry
from seq2seq.align.aer_hook import AerHook, has_attention
from seq2seq.align.defaults import HeadMark, chosen_mark, guided_mark
from seq2seq.align.teacher_forced import (
    LAYER,
    has_alignment_layer,
    teacher_forced_attention,
    teacher_forced_weights,
)
from seq2seq.config.search_settings import SearchSettings
from seq2seq.data.settings import DataConfig, source_name
from seq2seq.data.sources import data_source
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.metrics.alignment_accuracy import AlignmentAccuracy, Link, alignment_accuracy
from seq2seq.models.attention.hierarchical import sentence_labels, sentence_weights
from seq2seq.models.model import document_segments
from seq2seq.search import Hypothesis
from seq2seq.search.batched import translate_ids
from seq2seq.special_tokens import EOS_ID, EOS_PIECE
from seq2seq.training.hooks import ValidationContext, ValidationHook
from seq2seq.visualise.probes import encode_probe, probes_for

if TYPE_CHECKING:
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)

TOY_SHOWN = 3  # valid examples drawn for the toy tasks
TOY_SCORED = 500  # valid examples scored for the toy tasks
SAMPLE_SHOWN = 6  # valid sentences drawn for a language pair without probes
SAMPLE_MAX_PIECES = 12  # ... each with at most this many source pieces
TAG_TEXT_CHARS = 12  # characters of the sentence in an image tag
ACCURACY_TAG = "valid/alignment_accuracy"


def heatmap() -> ModuleType:
    """`seq2seq.visualise.heatmap`, imported at the first drawing: matplotlib takes about a
    second to import, which a run need not spend before its first update."""
    from seq2seq.visualise import heatmap as module

    return module


@dataclass
class ShownSentence:
    """A sentence whose alignment is drawn at each validation."""

    tag: str
    text: str
    source_ids: list[int]
    source_pieces: list[str]  # EOS included


# marks(layers, heads): the heads to mark in a drawing of attention of that shape
Marks = Callable[[int, int], list[HeadMark]]


class AlignmentHook:
    """`hook(context)`: alignment images and alignment accuracy (module docstring); it
    reports `alignment_accuracy` when it has scored examples.

    `tgt_tokenizer` turns the greedy outputs into pieces and text, `run_config` (the
    run's config as plain data) names the model in each image's title, and `marks` says which
    heads the images mark (`HeadMarks`; none without).
    """

    def __init__(
        self,
        shown: list[ShownSentence],
        scored_examples: list[tuple[list[int], list[int]]],
        scored_links: list[list[Link]],
        tgt_tokenizer: Tokenizer,
        run_config: Mapping[str, Any],
        marks: Marks | None = None,
    ):
        if len(scored_examples) != len(scored_links):
            raise ValueError("scored_examples and scored_links must have the same length")
        self.shown = shown
        self.scored_examples = scored_examples
        self.scored_links = scored_links
        self.tgt_tokenizer = tgt_tokenizer
        self.run_config = run_config
        self.marks = marks
        self.produces = (AlignmentAccuracy.name,) if scored_examples else ()

    @classmethod
    def for_run(
        cls, cfg: Mapping[str, Any], data: Any, earlier: tuple[ValidationHook, ...]
    ) -> list[AlignmentHook]:
        """A source with a known alignment (the toy tasks): its valid examples; else the
        corpus probes, or short valid sentences (unscored) for a pair without probes; their
        images mark the guided head and the head the AER hook of `earlier` chooses. None
        without attention. `cfg`: the run's config as plain data (enums as their names)."""
        if not has_attention(cfg):
            return []
        data_cfg = cfg["data"]
        source = data_source(source_name(data_cfg))
        if source.known_alignment:
            settings = DataConfig.from_mapping(data_cfg)
            return [known_alignment_hook(source, settings, data, cfg, HeadMarks(cfg))]
        aer = next((hook for hook in earlier if isinstance(hook, AerHook)), None)
        marks = HeadMarks(cfg, aer)
        probes = probes_for(
            data_cfg["src_lang"], data_cfg["tgt_lang"], cfg["logging"]["probe_file"]
        )
        if probes:
            return [probe_hook(probes, data, cfg, marks)]
        return sample_hooks(cfg, data, marks)

    def __call__(self, context: ValidationContext) -> None:
        started = time.perf_counter()
        self.log_accuracy(context)
        self.log_images(context)
        log.debug("alignment hook took %.2f s", time.perf_counter() - started)

    def log_accuracy(self, context: ValidationContext) -> float | None:
        if not self.scored_examples:
            return None
        attentions = teacher_forced_attention(context.model, self.scored_examples, context.device)
        accuracy = None if attentions is None else alignment_accuracy(attentions, self.scored_links)
        if accuracy is not None:
            context.logger.scalars({ACCURACY_TAG: accuracy}, context.step)
            context.report(AlignmentAccuracy.name, accuracy)
        return accuracy

    def log_images(self, context: ValidationContext) -> None:
        if not self.shown or not context.logger.enabled:  # nothing would keep the images
            return
        sources = [sentence.source_ids for sentence in self.shown]
        nbest = translate_ids(
            context.model, sources, SearchSettings(beam_size=1), context.device, need_weights=True
        )
        hypotheses = [hypothesis for hypothesis, *_ in nbest]
        layer = self.layer_weights(context, hypotheses)
        for index, (sentence, hypothesis) in enumerate(zip(self.shown, hypotheses, strict=True)):
            if hypothesis.attention is None:
                return
            images = self.draw(sentence, hypothesis, context.step)
            separator = getattr(context.model, "separator_id", None)
            if separator is not None:  # hierarchical attention on a document
                figure = self.draw_sentences(sentence, hypothesis, separator, context.step)
                images.append((sentences_tag(sentence.tag), figure))
            if layer is not None:
                figure = self.draw_layer(sentence, hypothesis, layer[index], context.step)
                images.append((layer_tag(sentence.tag), figure))
            for tag, figure in images:
                context.logger.image(tag, heatmap().figure_to_rgb(figure), context.step)

    def layer_weights(
        self, context: ValidationContext, hypotheses: list[Hypothesis]
    ) -> list[torch.Tensor] | None:
        """The alignment layer's weights on each shown sentence and its greedy translation,
        teacher-forced on that translation: (1, heads, len(tokens) + 1, len(source) + 1) per
        sentence, the rows and columns of the cross-attention image; None without a layer."""
        if not has_alignment_layer(context.model):
            return None
        examples = [(sentence.source_ids, list(hypothesis.tokens))
                    for sentence, hypothesis in zip(self.shown, hypotheses, strict=True)]  # fmt: skip
        return teacher_forced_weights(context.model, examples, context.device, source=LAYER)

    def draw(
        self, sentence: ShownSentence, hypothesis: Hypothesis, step: int
    ) -> list[tuple[str, Figure]]:
        """(tag, figure) pairs of one greedy translation: the last attention layer (its
        head mean with several heads); then, with several heads or a marked head in another
        layer, every head of the last layer and of the marked layers. A marked panel says
        so in its title (`seq2seq.visualise.heatmap.draw_alignment`)."""
        draw_alignment = heatmap().draw_alignment
        title, target_pieces = self.title_and_targets(sentence, hypothesis, step)
        attention = hypothesis.attention  # (layers, heads, tgt_len, src_len)
        layers, heads = attention.shape[:2]
        marks = heatmap().panel_marks(self.marks(layers, heads) if self.marks else [])
        last = layers - 1  # layers and heads are numbered from 0, in the titles too
        shown = sorted({last, *(layer for layer, _ in marks)})

        def draw(weights, numbers: list[int], suffix: str = "") -> Figure:
            return draw_alignment(sentence.source_pieces, target_pieces, weights,
                                  title + suffix, layer_numbers=numbers, marks=marks)  # fmt: skip

        last_layer = attention[-1:]  # (1, heads, tgt_len, src_len)
        summary = last_layer.mean(dim=1, keepdim=True)  # (1, 1, tgt_len, src_len)
        suffix = f" · mean of {heads} heads" if heads > 1 else ""
        if (last, None) in marks:  # a one-panel figure shows no panel title
            suffix += f" · {marks[last, None]}"
        images = [(sentence.tag, draw(summary, [last], suffix))]
        if heads > 1 or shown != [last]:
            every = draw(attention[shown], shown)
            images.append((heads_tag(sentence.tag), every))
        return images

    def draw_layer(
        self, sentence: ShownSentence, hypothesis: Hypothesis, weights: torch.Tensor, step: int
    ) -> Figure:
        """The alignment layer's panel of one greedy translation: `weights` (1, heads,
        tgt_len, src_len) drawn as its heads' mean, one panel titled `alignment layer`."""
        title, target_pieces = self.title_and_targets(sentence, hypothesis, step)
        heads = weights.shape[1]
        summary = weights.mean(dim=1, keepdim=True)  # (1, 1, tgt_len, src_len)
        suffix = f" · {layer_title(self.run_config)}"
        suffix += f" · mean of {heads} heads" if heads > 1 else ""
        return heatmap().draw_alignment(
            sentence.source_pieces, target_pieces, summary, title + suffix
        )

    def draw_sentences(
        self, sentence: ShownSentence, hypothesis: Hypothesis, separator: int, step: int
    ) -> Figure:
        """The sentence level of hierarchical attention: per output piece, its last layer's
        weights summed over each sentence of the source (cut at `separator`), the head
        mean; one panel, a column per sentence."""
        title, target_pieces = self.title_and_targets(sentence, hypothesis, step)
        last = hypothesis.attention[-1:].float()  # (1, heads, tgt_len, src_len)
        source = torch.tensor([list(sentence.source_ids) + [EOS_ID]])  # (1, src_len)
        weights = sentence_weights(last, document_segments(source, separator))
        summary = weights.mean(dim=1, keepdim=True)  # (1, 1, tgt_len, sentences)
        return heatmap().draw_alignment(sentence_labels(summary.size(-1)), target_pieces,
                                        summary, title + " · sentence level")  # fmt: skip

    def title_and_targets(
        self, sentence: ShownSentence, hypothesis: Hypothesis, step: int
    ) -> tuple[str, list[str]]:
        """The figure title of a greedy translation (sentence, output, model, step) and
        its target pieces, EOS included."""
        tokenizer = self.tgt_tokenizer
        title = heatmap().translation_title(
            sentence.text, tokenizer.decode(hypothesis.tokens), self.run_config, step
        )
        return title, [tokenizer.id_to_piece(i) for i in hypothesis.tokens] + [EOS_PIECE]


@dataclass
class HeadMarks:
    """`marks(layers, heads)`: the heads an image marks, for attention of that shape: the
    guided head of the run's config (plain data), and the AER hook's latest choice (which
    runs first)."""

    config: Mapping[str, Any] | None = None
    aer_hook: AerHook | None = None

    def __call__(self, layers: int, heads: int) -> list[HeadMark]:
        marks = [guided_mark(self.config, layers, heads)] if self.config is not None else []
        if self.aer_hook is not None:
            marks.append(chosen_mark(self.aer_hook.choice, heads))
        return [mark for mark in marks if mark is not None]


def probe_hook(
    probes: list, data: Any, run_config: Mapping[str, Any], marks: Marks | None = None
) -> AlignmentHook:
    """Draw and score the probes (references teacher-forced for the accuracy)."""
    encoded = [encode_probe(probe, data.src_tokenizer, data.tgt_tokenizer) for probe in probes]
    shown = probe_sentences(encoded)
    scored = [(probe.source_ids, probe.target_ids) for probe in encoded]
    links = [probe.links for probe in encoded]
    return AlignmentHook(shown, scored, links, data.tgt_tokenizer, run_config, marks)


def probe_sentences(encoded: list) -> list[ShownSentence]:
    """The encoded probes (`encode_probe`) as sentences to draw."""
    return [
        ShownSentence(
            image_tag(index, probe.probe.source),
            probe.probe.source,
            probe.source_ids,
            probe.source_pieces,
        )
        for index, probe in enumerate(encoded)
    ]


def known_alignment_hook(
    source: Any,
    data_cfg: DataConfig,
    data: Any,
    run_config: Mapping[str, Any],
    marks: Marks | None = None,
) -> AlignmentHook:
    """Draw the first valid examples, score up to TOY_SCORED of them against the source's
    known alignment (the toy tasks' (anti-)diagonal, `DataSource.alignment`)."""
    examples = [(list(src), list(tgt)) for src, tgt in data.valid.examples[:TOY_SCORED]]
    lines = data.valid.src_lines
    shown = [
        shown_sentence(index, lines[index], src, data.src_tokenizer)
        for index, (src, _) in enumerate(examples[:TOY_SHOWN])
    ]
    links = [
        [Link(target, frozenset([position])) for target, position in
         enumerate(source.alignment(data_cfg, len(src)))]
        for src, _ in examples
    ]  # fmt: skip
    return AlignmentHook(shown, examples, links, data.tgt_tokenizer, run_config, marks)


def sample_hooks(
    cfg: Mapping[str, Any], data: Any, marks: Marks | None = None
) -> list[AlignmentHook]:
    """For a pair without probes: draw `sample_sentences`, score nothing (no gold links);
    `cfg`, the run's config as plain data, names the model in the titles."""
    pair = f"{cfg['data']['src_lang']}→{cfg['data']['tgt_lang']}"
    shown = sample_sentences(data)
    if not shown:
        log.info(
            "no alignment probes for %s and no valid sentence of at most %d source pieces: "
            "no alignment images (set logging.probe_file to show some)",
            pair, SAMPLE_MAX_PIECES,
        )  # fmt: skip
        return []
    texts = " | ".join(sentence.text for sentence in shown)
    log.info(
        "no alignment probes for %s: drawing instead the first %d valid sentences of at most "
        "%d source pieces; they have no gold links, so only their images are logged, no %s "
        "(set logging.probe_file to score alignments): %s",
        pair, len(shown), SAMPLE_MAX_PIECES, ACCURACY_TAG, texts,
    )  # fmt: skip
    return [AlignmentHook(shown, [], [], data.tgt_tokenizer, cfg, marks)]


def sample_sentences(data: Any) -> list[ShownSentence]:
    """The first SAMPLE_SHOWN valid sentences, in split order, whose whole source has at
    most SAMPLE_MAX_PIECES pieces (encoded again: valid ids may be cut to data.max_len)."""
    shown: list[ShownSentence] = []
    for line in data.valid.src_lines:
        source_ids = data.src_tokenizer.encode(line)
        if 0 < len(source_ids) <= SAMPLE_MAX_PIECES:
            shown.append(shown_sentence(len(shown), line, source_ids, data.src_tokenizer))
        if len(shown) == SAMPLE_SHOWN:
            break
    return shown


def shown_sentence(
    index: int, text: str, source_ids: list[int], tokenizer: Tokenizer
) -> ShownSentence:
    """A valid sentence to draw, its pieces read back from its ids (EOS added)."""
    pieces = [tokenizer.id_to_piece(i) for i in source_ids] + [EOS_PIECE]
    return ShownSentence(image_tag(index, text), text, list(source_ids), pieces)


def layer_title(run_config: Mapping[str, Any]) -> str:
    """`alignment layer (guided)`: what the layer image shows, and how the layer learned
    (`alignment.training` of the run's config as plain data, when it has one)."""
    training = (run_config.get("alignment") or {}).get("training")
    training = getattr(training, "name", training)
    return "alignment layer" + (f" ({training})" if training else "")


def layer_tag(tag: str) -> str:
    """`alignment/00_我爱中国` → `alignment_layer/00_我爱中国`: that probe through the
    alignment layer."""
    return tag.replace("alignment/", "alignment_layer/", 1)


def sentences_tag(tag: str) -> str:
    """`alignment/00_...` → `alignment_sentences/00_...`: the sentence level of hierarchical
    attention on that document."""
    return tag.replace("alignment/", "alignment_sentences/", 1)


def heads_tag(tag: str) -> str:
    """`alignment/00_我爱中国` → `alignment_heads/00_我爱中国`: every head of that probe."""
    return tag.replace("alignment/", "alignment_heads/", 1)


def image_tag(index: int, text: str) -> str:
    """`alignment/00_我爱中国`: the index keeps the order, the text says which sentence.

    Only characters TensorBoard keeps in tags (letters of any script, digits, _ . -).
    """
    short = re.sub(r"[^\w.-]+", "_", text.strip())[:TAG_TEXT_CHARS].strip("_.")
    return f"alignment/{index:02d}_{short}"


# Registered after the AER hook (`seq2seq.align.aer_hook`, imported above), as the images
# mark the head it chooses.
registry.register("hook", "alignment")(AlignmentHook)
