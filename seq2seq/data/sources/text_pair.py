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
"""

from __future__ import annotations

import hashlib
import itertools
import logging
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seq2seq import registry
from seq2seq.data.corpus import (
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
from seq2seq.data.fetch import sha256_of
from seq2seq.data.settings import (
    DEFAULT_MAX_LINE_BYTES,
    DataConfig,
    check_positive,
    check_reading_limits,
)
from seq2seq.data.sources.base import CorpusSource, LocatedCorpus, sentence_converters
from seq2seq.data.split import SPLIT_NAMES, write_split_stream

log = logging.getLogger(__name__)

PREFIX_KEYS = {split: f"{split}_prefix" for split in SPLIT_NAMES}  # train -> train_prefix
_END = object()  # a file that has no more lines


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

    def locate(self, cfg: DataConfig) -> LocatedCorpus:
        """The six files, in split and side order, and a sha256 of their contents."""
        paths = []
        for split, key in PREFIX_KEYS.items():
            for path in split_files(cfg, split):
                if not path.is_file():
                    prefix = getattr(cfg.source_options, key)
                    raise CorpusError(f"data.source.{key}={prefix!r}: {path} does not exist")
                paths.append(path)
        digest = hashlib.sha256()
        for index, path in enumerate(paths):
            split, side = SPLIT_NAMES[index // 2], ("src", "tgt")[index % 2]
            digest.update(f"{split}.{side} {sha256_of(path)}\n".encode())
        return LocatedCorpus(digest.hexdigest(), tuple(paths))

    def write_splits(self, cfg: DataConfig, corpus: LocatedCorpus, folder: Path) -> dict[str, Any]:
        """Stream each split's cleaned pairs into `<split>.<lang>` of the folder."""
        stats = {split: CorpusStats(source=_pair_name(cfg, split)) for split in SPLIT_NAMES}
        pairs, labels = itertools.tee(_labelled_pairs(cfg, stats))  # in step: one buffered
        counts = write_split_stream(
            (pair for pair, _ in pairs), (split for _, split in labels),
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


def _pair_name(cfg: DataConfig, split: str) -> str:
    src, tgt = split_files(cfg, split)
    return f"{src} + {tgt}"


def _labelled_pairs(cfg: DataConfig, stats: dict[str, CorpusStats]) -> Iterator[tuple[Pair, str]]:
    """(pair, split name) of the train, valid and test files in turn."""
    for split in SPLIT_NAMES:
        for pair in _split_pairs(cfg, split, stats[split]):
            yield pair, split


def _split_pairs(cfg: DataConfig, split: str, stats: CorpusStats) -> Iterator[Pair]:
    """The clean pairs of one split, `stats` filled as the lines go by; the training
    split cut to data.max_pairs (its files still read to the end, for the checks)."""
    pairs = _clean_pairs(cfg, split, stats)
    if split != "train" or cfg.max_pairs is None:
        yield from pairs
        return
    yield from itertools.islice(pairs, cfg.max_pairs)
    for _ in pairs:
        pass


def _clean_pairs(cfg: DataConfig, split: str, stats: CorpusStats) -> Iterator[Pair]:
    options: TextPairOptions = cfg.source_options
    rows = ([_sentence(line) for line in raw] for raw in _parallel_lines(cfg, split))
    yield from kept_pairs(
        rows, stats, sentence_converters(cfg), options.max_line_bytes, options.max_malformed_share
    )


def _parallel_lines(cfg: DataConfig, split: str) -> Iterator[tuple[bytes | None, bytes | None]]:
    """Line n of both files of a split, together (None: a line over data.max_line_bytes);
    CorpusError when one file ends before the other."""
    paths = split_files(cfg, split)
    max_line_bytes = cfg.source_options.max_line_bytes
    with ExitStack() as stack:
        streams = [stack.enter_context(open(path, "rb")) for path in paths]
        lines = [
            lines_of(stream, max_line_bytes, str(path)) for stream, path in zip(streams, paths)
        ]
        for number, raw in enumerate(itertools.zip_longest(*lines, fillvalue=_END), start=1):
            if _END in raw:
                short, other = (paths[0], paths[1]) if raw[0] is _END else (paths[1], paths[0])
                raise CorpusError(
                    f"{short} ends after {number - 1} lines but {other} goes on: line "
                    f"{number} of {other} has no partner (data.source.{PREFIX_KEYS[split]}: the "
                    "two files hold one sentence a line, line for line)"
                )
            yield raw


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
