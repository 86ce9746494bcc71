"""Translate many encoded sentences: batch by length, search, restore the input order.

The one decoding path used by validation, test evaluation and the command-line tools.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from seq2seq.config.search_settings import SearchSettings
from seq2seq.models.model import Seq2Seq
from seq2seq.progress_bars import progress_bar
from seq2seq.search import Hypothesis, beam_search, greedy_search
from seq2seq.special_tokens import EOS_ID, PAD_ID


def pad_sources(
    sources: Sequence[Sequence[int]], device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Source id lists → (src (batch, src_len) with EOS appended, src_mask)."""
    longest = max(len(ids) for ids in sources) + 1
    src = torch.full((len(sources), longest), PAD_ID, dtype=torch.long)
    for row, ids in enumerate(sources):
        src[row, : len(ids)] = torch.tensor(list(ids), dtype=torch.long)
        src[row, len(ids)] = EOS_ID
    src = src.to(device)
    return src, src != PAD_ID


@torch.inference_mode()
def translate_ids(
    model: Seq2Seq,
    sources: Sequence[Sequence[int]],
    settings: SearchSettings,
    device: torch.device,
    need_weights: bool = False,
    progress: bool = False,
) -> list[list[Hypothesis]]:
    """n-best hypotheses for every source, in input order.

    Sentences are sorted by length so that each batch holds similar lengths (little
    padding), then put back in the order they came in. With `progress`, work of more than
    one batch shows a bar over the sentences in a terminal or a notebook
    (`seq2seq.progress_bars`), on stderr.
    """
    model.eval()
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    results: list[list[Hypothesis] | None] = [None] * len(sources)
    shown = progress and len(order) > settings.batch_size
    with progress_bar(
        len(order), unit="line", desc="translating", enabled=shown, leave=False
    ) as bar:
        for start in range(0, len(order), settings.batch_size):
            chunk = order[start : start + settings.batch_size]
            src, src_mask = pad_sources([sources[i] for i in chunk], device)
            for index, nbest in zip(chunk, _search(model, src, src_mask, settings, need_weights)):
                results[index] = nbest
            bar.update(len(chunk))
    return results  # type: ignore[return-value]


def _search(model, src, src_mask, settings: SearchSettings, need_weights: bool):
    limits = {"max_len_a": settings.max_len_a, "max_len_b": settings.max_len_b}
    if settings.beam_size == 1 and settings.n_best == 1:
        hypotheses = greedy_search(model, src, src_mask, need_weights=need_weights, **limits)
        return [[hypothesis] for hypothesis in hypotheses]
    return beam_search(
        model,
        src,
        src_mask,
        beam_size=settings.beam_size,
        length_penalty=settings.length_penalty,
        n_best=settings.n_best,
        need_weights=need_weights,
        **limits,
    )
