"""Translate many encoded sentences: batch by length, search, restore the input order.

The one decoding path used by validation, test evaluation and the command-line tools.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from seq2seq.models.model import Seq2Seq
from seq2seq.search import Hypothesis, beam_search, greedy_search
from seq2seq.special_tokens import EOS_ID, PAD_ID


class SearchSettingsError(ValueError):
    """A search setting out of range; `field` names it, `problem` says what is wrong."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field} {problem}")
        self.field, self.problem = field, problem


@dataclass
class SearchSettings:
    """How to search: beam width (1 = greedy), GNMT length penalty, output length limit
    `max_len_a * source length + max_len_b`, sentences per batch, hypotheses returned.

    Invalid values raise SearchSettingsError at construction, so that a command-line option
    or `trainer.test_search` fails before any work is done."""

    beam_size: int = 1
    length_penalty: float = 1.0
    max_len_a: float = 1.5
    max_len_b: int = 10
    batch_size: int = 128
    n_best: int = 1

    def __post_init__(self) -> None:
        for name in ("beam_size", "batch_size", "n_best"):
            _check_count(name, getattr(self, name))
        if self.n_best > self.beam_size:
            raise SearchSettingsError(
                "n_best", f"must not exceed beam_size ({self.beam_size}), got {self.n_best}"
            )
        _check_finite("length_penalty", self.length_penalty, minimum=None)
        _check_finite("max_len_a", self.max_len_a, minimum=0.0)
        if (
            isinstance(self.max_len_b, bool)
            or not isinstance(self.max_len_b, int)
            or self.max_len_b < 0
        ):
            raise SearchSettingsError(
                "max_len_b", f"must be an integer >= 0, got {self.max_len_b!r}"
            )


def _check_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SearchSettingsError(name, f"must be an integer of at least 1, got {value!r}")


def _check_finite(name: str, value: object, minimum: float | None) -> None:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or (minimum is not None and value < minimum):
        bound = "" if minimum is None else f" >= {minimum:g}"
        raise SearchSettingsError(name, f"must be a finite number{bound}, got {value!r}")


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
) -> list[list[Hypothesis]]:
    """n-best hypotheses for every source, in input order.

    Sentences are sorted by length so that each batch holds similar lengths (little
    padding), then put back in the order they came in.
    """
    model.eval()
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    results: list[list[Hypothesis] | None] = [None] * len(sources)
    for start in range(0, len(order), settings.batch_size):
        chunk = order[start : start + settings.batch_size]
        src, src_mask = pad_sources([sources[i] for i in chunk], device)
        for index, nbest in zip(chunk, _search(model, src, src_mask, settings, need_weights)):
            results[index] = nbest
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
