"""`data.source.name=tabular`: a tab-separated corpus file, plain or a zip member, split by hashes.

The manythings.org / Anki exports (`configs/data/tatoeba_*.yaml`) are such files: one pair
a line, `English<TAB>other language<TAB>attribution`; the options `src_column`,
`tgt_column` and `num_columns` say which column is which (`TabularOptions`). The file is
fetched once from `url` into `<root>/raw/` (`seq2seq.data.fetch`, pinned by `sha256` when
set) and read as a stream (`seq2seq.data.corpus`): the clean pairs go to a temporary file
while 32 bytes of hashes a pair are kept, the split is computed from the hashes with no
sentence shared across train, valid and test (`seq2seq.data.hashsplit`, of
`data.valid_size`, `data.test_size` and `data.seed`), and a second stream writes the split
files. Nothing grows with the corpus but the hashes. Reading and cleaning, the longest
step, shows a bar over the lines in a terminal or a notebook (`seq2seq.progress_bars`).
"""

from __future__ import annotations

import itertools
import logging
import re
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from seq2seq import registry
from seq2seq.data.corpus import (
    CorpusStats,
    Pair,
    corpus_stats,
    iter_pairs,
)
from seq2seq.data.fetch import fetch_verified, folder_lock
from seq2seq.data.hashsplit import LABELS, SplitAssignment, write_hash_split
from seq2seq.data.prepare import check_data_folder, remove_stale_temporaries
from seq2seq.data.settings import (
    DEFAULT_MAX_LINE_BYTES,
    DEFAULT_MAX_MEMBER_BYTES,
    DataConfig,
    check_positive,
    check_reading_limits,
    file_name_from_url,
)
from seq2seq.data.sources.base import CorpusSource, LocatedCorpus, sentence_converters
from seq2seq.progress_bars import bars_wanted, progress_bar

log = logging.getLogger(__name__)

SHA256_PATTERN = re.compile(r"[0-9a-fA-F]{64}")
BAR_EVERY = 4096  # pairs between two moves of the reading bar (a move costs more than a pair)
COUNT_BLOCK = 1 << 20  # bytes read at a time to count the lines for the bar's total


@dataclass(frozen=True)
class TabularOptions:
    """Where the corpus file is, which of its columns hold the pair, how much is read."""

    url: str = "https://www.manythings.org/anki/cmn-eng.zip"
    member: str = "cmn.txt"  # file inside the zip; "" for a plain .txt/.tsv download
    src_column: int = 1  # 0-based tab-separated column of the source sentence
    tgt_column: int = 0
    num_columns: int = 3  # a line with another number of columns is malformed
    licence: str = "CC-BY 2.0 France; Tatoeba (tatoeba.org), via manythings.org/anki"
    sha256: str | None = None  # pin the corpus file: any other content is refused
    max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES  # larger zip members are not read
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES  # a longer line is malformed, never held whole
    max_malformed_share: float = 0.5  # more malformed lines than this: wrong file, stop


@registry.register("source", "tabular", options=TabularOptions)
class TabularSource(CorpusSource):
    """A tab-separated corpus file or zip member, fetched once, split by hashes."""

    def validate(self, cfg: DataConfig) -> None:
        options: TabularOptions = cfg.source_options
        file_name_from_url(options.url)
        if options.sha256 is not None and not SHA256_PATTERN.fullmatch(options.sha256):
            raise ValueError(
                f"data.source.sha256 must be null or 64 hexadecimal digits, got {options.sha256!r}"
            )
        check_positive("source.max_member_bytes", options.max_member_bytes)
        check_reading_limits(options)
        _check_columns(options)
        super().validate(cfg)
        check_positive("valid_size", cfg.valid_size)
        check_positive("test_size", cfg.test_size)
        if cfg.max_pairs is not None and cfg.max_pairs <= cfg.valid_size + cfg.test_size:
            raise ValueError(
                f"data.max_pairs ({cfg.max_pairs}) must exceed data.valid_size + data.test_size"
            )

    def locate(self, cfg: DataConfig) -> LocatedCorpus:
        """The fetched file in `<root>/raw/` and its sha256 (after removing what killed
        fetches left there)."""
        root = Path(cfg.root)
        check_data_folder(root / "raw")
        with folder_lock(root / "raw"):  # released before fetching, which takes it again
            remove_stale_temporaries(root / "raw")
        options: TabularOptions = cfg.source_options
        path, digest = fetch_verified(
            options.url, options.member or None, root=root, sha256=options.sha256
        )
        return LocatedCorpus(digest, (path,))

    def write_splits(self, cfg: DataConfig, corpus: LocatedCorpus, folder: Path) -> dict[str, Any]:
        """Read and clean the corpus as a stream, split it, write the six split text files.

        The clean pairs are written to a temporary file while their hashes are collected,
        the split is computed from the hashes, and the pairs are read back and written to
        their splits; nothing grows with the corpus but the hashes."""
        (corpus_path,) = corpus.paths
        stats = corpus_stats(corpus_path, cfg.source_options.member or None)
        pairs = _shown(_clean_pairs(cfg, corpus_path, stats), corpus_path, cfg, stats)
        split, _ = write_hash_split(
            pairs, folder, (cfg.src_lang, cfg.tgt_lang), valid_size=cfg.valid_size,
            test_size=cfg.test_size, seed=cfg.seed, source=str(corpus_path),
        )  # fmt: skip
        log.info(
            "split %s clean pairs of %s: %s",
            f"{len(split.labels):,}", corpus_path.name,
            ", ".join(f"{name} {count:,}" for name, count in _split_sizes(split).items()),
        )  # fmt: skip
        return _corpus_summary(stats, split)


def _check_columns(options: TabularOptions) -> None:
    check_positive("source.num_columns", options.num_columns)
    for key in ("src_column", "tgt_column"):
        column = getattr(options, key)
        if not 0 <= column < options.num_columns:
            raise ValueError(
                f"data.source.{key} must be in [0, data.source.num_columns="
                f"{options.num_columns}), got {column}"
            )
    if options.src_column == options.tgt_column:
        raise ValueError("data.source.src_column and data.source.tgt_column must differ")


def _split_sizes(split: SplitAssignment) -> dict[str, int]:
    """Pairs per split label (duplicates included), for the log."""
    counts = np.bincount(split.labels, minlength=max(LABELS.values()) + 1)
    sizes = {name: int(counts[label]) for name, label in LABELS.items()}
    return {**sizes, "duplicates": split.duplicates_removed}


def _clean_pairs(cfg: DataConfig, corpus_path: Path, stats: CorpusStats) -> Iterator[Pair]:
    """Every clean pair of the corpus file; with data.max_pairs the rest of the file is
    still read (its lines counted and checked), as before streaming."""
    options: TabularOptions = cfg.source_options
    pairs = iter_pairs(
        corpus_path,
        stats,
        member=options.member or None,
        src_column=options.src_column,
        tgt_column=options.tgt_column,
        num_columns=options.num_columns,
        max_malformed_share=options.max_malformed_share,
        max_member_bytes=options.max_member_bytes,
        max_line_bytes=options.max_line_bytes,
        **sentence_converters(cfg),
    )
    if cfg.max_pairs is None:
        yield from pairs
        return
    yield from itertools.islice(pairs, cfg.max_pairs)
    for _ in pairs:  # read to the end: the line counts and the malformed check
        pass


def _shown(pairs: Iterator[Pair], corpus_path: Path, cfg: DataConfig, stats: CorpusStats):
    """`pairs`, with a bar over the corpus lines read (`stats.lines_read`) where bars show;
    its total is counted first, which only a watched bar pays for."""
    options: TabularOptions = cfg.source_options
    member = options.member or None
    total = _line_count(corpus_path, member, options.max_member_bytes) if bars_wanted() else None
    desc = f"reading {corpus_path.name}" + (f"!{member}" if member else "")
    with progress_bar(total, unit="line", desc=desc, unit_scale=True, leave=False) as bar:
        for count, pair in enumerate(pairs, 1):
            yield pair
            if count % BAR_EVERY == 0:
                bar.update(stats.lines_read - bar.n)
        bar.update(stats.lines_read - bar.n)


def _line_count(path: Path, member: str | None, max_member_bytes: int) -> int | None:
    """The lines of the corpus file (or of its zip member), the reading bar's total; None
    where counting is not safe or cheap: a zip member larger than
    data.source.max_member_bytes (refused when read) or one that cannot be read (the
    reading says why, in one line)."""
    try:
        if not zipfile.is_zipfile(path):
            with open(path, "rb") as stream:
                return _lines_in(stream)
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            name = member if member is not None else (names[0] if len(names) == 1 else None)
            if name not in names or archive.getinfo(name).file_size > max_member_bytes:
                return None
            with archive.open(name) as stream:
                return _lines_in(stream)
    except (OSError, EOFError, NotImplementedError, zipfile.BadZipFile, zlib.error):
        return None


def _lines_in(stream) -> int:
    """The lines of a binary stream: its b"\\n", and one more for a last line without one."""
    lines, last = 0, b""
    for block in iter(lambda: stream.read(COUNT_BLOCK), b""):
        lines += block.count(b"\n")
        last = block
    return lines + (1 if last and not last.endswith(b"\n") else 0)


def _corpus_summary(stats: CorpusStats, split: SplitAssignment) -> dict[str, Any]:
    return {
        "lines_read": stats.lines_read,
        "malformed_skipped": stats.malformed,
        "control_char_skipped": stats.control_chars,
        "converted_to_simplified": stats.converted_to_simplified,
        "duplicates_removed": split.duplicates_removed,
        "sentence_groups": split.num_groups,
        "near_duplicate_groups_joined": split.near_duplicates_joined,
    }
