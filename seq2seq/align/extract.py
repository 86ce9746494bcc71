"""Word links from attention weights.

The model's cross-attention α (tgt_len, src_len) is over subword pieces, the EOS row and
column included. Choose one layer (default the last) and one head or the mean over the
heads, then move to words (`seq2seq.align.words`):

    w(j, i) = mean_{t ∈ pieces(j)}  Σ_{s ∈ pieces(i)} α_t(s)

A source word's weight is the SUM over its pieces, the attention mass that falls on the
word (a mean would favour words cut into few pieces); a target word's row is the MEAN
over its pieces, so that it stays a distribution over the source and a threshold means
the same for long and short words. The EOS row and column belong to no word and are
dropped without renormalising: mass on EOS links nothing.

Extraction (attention read as a soft alignment, as Bahdanau et al. 2015 draw it; scored as
by Och & Ney 2003):

* `argmax`: each target word links the source word of its largest weight (ties to the
  first), so every target word gets exactly one link;
* `threshold`: each target word links every source word with w(j, i) ≥ t, so a target
  word may get several links or none.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from seq2seq.align.gold import as_in_corpus
from seq2seq.align.pharaoh import Link, Links
from seq2seq.align.teacher_forced import (
    ATTENTION,
    LAYER,
    SOURCES,
    read_later,
    teacher_forced_weights,
)
from seq2seq.align.words import attach_punctuation, piece_words, words
from seq2seq.data.languages import is_unspaced_cjk
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.search.translator import Translation, Translator
from seq2seq.special_tokens import EOS_PIECE

log = logging.getLogger(__name__)

EXTRACTIONS = ("argmax", "threshold")
NO_ATTENTION = "the model has no attention weights (attention=none)"
NO_LAYER = "the model has no alignment layer (a model trained with alignment=layer has one)"


class AlignmentError(ValueError):
    """Settings that do not fit the model (a layer or head it lacks, no attention)."""


@dataclass(frozen=True)
class AlignSettings:
    """Which attention to read and how to turn it into links (module docstring).

    layer: attention layer, counted from 0 or from the end (-1, the default, is the last);
    head: one head's index, or None for the mean over the heads;
    extract: "argmax" or "threshold"; threshold: t of the threshold extraction, in (0, 1];
    source: ATTENTION (the translation attention) or LAYER (the alignment layer of a model
    trained with `alignment=layer`: one layer, its heads).
    """

    layer: int = -1
    head: int | None = None
    extract: str = "argmax"
    threshold: float = 0.3
    source: str = ATTENTION  # or LAYER: the separate alignment layer, as one layer

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {self.source!r}")
        if self.extract not in EXTRACTIONS:
            raise ValueError(
                f"extract must be one of {', '.join(EXTRACTIONS)}, got {self.extract!r}"
            )
        if not (isinstance(self.threshold, (int, float)) and 0 < self.threshold <= 1):
            raise ValueError(f"threshold must be a number in (0, 1], got {self.threshold!r}")
        if self.head is not None and self.head < 0:
            raise ValueError(f"head must be an index >= 0 or None (the mean), got {self.head}")


def select_weights(attention: torch.Tensor, settings: AlignSettings) -> torch.Tensor:
    """(layers, heads, tgt_len, src_len) → (tgt_len, src_len): the chosen layer and head."""
    layers, heads = attention.shape[:2]
    if not -layers <= settings.layer < layers:
        raise AlignmentError(
            f"layer {settings.layer}: the model has {layers} attention layer(s), "
            f"0..{layers - 1} (or -{layers}..-1 from the end)"
        )
    chosen = attention[settings.layer].float().cpu()  # (heads, tgt_len, src_len)
    if settings.head is None:
        return chosen.mean(dim=0)
    if settings.head >= heads:
        raise AlignmentError(f"head {settings.head}: the model has {heads} head(s), 0..{heads - 1}")
    return chosen[settings.head]


def membership(owners: Sequence[int | None], count: int) -> torch.Tensor:
    """(pieces, count) 0/1 matrix: piece p belongs to word owners[p] (None: to none)."""
    matrix = torch.zeros(len(owners), count)
    for piece, word in enumerate(owners):
        if word is not None and word < count:
            matrix[piece, word] = 1.0
    return matrix


def word_weights(
    weights: torch.Tensor,
    source: Sequence[int | None],
    target: Sequence[int | None],
    source_words: int,
    target_words: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Piece weights (..., tgt_len, src_len) → word weights (..., target_words,
    source_words), source pieces summed and target pieces averaged (module docstring), and
    a (target_words,) mask of the target words that have at least one piece. Leading
    dimensions (layers, heads) are kept: every matrix is mapped at once."""
    if tuple(weights.shape[-2:]) != (len(target), len(source)):
        raise ValueError(
            f"attention of shape {tuple(weights.shape)} does not fit "
            f"{len(target)} target × {len(source)} source pieces"
        )
    to_source = membership(source, source_words)  # (src_len, source_words)
    to_target = membership(target, target_words)  # (tgt_len, target_words)
    pieces_per_word = to_target.sum(dim=0)  # (target_words,)
    summed = to_target.T @ weights.float() @ to_source  # (..., target_words, source_words)
    return summed / pieces_per_word.clamp(min=1).unsqueeze(1), pieces_per_word > 0


def extract_links(weights: torch.Tensor, covered: torch.Tensor, settings: AlignSettings) -> Links:
    """Links from word weights (target_words, source_words), for the covered target words
    (a row without any weight on a source word, all of it on EOS, links nothing)."""
    links: set[Link] = set()
    for target in covered.nonzero().flatten().tolist():
        row = weights[target]  # (source_words,)
        if settings.extract == "threshold":
            chosen = (row >= settings.threshold).nonzero().flatten().tolist()
        else:
            chosen = [int(row.argmax())] if row.numel() and row.max() > 0 else []
        links.update((source, target) for source in chosen)
    return Links.of(links)


class Sentence(NamedTuple):
    """One side of a pair: its text and its pieces (as the model's attention has them)."""

    text: str
    pieces: Sequence[str]


class WordWeights(NamedTuple):
    """The word weights of one pair, (target_words, source_words), and the (target_words,)
    mask of the target words that have at least one piece (`word_weights`)."""

    weights: torch.Tensor
    covered: torch.Tensor

    @classmethod
    def empty(cls, source_words: int, target_words: int) -> WordWeights:
        """No weight anywhere: the pair of a side without pieces, which links nothing."""
        return cls(torch.zeros(target_words, source_words), torch.zeros(target_words, dtype=bool))


def attention_word_weights(
    attention: torch.Tensor, source: Sentence, target: Sentence, settings: AlignSettings
) -> WordWeights:
    """The word weights of one pair from its attention (layers, heads, tgt_len, src_len),
    whose columns are the source pieces and rows the target pieces, EOS included."""
    weights = select_weights(attention, settings)  # (tgt_len, src_len)
    return WordWeights(*word_weights(
        weights,
        piece_words(source.text, source.pieces),
        piece_words(target.text, target.pieces),
        len(words(source.text)),
        len(words(target.text)),
    ))  # fmt: skip


def links_from_attention(
    attention: torch.Tensor, source: Sentence, target: Sentence, settings: AlignSettings
) -> Links:
    """Word links of one pair from its attention (layers, heads, tgt_len, src_len), whose
    columns are the source pieces and rows the target pieces, EOS included."""
    return extract_links(*attention_word_weights(attention, source, target, settings), settings)


def as_the_model_reads(text: str, lang: str) -> str:
    """One side of a pair as the model was trained to read it: Chinese and Japanese without
    spaces (`as_in_corpus`, as `valid/aer` reads the gold's segmented Chinese), any other
    language with the punctuation it splits off written against its word
    (`attach_punctuation`: `busy .` → `busy.`). Text as the corpus writes it is unchanged."""
    return as_in_corpus(text, lang) if is_unspaced_cjk(lang) else attach_punctuation(text)


def align_pairs(
    translator: Translator, sources: Sequence[str], targets: Sequence[str], settings: AlignSettings
) -> list[Links]:
    """Word links of each (source, target) pair from the model's teacher-forced attention
    (`pair_weights`), over the words of the texts as given."""
    found = pair_weights(translator, sources, targets, settings)
    return [extract_links(weights, covered, settings) for weights, covered in found]


def pair_weights(
    translator: Translator, sources: Sequence[str], targets: Sequence[str], settings: AlignSettings
) -> list[WordWeights]:
    """The word weights of each (source, target) pair from the model's teacher-forced
    attention, over the words of the texts as given (`seq2seq.align.words`).

    Each side is encoded by `encoded_side`: read as the model was trained
    (`as_the_model_reads`: pre-segmented Chinese without its spaces), cut to the model's
    `data.max_len` pieces (with a warning; the words past the cut get no weight), its pieces
    matched to the given words by characters. A pair with an empty side has no weight.
    """
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} targets")
    limit, (src_lang, tgt_lang) = translator.max_source_len, reading_langs(translator)
    encoded = [
        (encoded_side(translator.src_tokenizer, source, src_lang, limit, n, "source"),
         encoded_side(translator.tgt_tokenizer, target, tgt_lang, limit, n, "target"))
        for n, (source, target) in enumerate(zip(sources, targets), 1)
    ]  # fmt: skip
    todo = [index for index, (source, target) in enumerate(encoded) if source[0] and target[0]]
    attentions = _teacher_forced(
        translator, [(encoded[i][0][0], encoded[i][1][0]) for i in todo], settings.source
    )
    found = [WordWeights.empty(len(words(s)), len(words(t))) for s, t in zip(sources, targets)]
    for index, attention in zip(todo, attentions):
        (_, source), (_, target) = encoded[index]
        found[index] = attention_word_weights(attention, source, target, settings)
    return found


def reading_langs(translator: Translator) -> tuple[str, str]:
    """The (source, target) languages a model's tokenizers read: each its own, or the two
    halves of a joint tokenizer's `<src_lang>-<tgt_lang>` (`seq2seq.data.prepare`)."""
    source, target = translator.src_tokenizer.lang, translator.tgt_tokenizer.lang
    halves = source.split("-")
    if source == target and len(halves) == 2:
        return halves[0], halves[1]
    return source, target


def encoded_side(
    tokenizer: Tokenizer,
    words_text: str,
    lang: str,
    max_len: int,
    line: int | None = None,
    side: str = "",
) -> tuple[list[int], Sentence]:
    """(ids, pieces matched to the words) of one side of a pair given as words, in `lang`
    (the run's `data.src_lang` or `tgt_lang`; a joint tokenizer's own is both): the text as
    the model reads it (`as_the_model_reads`), its ids cut to
    `max_len` as validation cuts them (a warning naming `line` and `side` when a line is
    given), its first pieces then EOS matched by characters to the words of `words_text`."""
    text = as_the_model_reads(words_text, lang)
    ids = tokenizer.encode(text)
    if len(ids) > max_len and line is not None:
        log.warning("line %d: %d %s pieces, truncated to the model's limit of %d",
                    line, len(ids), side, max_len)  # fmt: skip
    ids = ids[:max_len]
    return ids, worded_sentence(tokenizer, words_text, text, len(ids))


def _teacher_forced(
    translator: Translator, examples: list, source: str = ATTENTION
) -> list[torch.Tensor]:
    if not examples:
        return []
    attentions = teacher_forced_weights(translator.model, examples, translator.device, source)
    if attentions is None:
        raise AlignmentError(NO_LAYER if source == LAYER else NO_ATTENTION)
    return attentions


def _sentence(tokenizer: Tokenizer, text: str, count: int) -> Sentence:
    """`text` with its first `count` pieces as written (an unknown character keeps its
    surface, where `id_to_piece` would say <unk>), then EOS."""
    return worded_sentence(tokenizer, text, text, count)


def worded_sentence(tokenizer: Tokenizer, words_text: str, encoded: str, count: int) -> Sentence:
    """The first `count` pieces of `encoded` (the sentence as the model reads it), then EOS,
    matched by characters to the words of `words_text`: the same characters with other word
    boundaries, such as a gold set's segmented Chinese (`东京 是 一 个 …` for `东京是一个…`)."""
    return Sentence(words_text, tokenizer.pieces(encoded)[:count] + [EOS_PIECE])


def translation_links(
    translator: Translator, translation: Translation, settings: AlignSettings
) -> list[Links]:
    """Word links between the source and each hypothesis of a translation, from the
    attention of the search itself (asked for with `need_weights=True`), or with
    `settings.source` LAYER from the alignment layer fed the source and the hypothesis:
    one per hypothesis."""
    source = _sentence(
        translator.src_tokenizer, translation.source, len(translation.source_pieces) - 1
    )
    if settings.source == LAYER:
        return [
            links_from_attention(weights, source, Sentence(text, pieces), settings)
            for weights, text, pieces in zip(
                hypothesis_layer_weights(translator, translation), translation.texts,
                translation.target_pieces,
            )
        ]  # fmt: skip
    found = []
    for hypothesis, text, pieces in zip(
        translation.hypotheses, translation.texts, translation.target_pieces
    ):
        if hypothesis.attention is None:
            raise AlignmentError(NO_ATTENTION)
        attention = read_later(
            hypothesis.attention, getattr(translator.model, "alignment_shift", 0)
        )
        found.append(links_from_attention(attention, source, Sentence(text, pieces), settings))
    return found


def hypothesis_layer_weights(translator: Translator, translation: Translation) -> list[torch.Tensor]:
    """The alignment layer's weights (1, heads, len(tokens) + 1, source pieces + 1) of each
    hypothesis of a translation, the layer fed the source as the search read it and the
    hypothesis (teacher forcing on the model's own output); AlignmentError without a layer."""
    ids = translator.src_tokenizer.encode(translation.source)[: len(translation.source_pieces) - 1]
    examples = [(ids, hypothesis.tokens) for hypothesis in translation.hypotheses]
    return _teacher_forced(translator, examples, LAYER)
