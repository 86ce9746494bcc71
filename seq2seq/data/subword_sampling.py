"""Subword regularisation: each training batch read with sampled segmentations (Kudo 2018).

A unigram subword model gives every segmentation x = (x_1, ..., x_m) of a sentence X the
probability P(x) = Π_i p(x_i). Encoding picks the best one; subword regularisation trains on
a segmentation sampled from the l best instead, every time a sentence is read:

    P(x | X) = P(x)^α / Σ_{x' in l-best(X)} P(x')^α        (Kudo 2018, eq. 9)

α → 0 draws uniformly from the l best, α → ∞ always gives the best. Validation, the test and
translation keep the best segmentation.

The draw of a batch comes from a generator seeded by (`trainer.seed`, rank, epoch, position
of the batch), so a run is the same every time, and a run resumed mid-epoch reads the rest
of the epoch as the uninterrupted run did: no state is kept. A candidate longer than
`data.max_len` pieces is never drawn (the stored, best encoding always qualifies), so a row
of a batch never exceeds what the preparation allowed; the batch's size in tokens can grow
past `data.max_tokens` by the extra pieces (at most rows × (`data.max_len` + 1)).

Only a unigram sentencepiece model has n-best segmentations (BPE and the toy tasks' symbols
do not): `SubwordSampling.of` refuses the others, naming the option.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sentencepiece as spm

from seq2seq.data.batching import Batch, ParallelData, collate
from seq2seq.data.tokenizer import SubwordTokenizer, Tokenizer

NBEST_KEY = "trainer.subword_nbest"


def has_nbest(processor: spm.SentencePieceProcessor) -> bool:
    """Whether the model gives n-best segmentations (a unigram model does, BPE does not)."""
    try:
        processor.nbest_encode("a", nbest_size=2)
    except RuntimeError:  # "NBestEncode is not available for the current model"
        return False
    return True


@dataclass(frozen=True)
class SideSampler:
    """Samples segmentations of one language's sentences from its unigram model."""

    tokenizer: SubwordTokenizer
    piece_log_probs: np.ndarray  # (vocab,) float64: log p(piece) of the unigram model

    @classmethod
    def of(cls, tokenizer: Tokenizer, side: str) -> SideSampler:
        """The sampler of `tokenizer`; ValueError naming the option when it has no n-best."""
        processor = getattr(tokenizer, "processor", None)
        if not isinstance(tokenizer, SubwordTokenizer) or processor is None:
            raise ValueError(
                f"{NBEST_KEY} samples segmentations of a sentencepiece unigram model, and the "
                f"{side} side is cut by {type(tokenizer).__name__}: set {NBEST_KEY}=0"
            )
        if not has_nbest(processor):
            raise ValueError(
                f"{NBEST_KEY} needs unigram subword models (data.model_type=unigram): the "
                f"{side} model has no n-best segmentations; set {NBEST_KEY}=0"
            )
        scores = [processor.get_score(index) for index in range(processor.vocab_size())]
        return cls(tokenizer, np.asarray(scores, dtype=np.float64))

    def sample(
        self,
        texts: Sequence[str],
        nbest: int,
        alpha: float,
        max_len: int,
        rng: np.random.Generator,
    ) -> list[list[int]]:
        """One segmentation of each text, drawn from its `nbest` best by P(x)^α (module
        docstring); candidates longer than `max_len` pieces are left out."""
        candidates = self.tokenizer.processor.nbest_encode(
            list(texts), nbest_size=nbest, out_type=int
        )
        return [self._draw(options, alpha, max_len, rng) for options in candidates]

    def _draw(
        self, options: list[list[int]], alpha: float, max_len: int, rng: np.random.Generator
    ) -> list[int]:
        kept = [ids for ids in options if len(ids) <= max_len] or options[:1]
        log_p = np.array([self.piece_log_probs[ids].sum() for ids in kept])  # (kept,) log P(x)
        weights = np.exp(alpha * (log_p - log_p.max()))  # P(x)^α, scaled by a constant
        return list(kept[rng.choice(len(kept), p=weights / weights.sum())])


@dataclass(frozen=True)
class SubwordSampling:
    """Subword regularisation of the training batches (`trainer.subword_nbest` = l ≥ 2,
    `trainer.subword_alpha` = α), both sides."""

    src: SideSampler
    tgt: SideSampler
    nbest: int
    alpha: float
    max_len: int
    seed: int

    @classmethod
    def of(
        cls,
        src: Tokenizer,
        tgt: Tokenizer,
        nbest: int,
        alpha: float,
        max_len: int,
        seed: int,
    ) -> SubwordSampling | None:
        """The sampling of a run, or None when `nbest` < 2 (off)."""
        if nbest < 2:
            return None
        return cls(SideSampler.of(src, "source"), SideSampler.of(tgt, "target"),
                   nbest, alpha, max_len, seed)  # fmt: skip

    def batch(self, data: ParallelData, indices: Sequence[int], key: Sequence[int]) -> Batch:
        """The batch of `indices` with both sides' segmentations sampled; `key` (rank,
        epoch, position) names the batch, so the same batch always gets the same draw."""
        rng = np.random.default_rng([self.seed, *key])
        sources = [data.src_lines[i] for i in indices]
        targets = [data.tgt_lines[i] for i in indices]
        settings = (self.nbest, self.alpha, self.max_len, rng)
        src_ids = self.src.sample(sources, *settings)
        tgt_ids = self.tgt.sample(targets, *settings)
        return collate(list(zip(src_ids, tgt_ids, strict=True)), indices)
