"""The AER hook: after each validation, the model's AER on the valid gold pairs, and the
layer × head that aligns best, logged and kept for the checkpoints.

For a language pair with a hand-aligned gold set (`seq2seq.align.gold`, either direction),
the hook logs `valid/aer`, `valid/aer_precision` and `valid/aer_recall` (Och & Ney 2003) of
the teacher-forced attention on the gold set's valid part: last layer, head mean, argmax
links (`AlignSettings()`). The pairs are encoded, attended and counted by
`seq2seq.align.model_aer`: each sentence read as the corpus has it (the Chinese unsegmented),
its ids cut to `data.max_len` as validation cuts them, its pieces matched to the gold words
by their characters.

From the same forward pass it scores every layer × head and each layer's head mean
(`GoldAttention.head_scores`) and logs the lowest AER, `valid/aer_chosen`, with where it is,
`valid/aer_chosen_layer` and `valid/aer_chosen_head` (from 0; -1: the head mean); a guided
model (`alignment.guided`) also gets `valid/aer_guided`, and a model with a separate
alignment layer (`alignment=layer`) `valid/aer_layer`, its heads' mean. It returns that choice for the
checkpoints (`alignment_choice`, `seq2seq.checkpoint.AlignmentChoice`): `best.pt` holds the
one made at its validation, and `seq2seq-align`, `seq2seq-translate --alignments` and the
viewer use it by default (`seq2seq.align.defaults`).

Models with attention=none get no hook, nor does a source with a known alignment (the toy
tasks): its alignment accuracy scores the same thing. The hook is the registered validation
hook `aer` (`seq2seq.training.hooks`), registered before the alignment images
(`seq2seq.visualise.alignment_images`), which import it and mark the head it chooses. It reports the
validation metric `aer` (the head mean's `valid/aer`), which `trainer.select_metric` can
select.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from seq2seq import registry
from seq2seq.align.defaults import guided_mark
from seq2seq.align.extract import AlignSettings
from seq2seq.align.gold import gold_set
from seq2seq.align.head_choice import HeadScore, lowest_aer
from seq2seq.align.model_aer import (
    LAYER_SETTINGS,
    GoldAttention,
    GoldExample,
    encoded_gold,
    model_counts,
)
from seq2seq.checkpoint import ALIGNMENT_CHOICE_KEY, AlignmentChoice
from seq2seq.data.settings import source_name
from seq2seq.data.sources import data_source
from seq2seq.metrics.aer import Aer, AlignmentCounts
from seq2seq.training.hooks import ValidationContext, ValidationHook

log = logging.getLogger(__name__)

AER_TAGS = {"aer": "valid/aer", "precision": "valid/aer_precision", "recall": "valid/aer_recall"}
CHOSEN_TAGS = {"aer": "valid/aer_chosen", "layer": "valid/aer_chosen_layer",
               "head": "valid/aer_chosen_head"}  # fmt: skip
GUIDED_TAG = "valid/aer_guided"
LAYER_TAG = "valid/aer_layer"  # a model's separate alignment layer (`alignment=layer`)
MEAN_HEAD = -1  # valid/aer_chosen_head of a layer's head mean
GOLD_PART = "valid"  # the test part is kept for reporting


class AerHook:
    """`hook(context) -> {"alignment_choice": ...} | None`: AER, precision and recall of
    `settings` on a gold set, and the layer × head with the lowest AER (module docstring);
    it reports `aer`. `config`, the run's config as plain data, names a guided model's
    guided head."""

    produces = (Aer.name,)

    def __init__(
        self,
        examples: list[GoldExample],
        settings: AlignSettings | None = None,
        config: Mapping[str, Any] | None = None,
    ):
        self.examples = examples
        self.settings = settings or AlignSettings()
        self.config = config
        self.choice: AlignmentChoice | None = None  # the latest validation's choice

    @classmethod
    def for_run(
        cls, cfg: Mapping[str, Any], data: Any, earlier: tuple[ValidationHook, ...]
    ) -> list[AerHook]:
        """The AER hook on the valid part of the pair's gold set; none without attention,
        without a gold set, or for a source with a known alignment (its accuracy scores
        the same thing). `cfg`: the run's config as plain data."""
        if not has_attention(cfg) or data_source(source_name(cfg["data"])).known_alignment:
            return []
        return aer_hooks(cfg, data)

    def __call__(self, context: ValidationContext) -> dict[str, Any] | None:
        started = time.perf_counter()
        scored = GoldAttention.of(context.model, self.examples, context.device)
        if scored is None:
            return None
        counts = scored.counts(self.settings)
        scalars = aer_scalars(counts)
        if counts.aer is not None:
            context.report(Aer.name, counts.aer)
        scores = scored.head_scores(self.settings)
        best = lowest_aer(scores)
        if best is not None:
            self.choice = AlignmentChoice(
                best.settings.layer, best.settings.head, best.aer, context.step
            )
            scalars.update(chosen_scalars(best))
            log.info("step %d: lowest valid AER %.4f at layer %d, head %s (%s %s)",
                     context.step, best.aer, best.settings.layer, _head_text(best.settings.head),
                     AER_TAGS["aer"], _shown(scalars.get(AER_TAGS["aer"])))  # fmt: skip
        scalars.update(self.guided_scalars(scores, *scored.shape))
        if scored.layer_weights is not None:  # the alignment layer's, its heads' mean
            layer_counts = scored.counts(LAYER_SETTINGS)
            if layer_counts.aer is not None:
                scalars[LAYER_TAG] = layer_counts.aer
                log.info("step %d: valid AER of the alignment layer %.4f", context.step,
                         layer_counts.aer)  # fmt: skip
        context.logger.scalars(scalars, context.step)
        log.debug("AER hook took %.2f s", time.perf_counter() - started)
        return None if self.choice is None else {ALIGNMENT_CHOICE_KEY: self.choice.as_payload()}

    def counts(self, model, device) -> AlignmentCounts | None:
        """The link counts of `settings` on the examples; None without attention."""
        return model_counts(model, self.examples, device, self.settings)

    def guided_scalars(self, scores: list[HeadScore], layers: int, heads: int) -> dict[str, float]:
        """{GUIDED_TAG: AER} of a guided model's guided head; {} when not guided."""
        mark = guided_mark(self.config, layers, heads) if self.config is not None else None
        if mark is None:
            return {}
        by_head = {(score.settings.layer, score.settings.head): score.aer for score in scores}
        aer = by_head.get((mark.layer, mark.head))
        return {} if aer is None else {GUIDED_TAG: aer}


def aer_scalars(counts: AlignmentCounts) -> dict[str, float]:
    """The AER_TAGS that are defined (a ratio over 0 is not)."""
    values = {tag: getattr(counts, name) for name, tag in AER_TAGS.items()}
    return {tag: value for tag, value in values.items() if value is not None}


def chosen_scalars(best: HeadScore) -> dict[str, float]:
    """CHOSEN_TAGS of the lowest AER: the AER, its layer and head (MEAN_HEAD: the mean)."""
    head = MEAN_HEAD if best.settings.head is None else best.settings.head
    values = {"aer": best.aer, "layer": best.settings.layer, "head": head}
    return {CHOSEN_TAGS[name]: float(value) for name, value in values.items()}


def _head_text(head: int | None) -> str:
    return "mean" if head is None else str(head)


def _shown(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def has_attention(cfg: Mapping[str, Any]) -> bool:
    """Whether the model has attention weights to show and score (not attention=none)."""
    return registry.of_node("attention", cfg["attention"]).name != "none"


def aer_hooks(cfg: Mapping[str, Any], data: Any) -> list[AerHook]:
    """The AER hook on the valid part of the pair's gold set; none without a gold set."""
    src_lang, tgt_lang = cfg["data"]["src_lang"], cfg["data"]["tgt_lang"]
    gold = gold_set(src_lang, tgt_lang, GOLD_PART)
    if gold is None:
        return []
    examples = encoded_gold(gold, (src_lang, tgt_lang), data, cfg["data"]["max_len"])
    log.info("scoring %s on %d hand-aligned %s pairs of the gold set for %s→%s",
             AER_TAGS["aer"], len(examples), GOLD_PART, src_lang, tgt_lang)  # fmt: skip
    return [AerHook(examples, config=cfg)]


# Registered before the alignment images (`seq2seq.visualise.alignment_images`, which imports this
# module first), as the images mark the head this hook chooses.
registry.register("hook", "aer")(AerHook)
