"""AER of a finished run's best checkpoint on the test part of the hand-aligned gold set.

The comparison (`seq2seq-compare`) gives every run two figures, both on the gold set's
`test` part (`seq2seq.align.gold`), from the checkpoint's teacher-forced attention with
argmax links:

* head mean: the last layer, mean over its heads (`AlignSettings()`: what `valid/aer`
  logs during training and `seq2seq-align CKPT --gold` scores by default);
* chosen head: the one layer × head with the lowest AER on the gold set's `valid` part,
  scored on the `test` part. The head is chosen on valid, like every other choice of the
  comparison, so that its test AER is not the best of many tries on the test pairs; it
  is named as `seq2seq-align --layer L --head H` takes it (both counted from 0);
* guided head: for a model trained with guided alignment (`alignment.guided`), the head
  (or head mean) that was supervised (`seq2seq.align.defaults.guided_mark`).

The gold pairs are encoded as the AER hook encodes them (`seq2seq.visualise.hooks.
gold_example`) and the links come from `seq2seq.align.extract.links_from_attention`:
nothing here extracts alignments of its own. The attention of each part is computed once
and read for every layer and head.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from seq2seq.align.attention import teacher_forced_weights
from seq2seq.align.defaults import guided_mark
from seq2seq.align.extract import AlignSettings, links_from_attention
from seq2seq.align.gold import gold_set
from seq2seq.metrics.aer import AlignmentCounts, corpus_counts
from seq2seq.search.translator import Translator
from seq2seq.visualise.hooks import GoldExample, gold_example


@dataclass(frozen=True)
class GoldAer:
    """Test AER of one checkpoint: the last layer's head mean, the head that aligned best
    on the valid part (`layer`, `head`, from 0) and, for a guided model, the guided head."""

    head_mean: AlignmentCounts
    best: AlignmentCounts
    layer: int
    head: int
    guided: AlignmentCounts | None = None  # the guided head's; None for an unguided model

    @property
    def best_name(self) -> str:
        return f"layer {self.layer} head {self.head}"


def gold_examples(translator: Translator, part: str) -> list[GoldExample] | None:
    """The gold pairs of `part` encoded for the checkpoint's tokenisers (pairs with an
    empty side left out); None for toy data or a language pair without a gold set."""
    if translator.config.data.kind == "toy":
        return None
    src_lang, tgt_lang = translator.config.data.src_lang, translator.config.data.tgt_lang
    pairs = gold_set(src_lang, tgt_lang, part)
    if pairs is None:
        return None
    examples = [
        gold_example(pair, src_lang, tgt_lang, translator, translator.max_source_len)
        for pair in pairs
    ]
    return [example for example in examples if example.source_ids and example.target_ids]


def attention_of(translator: Translator, examples: list[GoldExample]) -> list[torch.Tensor] | None:
    """Every layer's and head's teacher-forced attention of each example; None without
    attention (attention=none)."""
    pairs = [(example.source_ids, example.target_ids) for example in examples]
    return teacher_forced_weights(translator.model, pairs, translator.device) if pairs else None


def counts_of(
    attentions: list[torch.Tensor], examples: list[GoldExample], settings: AlignSettings
) -> AlignmentCounts:
    """Link counts of the `settings` links of every example against its gold links."""
    proposed = [
        links_from_attention(attention, example.source, example.target, settings)
        for attention, example in zip(attentions, examples, strict=True)
    ]
    return corpus_counts(proposed, [example.links for example in examples])


def _aer_or_worst(counts: AlignmentCounts) -> float:
    return math.inf if counts.aer is None else counts.aer


def checkpoint_aer(checkpoint: Path, device: str = "cpu") -> GoldAer | None:
    """The test AER figures of a checkpoint (module docstring); None when the model has
    no attention or its language pair no gold set. CheckpointError when it cannot load."""
    translator = Translator.load(checkpoint, device)
    test = gold_examples(translator, "test")
    valid = gold_examples(translator, "valid")
    if not test or not valid:
        return None
    test_attention = attention_of(translator, test)
    valid_attention = attention_of(translator, valid)
    if test_attention is None or valid_attention is None:
        return None
    layers, heads = test_attention[0].shape[:2]
    grid = [
        AlignSettings(layer=layer, head=head) for layer in range(layers) for head in range(heads)
    ]
    chosen = min(grid, key=lambda settings: _aer_or_worst(
        counts_of(valid_attention, valid, settings)
    ))  # fmt: skip
    mark = guided_mark(translator.config, layers, heads)
    guided = None if mark is None else AlignSettings(layer=mark.layer, head=mark.head)
    return GoldAer(
        head_mean=counts_of(test_attention, test, AlignSettings()),
        best=counts_of(test_attention, test, chosen),
        layer=chosen.layer,
        head=chosen.head or 0,
        guided=None if guided is None else counts_of(test_attention, test, guided),
    )
