"""The pooling hook: TensorBoard images of attention pooling's weights (N vs 1).

A model whose source is summarised by attention pooling (`model.summary=attention_pool`,
or `attention=none attention.context=attention_pool`: `seq2seq.models.attention.pooling`)
has one distribution over the source per pooling, not one per output piece. After each
validation this hook draws it for the probe sentences (those of the alignment images:
`seq2seq.visualise.alignment_images`) as a heat map of one row per pooling over the
source pieces, EOS included, logged as `pooling/<NN>_<start of the sentence>`, so that
TensorBoard's step slider shows what the pooling learns to look at. A row is labelled by
its pooling: `summary` (what starts the decoder) or `context` (the one context of
attention=none; `context.<layer>` with one per decoder layer).

Registered as the validation hook `pooling` (`seq2seq.training.hooks`); a model without
attention pooling gets none.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import torch

from seq2seq import registry
from seq2seq.data.batching import collate
from seq2seq.data.settings import source_name
from seq2seq.data.sources import data_source
from seq2seq.training.hooks import ValidationContext, ValidationHook
from seq2seq.visualise.alignment_images import (
    TOY_SHOWN,
    ShownSentence,
    heatmap,
    probe_sentences,
    sample_sentences,
    shown_sentence,
)
from seq2seq.visualise.probes import encode_probe, probes_for

log = logging.getLogger(__name__)


def has_pooling(cfg: Mapping[str, Any]) -> bool:
    """Whether the run's config (plain data) pools the source with attention."""
    summary = (cfg.get("model") or {}).get("summary")
    context = (cfg.get("attention") or {}).get("context")
    return summary == "attention_pool" or context == "attention_pool"


def pooling_tag(tag: str) -> str:
    """`alignment/00_我爱中国` → `pooling/00_我爱中国`."""
    return tag.replace("alignment/", "pooling/", 1)


class PoolingHook:
    """`hook(context)`: TensorBoard images of attention pooling's weights over each shown
    sentence (`pooling/<NN>_...`, one row per pooling), for a model with
    `model.summary=attention_pool` or `attention.context=attention_pool`."""

    def __init__(self, shown: list[ShownSentence], run_config: Mapping[str, Any]):
        self.shown = shown
        self.run_config = run_config

    @classmethod
    def for_run(
        cls, cfg: Mapping[str, Any], data: Any, earlier: tuple[ValidationHook, ...]
    ) -> list[PoolingHook]:
        """The sentences of the alignment images: the toy tasks' first valid examples, the
        pair's probes, or short valid sentences; none for a model without pooling."""
        if not has_pooling(cfg):
            return []
        shown = shown_sentences(cfg, data)
        return [cls(shown, cfg)] if shown else []

    def __call__(self, context: ValidationContext) -> None:
        if not context.logger.enabled:
            return
        for sentence in self.shown:
            names, weights = pooled_weights(context.model, sentence.source_ids, context.device)
            figure = self.draw(sentence, names, weights, context.step)
            context.logger.image(pooling_tag(sentence.tag), heatmap().figure_to_rgb(figure),
                                 context.step)  # fmt: skip

    def draw(self, sentence: ShownSentence, names: list[str], weights: torch.Tensor, step: int):
        """One panel: a row per pooling (`names`) over the source pieces."""
        data = self.run_config["data"]
        title = (f"{sentence.text} · attention pooling · {data['src_lang']}→{data['tgt_lang']} "
                 f"· step {step}")  # fmt: skip
        matrix = weights.unsqueeze(0).unsqueeze(0)  # (1 layer, 1 head, poolings, src_len)
        return heatmap().draw_alignment(sentence.source_pieces, names, matrix, title)


def shown_sentences(cfg: Mapping[str, Any], data: Any) -> list[ShownSentence]:
    """The sentences the alignment images draw (`seq2seq.visualise.alignment_images`)."""
    if data_source(source_name(cfg["data"])).known_alignment:
        lines = data.valid.src_lines
        return [shown_sentence(index, lines[index], list(src), data.src_tokenizer)
                for index, (src, _) in enumerate(data.valid.examples[:TOY_SHOWN])]  # fmt: skip
    probes = probes_for(cfg["data"]["src_lang"], cfg["data"]["tgt_lang"],
                        cfg["logging"]["probe_file"])  # fmt: skip
    if probes:
        return probe_sentences(
            [encode_probe(probe, data.src_tokenizer, data.tgt_tokenizer) for probe in probes]
        )
    return sample_sentences(data)


@torch.no_grad()
def pooled_weights(
    model: torch.nn.Module, source_ids: list[int], device: torch.device
) -> tuple[list[str], torch.Tensor]:
    """The names of the model's poolings and their weights over one source (EOS included):
    `(poolings, len(source_ids) + 1)` in float32 on the CPU (`Seq2Seq.pooling_weights`);
    no names and no rows for a model without attention pooling."""
    batch = collate([(list(source_ids), [])], [0]).to(device)
    was_training = model.training
    model.eval()
    try:
        found = model.pooling_weights(batch.src, batch.src_mask)
    finally:
        model.train(was_training)
    names = sorted(found)
    if not names:  # a model without attention pooling
        return [], torch.zeros(0, batch.src.size(1))
    return names, torch.stack([found[name][0].float().cpu() for name in names])


registry.register("hook", "pooling")(PoolingHook)
