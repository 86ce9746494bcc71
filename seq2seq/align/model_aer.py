"""A model's AER on the hand-aligned gold pairs: the one place where its attention becomes
link counts, for `valid/aer` during training, the comparison's test AER and the head choice.

Four steps, each done once however many readings are scored:

1. encode (`gold_examples`): each side of a gold pair as the model reads it
   (`seq2seq.align.extract.encoded_side`: Chinese without the gold's spaces, punctuation
   split off an English word written against it), its ids cut to the model's
   `data.max_len` as validation cuts them, its pieces matched to the gold words by their
   characters; a pair with an empty side is left out (`aligned_gold`: it links nothing);
2. attend (`GoldAttention.of`): the teacher-forced attention of every pair, (layers, heads,
   tgt_len, src_len), a guided model's rows read `alignment.shift` steps later
   (`seq2seq.align.teacher_forced`);
3. read: word links under `AlignSettings` (layer, head or head mean, argmax or threshold;
   `links_from_attention`), or under every layer × head and head mean at once
   (`seq2seq.align.head_choice.candidate_links`);
4. count: |A|, |S|, |P|, |A ∩ S| and |A ∩ P| summed over the pairs, from which precision,
   recall and AER = 1 − (|A ∩ S| + |A ∩ P|) / (|A| + |S|) follow (Och & Ney 2003; the formula
   is `seq2seq.metrics.aer`).

Who reads which figures: the AER hook (`seq2seq.align.aer_hook`) logs the head mean of the
last layer and the candidate with the lowest AER on the `valid` part; `checkpoint_aer` gives
a finished run's figures on the `test` part, which `seq2seq-compare` (`seq2seq.study.aer_rows`)
and the lab report: the head mean, the head chosen on the `valid` part (every layer × head,
no head means; the first lowest AER) and a guided model's guided head.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from seq2seq.align.defaults import guided_mark
from seq2seq.align.extract import (
    LAYER,
    NO_ATTENTION,
    NO_LAYER,
    AlignmentError,
    AlignSettings,
    Sentence,
    encoded_side,
    links_from_attention,
    reading_langs,
)
from seq2seq.align.gold import GoldPair, gold_set
from seq2seq.align.head_choice import HeadScore, candidate_links, candidates
from seq2seq.align.pharaoh import Links
from seq2seq.align.teacher_forced import teacher_forced_weights
from seq2seq.data.settings import source_name
from seq2seq.metrics.aer import AlignmentCounts, corpus_counts, pair_counts
from seq2seq.search.translator import Translator

# --- 1. encode ------------------------------------------------------------------------


@dataclass
class GoldExample:
    """A gold pair as the model reads it: ids cut to `data.max_len`, each side's pieces
    (EOS included) with the gold words they are matched to, and the gold links."""

    source_ids: list[int]
    target_ids: list[int]
    source: Sentence
    target: Sentence
    links: Links


def gold_example(
    pair: GoldPair, langs: tuple[str, str], tokenizers: Any, max_len: int, line: int | None = None
) -> GoldExample:
    """One gold pair in the languages `langs` (source, target) encoded with
    `tokenizers.src_tokenizer` and `.tgt_tokenizer` (a run's prepared data or a translator),
    each side by `encoded_side` (as the model reads it, cut to `max_len`; a cut is warned
    about when `line` is given)."""
    (src_lang, tgt_lang), src_tok, tgt_tok = (
        langs,
        tokenizers.src_tokenizer,
        tokenizers.tgt_tokenizer,
    )
    source_ids, source = encoded_side(src_tok, pair.source, src_lang, max_len, line, "source")
    target_ids, target = encoded_side(tgt_tok, pair.target, tgt_lang, max_len, line, "target")
    return GoldExample(source_ids, target_ids, source, target, pair.links)


def encoded_gold(
    pairs: Sequence[GoldPair], langs: tuple[str, str], tokenizers: Any, max_len: int
) -> list[GoldExample]:
    """The pairs encoded (`gold_example`), those with an empty side left out."""
    examples = [gold_example(pair, langs, tokenizers, max_len) for pair in pairs]
    return [example for example in examples if example.source_ids and example.target_ids]


def gold_examples(translator: Translator, part: str) -> list[GoldExample] | None:
    """The gold pairs of `part` encoded for a checkpoint's tokenisers and `data.max_len`;
    None for toy data or a language pair without a gold set."""
    data = translator.run_config["data"]
    if source_name(data) == "toy":
        return None
    src_lang, tgt_lang = data["src_lang"], data["tgt_lang"]
    pairs = gold_set(src_lang, tgt_lang, part)
    if pairs is None:
        return None
    return encoded_gold(pairs, (src_lang, tgt_lang), translator, translator.max_source_len)


# --- 2. attend, 3. read, 4. count -----------------------------------------------------


@dataclass(frozen=True)
class GoldAttention:
    """A model's teacher-forced attention on encoded gold pairs, computed once and scored
    under any reading: `attentions[i]` (layers, heads, tgt_len, src_len) is `examples[i]`'s."""

    examples: Sequence[GoldExample]
    attentions: Sequence[torch.Tensor]
    # a model with an alignment layer: its weights (1, heads, tgt_len, src_len) per example
    layer_weights: Sequence[torch.Tensor] | None = None

    @classmethod
    def of(
        cls, model: torch.nn.Module, examples: Sequence[GoldExample], device: torch.device
    ) -> GoldAttention | None:
        """The model's attention (and alignment layer's weights, if it has one) on the
        examples; None without examples or without attention weights (attention=none)."""
        if not examples:
            return None
        pairs = [(example.source_ids, example.target_ids) for example in examples]
        attentions = teacher_forced_weights(model, pairs, device)
        layer = teacher_forced_weights(model, pairs, device, LAYER)
        return None if attentions is None else cls(examples, attentions, layer)

    @property
    def shape(self) -> tuple[int, int]:
        """(layers, heads) of the model's attention."""
        layers, heads = self.attentions[0].shape[:2]
        return layers, heads

    def links(self, settings: AlignSettings) -> list[Links]:
        """Each example's word links under `settings` (of the alignment layer with
        `settings.source` LAYER: AlignmentError when the model has none)."""
        weights = self.attentions
        if settings.source == LAYER:
            if self.layer_weights is None:
                raise AlignmentError(NO_LAYER)
            weights = self.layer_weights
        return [
            links_from_attention(attention, example.source, example.target, settings)
            for attention, example in zip(weights, self.examples, strict=True)
        ]

    def counts(self, settings: AlignSettings | None = None) -> AlignmentCounts:
        """The link counts of `settings` (default: the last layer's head mean, argmax) over
        the examples."""
        proposed = self.links(settings or AlignSettings())
        return corpus_counts(proposed, [example.links for example in self.examples])

    def head_scores(self, base: AlignSettings | None = None) -> list[HeadScore]:
        """The counts of every layer × head and head mean under `base`'s extraction
        (`seq2seq.align.head_choice.candidates`, in their order), each pair's attention
        mapped to words once; [] without examples."""
        if not self.attentions:
            return []
        settings = candidates(*self.shape, base)
        totals = [AlignmentCounts()] * len(settings)
        for attention, example in zip(self.attentions, self.examples, strict=True):
            found = candidate_links(attention, example.source, example.target, settings)
            totals = [total + pair_counts(one, example.links) for total, one in zip(totals, found)]
        return [HeadScore(one, counts) for one, counts in zip(settings, totals)]


def model_counts(
    model: torch.nn.Module,
    examples: Sequence[GoldExample],
    device: torch.device,
    settings: AlignSettings | None = None,
) -> AlignmentCounts | None:
    """The link counts of the model's attention read with `settings` (default: the last
    layer's head mean, argmax) on the examples; None without attention or examples."""
    scored = GoldAttention.of(model, examples, device)
    return None if scored is None else scored.counts(settings)


def aligned_gold(
    translator: Translator, pairs: Sequence[GoldPair], settings: AlignSettings
) -> tuple[list[Links], AlignmentCounts]:
    """A user's gold pairs (`seq2seq-align --gold`) read as every gold set is: each pair's
    links under `settings` (a pair with an empty side links nothing) and their counts over
    all the pairs. AlignmentError without attention weights or for a layer or head the
    model lacks; a cut to the model's limit is warned about, naming the line."""
    langs, limit = reading_langs(translator), translator.max_source_len
    examples = [gold_example(pair, langs, translator, limit, line)
                for line, pair in enumerate(pairs, 1)]  # fmt: skip
    readable = [
        i for i, example in enumerate(examples) if example.source_ids and example.target_ids
    ]
    links = [Links()] * len(pairs)
    if readable:
        scored = GoldAttention.of(
            translator.model, [examples[i] for i in readable], translator.device
        )
        if scored is None:
            raise AlignmentError(NO_ATTENTION)
        for index, found in zip(readable, scored.links(settings), strict=True):
            links[index] = found
    return links, corpus_counts(links, [pair.links for pair in pairs])


# --- a finished run's figures ---------------------------------------------------------


@dataclass(frozen=True)
class GoldAer:
    """Test AER of one checkpoint: the last layer's head mean, the head that aligned best
    on the valid part (`layer`, `head`, from 0), for a guided model the guided head, and for
    a model with an alignment layer, the layer (its heads' mean)."""

    head_mean: AlignmentCounts
    best: AlignmentCounts
    layer: int
    head: int
    guided: AlignmentCounts | None = None  # the guided head's; None for an unguided model
    layer_counts: AlignmentCounts | None = None  # the alignment layer's; None without one

    @property
    def best_name(self) -> str:
        """`layer L head H`, as `seq2seq-align --layer L --head H` takes them."""
        return f"layer {self.layer} head {self.head}"


def checkpoint_aer(checkpoint: Path, device: str = "cpu") -> GoldAer | None:
    """The test-part figures of a checkpoint (module docstring): the head is chosen on the
    valid part, so that its test AER is not the best of many tries on the test pairs. None
    when the model has no attention or its language pair no gold set; CheckpointError when
    it cannot load."""
    translator = Translator.load(checkpoint, device)
    test = gold_examples(translator, "test")
    valid = gold_examples(translator, "valid")
    if not test or not valid:
        return None
    on_test = GoldAttention.of(translator.model, test, translator.device)
    on_valid = GoldAttention.of(translator.model, valid, translator.device)
    if on_test is None or on_valid is None:
        return None
    layers, heads = on_test.shape
    grid = [
        AlignSettings(layer=layer, head=head) for layer in range(layers) for head in range(heads)
    ]
    chosen = min(grid, key=lambda settings: _aer_or_worst(on_valid.counts(settings)))
    mark = guided_mark(translator.run_config, layers, heads)
    guided = None if mark is None else AlignSettings(layer=mark.layer, head=mark.head)
    return GoldAer(
        head_mean=on_test.counts(AlignSettings()),
        best=on_test.counts(chosen),
        layer=chosen.layer,
        head=chosen.head or 0,
        guided=None if guided is None else on_test.counts(guided),
        layer_counts=None if on_test.layer_weights is None else on_test.counts(LAYER_SETTINGS),
    )


LAYER_SETTINGS = AlignSettings(layer=0, source=LAYER)  # the alignment layer's head mean


def _aer_or_worst(counts: AlignmentCounts) -> float:
    return math.inf if counts.aer is None else counts.aer
