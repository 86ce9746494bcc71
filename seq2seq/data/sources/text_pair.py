"""`data.source.name=text_pair`: given train, valid and test files, one sentence a line.

Each split is two plain UTF-8 text files, `<prefix>.<src_lang>` and `<prefix>.<tgt_lang>`
(the layout of most published corpora and of fairseq-preprocess's `--trainpref`,
`--validpref`, `--testpref`): line n of one is the translation of line n of the other.
The prefixes are the source's options `train_prefix`, `valid_prefix` and `test_prefix`
(`TextPairOptions`):

    seq2seq-train data=text_pair data.source.train_prefix=corpus/train \\
        data.source.valid_prefix=corpus/dev data.source.test_prefix=corpus/test \\
        data.src_lang=de ...

The splits are the files': there is no hash split, and `data.valid_size`, `data.test_size`
and `data.seed` (of the split) are not read. The two files of a split must have as many
lines as each other: otherwise preparation stops with a CorpusError naming the shorter
file and the line that has no partner.

Lines are cleaned as the tab-separated source cleans its columns (`seq2seq.data.corpus`):
decoded on their own, normalised (NFKC, whitespace collapsed), a line holding a control
character, one that is not UTF-8 or longer than `max_line_bytes`, or a pair with an
empty side is skipped, counted with its line numbers, and more than
`max_malformed_share` of a split skipped stops as the wrong file. With
`data.max_pairs` only the first clean training pairs are kept; valid and test are whole.
The files are streamed: one line of each is held at a time.

The prepared files are keyed by a sha256 of the six files' contents (not by their paths):
editing a file prepares the data again, moving the folder does not.

Documents (`document_marks`, `DocumentMarks`): a corpus of documents says where each begins,
for `data.documents.boundaries=corpus` (`seq2seq.data.documents`):

- `blank_lines`: a line empty in both files ends a document (several in a row end one);
  it is no pair and not malformed. A line empty in one file only is still a malformed pair.
- `docids`: a third file per split, `<prefix>.docids`, holds the id of each line's document
  (any text), line for line with the two others; a document is a run of lines with one id,
  so an id met again after another is refused, naming the file and both lines. Its lines
  are keyed with the others.

Without `data.documents` (or with drawn boundaries) the marks are read and checked the same
way and the pairs are the sentences (blank lines passed over).
"""

from __future__ import annotations

import hashlib
import itertools
import logging
from collections.abc import Iterator
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, BinaryIO

from seq2seq import registry
from seq2seq.data.corpus import (
    BOUNDARY_ROW,
    CONTROL_CHARACTERS,
    CONTROL_SIDE,
    LONG_SIDE,
    CorpusError,
    CorpusStats,
    Pair,
    kept_pairs,
    lines_of,
    normalise,
)
from seq2seq.data.documents import document_numbers_path
from seq2seq.data.fetch import sha256_of
from seq2seq.data.settings import (
    DEFAULT_MAX_LINE_BYTES,
    DataConfig,
    check_positive,
    check_reading_limits,
)
from seq2seq.data.sources.base import CorpusSource, LocatedCorpus, sentence_converters
from seq2seq.data.split import SPLIT_NAMES, write_split_stream
from seq2seq.files import replace, temporary_beside

log = logging.getLogger(__name__)

PREFIX_KEYS = {split: f"{split}_prefix" for split in SPLIT_NAMES}  # train -> train_prefix
_END = object()  # a file that has no more lines
DOCIDS_SUFFIX = "docids"  # <prefix>.docids: the document id of each line
Numbered = tuple[Pair, int]  # a pair and the number of its document (from 0)


class DocumentMarks(Enum):
    """How the files of a `text_pair` corpus mark where a document begins."""

    blank_lines = "blank_lines"  # a line empty in both files between two documents
    docids = "docids"  # <prefix>.docids: each line's document id, a document a run of one id


@dataclass(frozen=True)
class TextPairOptions:
    """Each split's two files, `<prefix>.<src_lang>` and `<prefix>.<tgt_lang>`, line n of
    one the translation of line n of the other (the files' splits, not hashed)."""

    train_prefix: str | None = None
    valid_prefix: str | None = None
    test_prefix: str | None = None
    licence: str = ""  # the corpus's licence, for the record
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES  # a longer line is malformed, never held whole
    max_malformed_share: float = 0.5  # more skipped lines than this in a split: wrong files
    document_marks: DocumentMarks | None = None  # null: no documents (module docstring)


@registry.register("source", "text_pair", options=TextPairOptions)
class TextPairSource(CorpusSource):
    """Given train / valid / test file pairs (module docstring)."""

    def validate(self, cfg: DataConfig) -> None:
        options: TextPairOptions = cfg.source_options
        for key in PREFIX_KEYS.values():
            prefix = getattr(options, key)
            if prefix is None or not prefix.strip():
                raise ValueError(
                    f"data.source.name=text_pair needs data.source.{key}: the path of that "
                    f"split's files without their language suffix (<prefix>.{cfg.src_lang}, "
                    f"<prefix>.{cfg.tgt_lang}), got {prefix!r}"
                )
        check_reading_limits(options)
        if cfg.max_pairs is not None:
            check_positive("max_pairs", cfg.max_pairs)
        super().validate(cfg)

    def marks_documents(self, cfg: DataConfig) -> bool:
        return cfg.source_options.document_marks is not None

    def locate(self, cfg: DataConfig) -> LocatedCorpus:
        """The six files, in split and side order (then the three id files, with
        `document_marks: docids`), and a sha256 of their contents."""
        paths = []
        for split, key in PREFIX_KEYS.items():
            for path in split_files(cfg, split):
                _check_exists(cfg, key, path)
                paths.append(path)
        digest = hashlib.sha256()
        for index, path in enumerate(paths):
            split, side = SPLIT_NAMES[index // 2], ("src", "tgt")[index % 2]
            digest.update(f"{split}.{side} {sha256_of(path)}\n".encode())
        if _marks(cfg) is DocumentMarks.docids:
            for split, key in PREFIX_KEYS.items():
                path = docids_file(cfg, split)
                _check_exists(cfg, key, path)
                digest.update(f"{split}.{DOCIDS_SUFFIX} {sha256_of(path)}\n".encode())
                paths.append(path)
        return LocatedCorpus(digest.hexdigest(), tuple(paths))

    def write_splits(self, cfg: DataConfig, corpus: LocatedCorpus, folder: Path) -> dict[str, Any]:
        """Stream each split's cleaned pairs into `<split>.<lang>` of the folder."""
        stats = {split: CorpusStats(source=_pair_name(cfg, split)) for split in SPLIT_NAMES}
        labelled = _labelled_pairs(cfg, stats)
        with ExitStack() as stack:
            if _writes_document_numbers(cfg):
                labelled = _numbers_written(labelled, folder, stack)
            pairs, labels = itertools.tee(labelled)  # in step: one buffered
            counts = write_split_stream(
                (pair for pair, _, _ in pairs), (split for _, split, _ in labels),
                folder, (cfg.src_lang, cfg.tgt_lang),
            )  # fmt: skip
        log.info(
            "read %s", ", ".join(f"{split} {count:,} pairs" for split, count in counts.items())
        )
        return {
            "lines_read": sum(s.lines_read for s in stats.values()),
            "malformed_skipped": sum(s.malformed for s in stats.values()),
            "control_char_skipped": sum(s.control_chars for s in stats.values()),
            "converted_to_simplified": sum(s.converted_to_simplified for s in stats.values()),
        }


def split_files(cfg: DataConfig, split: str) -> tuple[Path, Path]:
    """(`<prefix>.<src_lang>`, `<prefix>.<tgt_lang>`) of one split."""
    prefix = str(getattr(cfg.source_options, PREFIX_KEYS[split]))
    return Path(f"{prefix}.{cfg.src_lang}"), Path(f"{prefix}.{cfg.tgt_lang}")


def docids_file(cfg: DataConfig, split: str) -> Path:
    """`<prefix>.docids` of one split: the document id of each of its lines."""
    return Path(f"{getattr(cfg.source_options, PREFIX_KEYS[split])}.{DOCIDS_SUFFIX}")


def _check_exists(cfg: DataConfig, key: str, path: Path) -> None:
    if not path.is_file():
        prefix = getattr(cfg.source_options, key)
        raise CorpusError(f"data.source.{key}={prefix!r}: {path} does not exist")


def _marks(cfg: DataConfig) -> DocumentMarks | None:
    marks = cfg.source_options.document_marks
    return None if marks is None else DocumentMarks[str(marks)]


def _writes_document_numbers(cfg: DataConfig) -> bool:
    """Whether data.documents reads this corpus's documents (`boundaries: corpus`)."""
    options = cfg.documents_options
    return options is not None and options.boundaries.name == "corpus"


def _numbers_written(
    labelled: Iterator[tuple[Pair, str, int]], folder: Path, stack: ExitStack
) -> Iterator[tuple[Pair, str, int]]:
    """`labelled` as it goes by, each pair's document number written into its split's
    `<split>-documents.txt` (`seq2seq.data.documents.document_numbers_path`)."""
    paths = {split: document_numbers_path(folder, split) for split in SPLIT_NAMES}
    temporaries = {
        split: stack.enter_context(temporary_beside(path)) for split, path in paths.items()
    }
    streams = {split: stack.enter_context(open(path, "wb")) for split, path in temporaries.items()}
    for pair, split, number in labelled:
        streams[split].write(b"%d\n" % number)
        yield pair, split, number
    for split, stream in streams.items():
        stream.close()
        replace(temporaries[split], paths[split])


def _pair_name(cfg: DataConfig, split: str) -> str:
    src, tgt = split_files(cfg, split)
    return f"{src} + {tgt}"


def _labelled_pairs(
    cfg: DataConfig, stats: dict[str, CorpusStats]
) -> Iterator[tuple[Pair, str, int]]:
    """(pair, split name, its document's number) of the train, valid and test files in turn."""
    for split in SPLIT_NAMES:
        for pair, number in _split_pairs(cfg, split, stats[split]):
            yield pair, split, number


def _split_pairs(cfg: DataConfig, split: str, stats: CorpusStats) -> Iterator[Numbered]:
    """The clean pairs of one split with their documents' numbers, `stats` filled as the
    lines go by; the training split cut to data.max_pairs (its files still read to the
    end, for the checks)."""
    pairs = _clean_pairs(cfg, split, stats)
    if split != "train" or cfg.max_pairs is None:
        yield from pairs
        return
    yield from itertools.islice(pairs, cfg.max_pairs)
    for _ in pairs:
        pass


def _clean_pairs(cfg: DataConfig, split: str, stats: CorpusStats) -> Iterator[Numbered]:
    """The clean pairs of one split, each with the number of its document (0 for every
    pair of a corpus without marks). `kept_pairs` yields a pair as soon as it reads its
    row, so the document of the row read last is the pair's."""
    options: TextPairOptions = cfg.source_options
    documents = _DocumentCount(_marks(cfg), docids_file(cfg, split))
    rows = (
        documents.row(number, raw) for number, raw in _parallel_lines(cfg, split, documents.ids())
    )
    pairs = kept_pairs(
        rows, stats, sentence_converters(cfg), options.max_line_bytes, options.max_malformed_share
    )
    for pair in pairs:
        yield pair, documents.number


class _DocumentCount:
    """The document of the line read last, as the rows of a split go by (module docstring)."""

    def __init__(self, marks: DocumentMarks | None, docids: Path) -> None:
        self.marks, self.docids = marks, docids
        self.number = 0  # the document of the line read last, from 0
        self._at_boundary = True  # blank lines: nothing since the last document began
        self._seen: dict[str, int] = {}  # docids: each id met, and its first line
        self._last: str | None = None

    def ids(self) -> Path | None:
        """The id file read beside the split's two, or None."""
        return self.docids if self.marks is DocumentMarks.docids else None

    def row(self, number: int, raw: tuple[bytes | None, ...]) -> Any:
        """The sides of line `number` (`raw`: its bytes in the two files, then with docids
        in the id file), the document count moved on where a document begins;
        BOUNDARY_ROW for a blank line between two documents."""
        pair = raw[:2]
        if self.marks is DocumentMarks.blank_lines:
            if all(line is not None and not line.strip() for line in pair):
                self.number += 0 if self._at_boundary else 1
                self._at_boundary = True
                return BOUNDARY_ROW
            self._at_boundary = False
        elif self.marks is DocumentMarks.docids:
            self._count_id(number, raw[2])
        return [_sentence(line) for line in pair]

    def _count_id(self, number: int, line: bytes | None) -> None:
        """Line `number`'s id: the same document as the line before, or a new one."""
        text = _document_id(line, self.docids, number)
        if text == self._last:
            return
        if text in self._seen:
            raise CorpusError(
                f"{self.docids}: line {number} is in document {text!r} again, after other "
                f"documents since its line {self._seen[text]}: a document's lines must be "
                "consecutive"
            )
        self.number += 0 if self._last is None else 1
        self._seen[text] = number
        self._last = text


def _document_id(line: bytes | None, path: Path, number: int) -> str:
    """The id of one line of a docids file; CorpusError naming the line if it has none."""
    text = None
    if line is not None:
        with suppress(UnicodeDecodeError):
            text = line.decode("utf-8").strip()
    if not text:
        raise CorpusError(
            f"{path}: line {number} holds no document id (UTF-8 text, one a line, line for "
            "line with the split's two files)"
        )
    return text


def _parallel_lines(
    cfg: DataConfig, split: str, docids: Path | None = None
) -> Iterator[tuple[int, tuple[bytes | None, ...]]]:
    """(n, line n of the split's files together), with the id file `docids` third when
    given (None: a line over data.max_line_bytes); CorpusError when one file ends before
    the others."""
    paths = (*split_files(cfg, split), *([docids] if docids is not None else []))
    max_line_bytes = cfg.source_options.max_line_bytes
    with ExitStack() as stack:
        streams: list[BinaryIO] = [stack.enter_context(open(path, "rb")) for path in paths]
        lines = [
            lines_of(stream, max_line_bytes, str(path)) for stream, path in zip(streams, paths)
        ]
        for number, raw in enumerate(itertools.zip_longest(*lines, fillvalue=_END), start=1):
            if _END in raw:
                short = paths[raw.index(_END)]
                other = next(path for path, line in zip(paths, raw) if line is not _END)
                raise CorpusError(
                    f"{short} ends after {number - 1} lines but {other} goes on: line "
                    f"{number} of {other} has no partner (data.source.{PREFIX_KEYS[split]}: the "
                    "files hold one sentence (or document id) a line, line for line)"
                )
            yield number, raw


def _sentence(raw: bytes | None) -> str | None | object:
    """The normalised sentence of one line (a side of `kept_pairs`): LONG_SIDE for a line
    too long to read (None), None when it is not UTF-8 or empty, CONTROL_SIDE when it
    holds a control character."""
    if raw is None:
        return LONG_SIDE
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if CONTROL_CHARACTERS.search(text):
        return CONTROL_SIDE
    return normalise(text) or None
