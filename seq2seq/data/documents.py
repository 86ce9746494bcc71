"""Documents: a few sentence pairs of a parallel corpus joined into one long pair, or each
pair read with the sentences before it as its context.

With `data.documents` set (`DocumentsOptions` in `seq2seq.data.settings`), a corpus source's
split files are rewritten after the source wrote them and before the subwords are trained:

    train.zh  我们走吧。                       train.zh  我们走吧。<sep>你好。<sep>谢谢。
              你好。                    ->               我累了。
              谢谢。                                     ...
              我累了。
    train.en  Let's go.                        train.en  Let's go.<sep> Hello.<sep> Thanks.
              ...                                        I'm tired.

Each split's pairs, in file order (`order: consecutive`) or after a shuffle
(`order: random`), are cut into groups of k pairs, k drawn uniformly from
[min_sentences, max_sentences] for each document; the last document of a split takes the
pairs left (it may have fewer than min_sentences). Both are drawn by a numpy Generator
seeded by [DOCUMENT_STREAM, data.seed, the split's number], so the documents are the same
at every preparation and another seed groups other pairs.

Real documents (`boundaries: corpus`): a corpus whose source marks its documents
(`text_pair` with `document_marks: blank_lines` or `docids`, `DataSource.marks_documents`)
is read in file order with the document of each pair (`<split>-documents.txt`, written by
the source, read and removed here); a group never crosses the end of a corpus document, so
the last group of each document takes what is left of it. The order is the corpus's.

Document context (`context: c`, Miculicchio et al. 2018's use of documents; the input form
of Tiedemann & Scherrer 2017's "2+1"): instead of one long pair a document, each pair stays
a pair, its source preceded by the c (at most) source sentences before it in its document,
its target its own translation alone:

    train.zh  我们走吧。                      train.zh  我们走吧。
              你好。                    ->            我们走吧。<sep>你好。
              谢谢。                                  我们走吧。<sep>你好。<sep>谢谢。  (c >= 2)
    train.en  Let's go. / Hello. / Thanks.   train.en  Let's go. / Hello. / Thanks.

So the sentence translated is always the last of its source, and a split keeps its pairs
(and its scores stay per sentence); the documents are those of the corpus, or with drawn
boundaries the groups of drawn k. A model that reads sentences (`attention=hierarchical`)
weighs the context sentences against the sentence itself.

Leakage-free by construction: a document joins pairs of one split only, so a pair of a
test document is in no training document (the split itself is leakage-free:
`seq2seq.data.hashsplit`, or the given files of text_pair).

The boundaries are kept in the text, as the separator SEP_PIECE ("<sep>"), which the
subword models of a documents preparation keep as one piece (a sentencepiece user-defined
symbol, `seq2seq.data.tokenizer.spm_settings`): `separator_id(tokenizer)` finds it in the
ids (for a model that attends per sentence), `split_document` gives the sentences back
(for scoring per sentence or per length bucket). On a side whose subword model adds a
dummy "▁" prefix (a spaced language) the separator is followed by one space, so that each
sentence is cut into exactly the pieces it has alone and the separator adds one piece:
"<sep> " before "Hello." rather than " <sep> ", whose leading space would be a "▁" piece of
its own. On an unspaced side (Chinese alone) nothing follows it.

The sentence-level split files are not kept: `split_document` recovers them exactly. The
rewrite streams: consecutive documents hold one group of pairs at a time; random ones also
a byte offset per line of each file (16 bytes a pair) and the shuffled order (8 bytes a
pair), to read the pairs back in that order.
"""

from __future__ import annotations

import contextlib
import itertools
from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from seq2seq.data.corpus import CorpusError
from seq2seq.data.languages import is_unspaced_cjk
from seq2seq.data.settings import (
    DataConfig,
    DocumentBoundaries,
    DocumentOrder,
    DocumentsOptions,
)
from seq2seq.data.split import SPLIT_NAMES
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.files import replace, temporary_beside
from seq2seq.special_tokens import SEP_PIECE

DOCUMENT_STREAM = 0xD0C5  # numpy seed prefix of the documents' draws, apart from other draws
# <split>-documents.txt: a corpus source's document of each pair (never a <split>.<lang>)
DOCUMENT_NUMBERS = "-documents.txt"

Numbered = tuple[int, str, str]  # (line number from 1, source sentence, target sentence)


# ---------------------------------------------------------------- the separator


def separator(text_langs: Sequence[str]) -> str:
    """The text between two sentences of a side whose subword model is trained on text in
    `text_langs`: SEP_PIECE, then a space when that model adds a dummy prefix (any spaced
    language, the rule of `spm_settings`), so the next sentence keeps its own pieces."""
    spaced = not all(is_unspaced_cjk(lang) for lang in text_langs)
    return SEP_PIECE + (" " if spaced else "")


def join_sentences(sentences: Sequence[str], text_langs: Sequence[str]) -> str:
    """One document of `sentences` (`separator(text_langs)` between them)."""
    return separator(text_langs).join(sentences)


def split_document(text: str) -> list[str]:
    """The sentences of a document (or of a translation of one), in order, each stripped:
    `split_document(join_sentences(s, langs)) == s` for stripped sentences without SEP_PIECE."""
    return [sentence.strip() for sentence in text.split(SEP_PIECE)]


def lines_in_context(lines: Sequence[str], context: int, text_langs: Sequence[str]) -> list[str]:
    """Each line preceded by the (at most) `context` lines before it in its document, joined
    as `context: c` joins a training source (`join_sentences`); a blank line ends a
    document and stays blank. The input of a model trained with document context."""
    joined: list[str] = []
    document: list[str] = []
    for line in lines:
        if not line.strip():
            joined.append(line)
            document = []
            continue
        document = [*document[-context:], line] if context else [line]
        joined.append(join_sentences(document, text_langs))
    return joined


def separator_id(tokenizer: Tokenizer) -> int | None:
    """The id of SEP_PIECE in `tokenizer`'s vocabulary (a model finds the sentence boundaries
    of a document's ids with it), or None when it has none (not prepared with data.documents)."""
    for index in range(tokenizer.vocab_size):
        if tokenizer.id_to_piece(index) == SEP_PIECE:
            return index
    return None


def side_langs(cfg: Any) -> tuple[list[str], list[str]]:
    """The languages each side's subword model is trained on: its own, or both when joint
    (`cfg`: a DataConfig, or the `data` node of a run's config)."""
    if cfg.joint_vocab:
        return [cfg.src_lang, cfg.tgt_lang], [cfg.src_lang, cfg.tgt_lang]
    return [cfg.src_lang], [cfg.tgt_lang]


# ---------------------------------------------------------------- the rewrite


def build_documents(cfg: DataConfig, folder: Path) -> dict[str, Any]:
    """Rewrite the six split files of `folder` into documents (module docstring); the
    counts for the summary: documents per split, their mean and largest sentence count."""
    options = cfg.documents_options
    if options is None:
        raise ValueError("data.documents is null: there are no documents to build")
    separators = tuple(separator(langs) for langs in side_langs(cfg))
    sizes = {}
    for number, split in enumerate(SPLIT_NAMES):
        paths = (folder / f"{split}.{cfg.src_lang}", folder / f"{split}.{cfg.tgt_lang}")
        rng = np.random.default_rng([DOCUMENT_STREAM, cfg.seed, number])
        numbers = document_numbers_path(folder, split)
        pairs = _documents_of(paths, options, rng, numbers)
        sizes[split] = write_documents(paths, pairs, options.context, separators)
        numbers.unlink(missing_ok=True)  # read once: the documents are in the split files now
    return document_summary(options, sizes)


def document_numbers_path(folder: Path, split: str) -> Path:
    """`<split>-documents.txt`: the corpus document of each pair of a split file, one
    number a line (written by a source that `marks_documents`, read and removed by
    `build_documents`)."""
    return folder / f"{split}{DOCUMENT_NUMBERS}"


def _documents_of(
    paths: tuple[Path, Path],
    options: DocumentsOptions,
    rng: np.random.Generator,
    numbers: Path,
) -> Iterator[tuple[Numbered, int]]:
    """Each pair of a split with the number of its document (module docstring): a corpus
    document (`boundaries: corpus`), cut into groups of drawn k unless read as context, or
    a group of drawn k of the pairs in their order."""
    if options.boundaries is DocumentBoundaries.corpus:
        numbered = _with_corpus_documents(paths, numbers)
        return numbered if options.context is not None else _cut(numbered, options, rng)
    pairs = _split_pairs(paths, options.order, rng)
    return _cut(((pair, 0) for pair in pairs), options, rng)


def write_documents(
    paths: tuple[Path, Path],
    pairs: Iterator[tuple[Numbered, int]],
    context: int | None,
    separators: tuple[str, str],
) -> Counter[int]:
    """Replace the pair of split files `paths` (source, target) by the documents of
    `pairs` (each with its document's number): one line a document (`context` None), or
    one line a pair with at most `context` sentences of its document before its source;
    the number of documents of each sentence count."""
    sizes: Counter[int] = Counter()
    with contextlib.ExitStack() as stack:
        temporaries = [stack.enter_context(temporary_beside(path)) for path in paths]
        outputs = [stack.enter_context(open(path, "wb")) for path in temporaries]
        for document in _runs(pairs):
            sizes[len(document)] += 1
            lines = _joined(document, separators, paths) if context is None else (
                _in_context(document, context, separators[0], paths)
            )  # fmt: skip
            for line in lines:
                for text, output in zip(line, outputs, strict=True):
                    output.write(text.encode("utf-8") + b"\n")
        for output in outputs:
            output.close()
        for temporary, path in zip(temporaries, paths, strict=True):
            replace(temporary, path)
    return sizes


def _joined(
    document: list[Numbered], separators: tuple[str, str], paths: tuple[Path, Path]
) -> Iterator[tuple[str, str]]:
    """The one pair of a whole document: each side's sentences joined by its separator."""
    yield tuple(  # type: ignore[misc]
        separators[side].join(_checked(pair, side, paths) for pair in document) for side in (0, 1)
    )


def _in_context(
    document: list[Numbered], context: int, src_separator: str, paths: tuple[Path, Path]
) -> Iterator[tuple[str, str]]:
    """One pair a sentence of `document`: its source after the (at most) `context` source
    sentences before it, its own target. The first sentence of a document has none."""
    sources = [_checked(pair, 0, paths) for pair in document]
    for index, pair in enumerate(document):
        window = sources[max(0, index - context) : index + 1]
        yield src_separator.join(window), _checked(pair, 1, paths)


def _runs(pairs: Iterator[tuple[Numbered, int]]) -> Iterator[list[Numbered]]:
    """The documents of `pairs`: each run of pairs with the same document number."""
    document: list[Numbered] = []
    current = None
    for pair, number in pairs:
        if document and number != current:
            yield document
            document = []
        document.append(pair)
        current = number
    if document:
        yield document


def _cut(
    numbered: Iterator[tuple[Numbered, int]],
    options: DocumentsOptions,
    rng: np.random.Generator,
) -> Iterator[tuple[Numbered, int]]:
    """The pairs renumbered into groups of k, k ~ U{min_sentences, ..., max_sentences}
    drawn per group (at its first pair); a group ends at k pairs or where the document of
    `numbered` ends, so the last group of a document takes what is left."""
    group, size, limit, document = -1, 0, 0, None
    for pair, number in numbered:
        if size == limit or number != document:
            group, size, limit, document = group + 1, 0, _draw_size(options, rng), number
        size += 1
        yield pair, group


def _draw_size(options: DocumentsOptions, rng: np.random.Generator) -> int:
    return int(rng.integers(options.min_sentences, options.max_sentences, endpoint=True))


def _checked(pair: Numbered, side: int, paths: tuple[Path, Path]) -> str:
    """The sentence of `side`, unless it holds the separator (it would split in two)."""
    number, *sentences = pair
    sentence = sentences[side]
    if SEP_PIECE in sentence:
        raise CorpusError(
            f"{paths[side]}: line {number} holds {SEP_PIECE!r}, the separator data.documents "
            "puts between sentences; remove it from the corpus or set data.documents=null"
        )
    return sentence


# ---------------------------------------------------------------- reading the pairs


def _with_corpus_documents(
    paths: tuple[Path, Path], numbers: Path
) -> Iterator[tuple[Numbered, int]]:
    """The pairs of a split in file order, each with its corpus document's number."""
    documents = _corpus_documents(numbers, paths)
    for pair, number in itertools.zip_longest(_pairs_in_order(paths), documents):
        if pair is None or number is None:
            raise CorpusError(
                f"{numbers} does not hold one number a line of {paths[0]}: prepare the data "
                "again (data.rebuild)"
            )
        yield pair, number


def _corpus_documents(numbers: Path, paths: tuple[Path, Path]) -> Iterator[int]:
    """The document number of each pair of a split, read from its `<split>.docs`."""
    if not numbers.is_file():
        raise CorpusError(
            f"{numbers} is missing: data.documents.boundaries=corpus reads the documents the "
            f"corpus source marked beside {paths[0].name} (prepare the data again)"
        )
    with open(numbers, "rb") as lines:
        for line_number, line in enumerate(lines, start=1):
            try:
                yield int(line)
            except ValueError:
                raise CorpusError(
                    f"{numbers}: line {line_number} is not a document number"
                ) from None


def _split_pairs(
    paths: tuple[Path, Path], order: DocumentOrder, rng: np.random.Generator
) -> Iterator[Numbered]:
    """The pairs of a split in file order, or shuffled by `rng` (its first draw, made here)."""
    if order is DocumentOrder.consecutive:
        return _pairs_in_order(paths)
    return _pairs_shuffled(paths, rng)


def _pairs_in_order(paths: tuple[Path, Path]) -> Iterator[Numbered]:
    with open(paths[0], "rb") as sources, open(paths[1], "rb") as targets:
        for number, (src, tgt) in enumerate(zip(sources, targets, strict=True), start=1):
            yield number, _text(src), _text(tgt)


def _pairs_shuffled(paths: tuple[Path, Path], rng: np.random.Generator) -> Iterator[Numbered]:
    """The pairs in the order of a permutation drawn from `rng` now (before any size), each
    read at its offsets."""
    src_offsets, tgt_offsets = (_line_offsets(path) for path in paths)
    if len(src_offsets) != len(tgt_offsets):
        raise CorpusError(
            f"{paths[0]} has {len(src_offsets)} lines and {paths[1]} {len(tgt_offsets)}: "
            "the split files must hold one sentence a line, line for line"
        )
    order = rng.permutation(len(src_offsets))  # (pairs,) int64
    return _pairs_at(paths, (src_offsets, tgt_offsets), order)


def _pairs_at(
    paths: tuple[Path, Path], offsets: tuple[array, array], order: np.ndarray
) -> Iterator[Numbered]:
    """The pairs of the lines `order` gives, read at their byte `offsets` in each file."""
    with open(paths[0], "rb") as sources, open(paths[1], "rb") as targets:
        for row in order.tolist():
            src = _line_at(sources, offsets[0][row])
            yield row + 1, src, _line_at(targets, offsets[1][row])


def _line_offsets(path: Path) -> array:
    """The byte offset of each line of `path` (array of int64)."""
    offsets = array("q")
    position = 0
    with open(path, "rb") as stream:
        for line in stream:
            offsets.append(position)
            position += len(line)
    return offsets


def _line_at(stream: BinaryIO, offset: int) -> str:
    stream.seek(offset)
    return _text(stream.readline())


def _text(line: bytes) -> str:
    return line.rstrip(b"\n").decode("utf-8")


# ---------------------------------------------------------------- the summary


def document_summary(options: DocumentsOptions, sizes: dict[str, Counter[int]]) -> dict[str, Any]:
    """Documents per split, their mean sentence count per split, the largest overall."""
    summary: dict[str, Any] = {"document_order": options.order.name}
    if options.boundaries is not DocumentBoundaries.drawn:
        summary["document_boundaries"] = options.boundaries.name
    if options.context is not None:  # one pair a sentence, the documents its contexts
        summary["document_context"] = options.context
    for split, counts in sizes.items():
        documents = sum(counts.values())
        sentences = sum(size * count for size, count in counts.items())
        summary[f"{split}_documents"] = documents
        summary[f"{split}_sentences_per_document"] = round(sentences / max(documents, 1), 2)
    summary["max_sentences_per_document"] = max(
        (size for counts in sizes.values() for size in counts), default=0
    )
    return summary
