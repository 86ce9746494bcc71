"""`data.source.name=hf`: a Hugging Face dataset, from the hub or from a local folder or file.

`data.source.dataset` names it (`HuggingFaceOptions`):

* a hub name (`Helsinki-NLP/opus-100`, with `config` the dataset's configuration, `en-zh`,
  `revision` a branch, tag or commit and `data_dir` a folder of the repository), loaded
  with `datasets.load_dataset`; `streaming=true` reads it over the network as it goes
  instead of downloading it whole into the `datasets` cache first;
* a folder written by `Dataset.save_to_disk` or `DatasetDict.save_to_disk` (it holds
  `state.json` or `dataset_dict.json`), opened with `datasets.load_from_disk` (memory-mapped);
* a parquet file, or a folder of them, streamed with `load_dataset("parquet", ...)`: files
  named or placed by split (`train*`, `validation*` / `valid*` / `dev*`, `test*`, or in
  folders so named) are those splits, and a file named otherwise beside them is not read;
  without such names every file is the split `train`, as a single parquet file or a
  saved `Dataset` is.

A value that exists on disk, or that looks like a path (it starts with `/`, `.` or `~`, has
two `/` or more, or ends in `.parquet`), is local; any other is a hub name.

Two layouts of a row are read. The hub's translation datasets hold one column of
dictionaries keyed by language code, `{"en": "...", "zh": "..."}` (`translation_field`,
"translation" by default); the codes are `data.src_lang` and `data.tgt_lang`, or
`source_code` and `target_code` where the dataset's differ (`zh-CN`, say). Other datasets
hold two text columns: `source_column` and `target_column` choose them, and choose this
layout.

The splits: `train_split`, `valid_split` and `test_split` name the dataset's splits
(`train`, `validation`, `test` by default); they are read whole and kept as they are, as
the given files of `text_pair` are (a benchmark's test set stays the benchmark's).
`valid_split=null test_split=null` instead splits `train_split` without leakage, by
hashes, as the tab-separated source splits its file (`data.valid_size`, `data.test_size`,
`data.seed`; `seq2seq.data.hashsplit`).

Every row is cleaned as a line of `text_pair` is (`seq2seq.data.corpus`): a side that is
not text, is empty once normalised (NFKC, whitespace collapsed) or longer than
`max_line_bytes`, or a side holding a control character (a newline included), skips the
row, counted with its row number; more than `max_malformed_share` of a split skipped stops
as the wrong dataset. `data.traditional_to_simplified` converts the Chinese side. With
`data.max_pairs` reading stops at that many clean training pairs: a dataset streamed from
the hub is not read to its end for the counts (the share of skipped rows is that of the
rows read). The rows stream by in batches of `ROWS_PER_BATCH`: memory holds one batch, and
in the hash split 32 bytes a pair, as for the other sources.

The prepared files are keyed by (`LocatedCorpus.digest`, `seq2seq.data.record`): for a
local dataset a sha256 of its files' contents (every file of a saved folder, every parquet
file), so editing one prepares the data again; for a hub dataset its name, configuration,
data folder and revision and, when it is downloaded rather than streamed, the `datasets`
fingerprint of each split read (which follows the files downloaded). A streamed hub
dataset has no fingerprint: a new commit on its branch goes unseen while the prepared
files exist; pin `revision` to a commit for a fixed corpus.

`datasets` is an optional extra (`pip install 'seq2seq-attention[hf]'`), imported only
when a dataset is opened: a config naming this source validates without it.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seq2seq import registry
from seq2seq.data.corpus import (
    CONTROL_CHARACTERS,
    CONTROL_SIDE,
    LONG_SIDE,
    CorpusStats,
    Pair,
    kept_pairs,
    normalise,
)
from seq2seq.data.hashsplit import write_hash_split
from seq2seq.data.settings import (
    DataConfig,
    check_positive,
    check_reading_limits,
)
from seq2seq.data.sources.base import CorpusSource, LocatedCorpus, sentence_converters
from seq2seq.data.sources.hf_dataset import (
    HuggingFaceOptions,
    OpenedDataset,
    check_layout_keys,
    check_split_keys,
    files_digest,
    hash_split,
    hub_digest,
    language_codes,
    local_files,
    local_path,
    open_dataset,
    two_columns,
)
from seq2seq.data.split import SPLIT_NAMES, write_split_stream
from seq2seq.progress_bars import progress_bar

log = logging.getLogger(__name__)

ROWS_PER_BATCH = 1000  # rows read from the dataset at a time


@dataclass(frozen=True)
class LocatedDataset(LocatedCorpus):
    """The corpus's digest and files, with the dataset when hashing it needed it opened."""

    opened: OpenedDataset | None = field(default=None, compare=False, repr=False)


@registry.register("source", "hf", options=HuggingFaceOptions)
class HuggingFaceSource(CorpusSource):
    """A Hugging Face dataset (module docstring)."""

    def validate(self, cfg: DataConfig) -> None:
        options: HuggingFaceOptions = cfg.source_options
        if not options.dataset.strip():
            raise ValueError(
                "data.source.name=hf needs data.source.dataset: a hub name such as "
                "Helsinki-NLP/opus-100, or the path of a saved dataset or of parquet files"
            )
        check_layout_keys(options)
        check_split_keys(options)
        check_reading_limits(options)
        super().validate(cfg)
        if cfg.max_pairs is not None:
            check_positive("max_pairs", cfg.max_pairs)
        if hash_split(options):
            check_positive("valid_size", cfg.valid_size)
            check_positive("test_size", cfg.test_size)
            if cfg.max_pairs is not None and cfg.max_pairs <= cfg.valid_size + cfg.test_size:
                raise ValueError(
                    f"data.max_pairs ({cfg.max_pairs}) must exceed data.valid_size + "
                    "data.test_size (the hash split of data.source.train_split)"
                )

    def locate(self, cfg: DataConfig) -> LocatedDataset:
        """The digest of the dataset (module docstring). A local one is hashed by its
        files and a streamed one by its name, unopened, so that a run whose files are
        prepared needs neither `datasets` nor the network; a downloaded hub dataset is
        opened (and checked) for its fingerprints."""
        options: HuggingFaceOptions = cfg.source_options
        local = local_path(options)
        if local is not None:
            files = local_files(local)
            return LocatedDataset(files_digest(local, files), files)
        if options.streaming:
            return LocatedDataset(hub_digest(options, None), ())
        opened = open_dataset(cfg)
        return LocatedDataset(hub_digest(options, opened), (), opened=opened)

    def write_splits(self, cfg: DataConfig, corpus: LocatedCorpus, folder: Path) -> dict[str, Any]:
        """The cleaned pairs of the dataset's splits, or of its training split split by
        hashes, into `<split>.<lang>` of the folder."""
        opened = getattr(corpus, "opened", None) or open_dataset(cfg)
        if hash_split(cfg.source_options):
            return _write_hash_split(cfg, opened, folder)
        return _write_given_splits(cfg, opened, folder)


# ---------------------------------------------------------------- reading and cleaning


def _raw_pairs(cfg: DataConfig, data: Any) -> Iterator[tuple[Any, Any]]:
    """(source value, target value) of every row of a split, in order, a batch of rows at
    a time; a row without one of the codes gives None for it. A bar over the rows read
    shows where bars show (`seq2seq.progress_bars`; no total for a streamed dataset)."""
    options: HuggingFaceOptions = cfg.source_options
    total = getattr(data, "num_rows", None)  # a streamed (iterable) dataset has none
    desc = f"reading {options.dataset}"
    with progress_bar(total, unit="row", desc=desc, unit_scale=True, leave=False) as bar:
        for batch in _row_batches(cfg, data):
            yield from batch
            bar.update(len(batch))


def _row_batches(cfg: DataConfig, data: Any) -> Iterator[list[tuple[Any, Any]]]:
    """The rows' (source value, target value) in batches of `ROWS_PER_BATCH`, from two
    text columns or from the dictionaries of language codes."""
    options: HuggingFaceOptions = cfg.source_options
    if two_columns(options):
        columns = [options.source_column, options.target_column]
        for batch in data.select_columns(columns).iter(batch_size=ROWS_PER_BATCH):
            yield list(zip(batch[columns[0]], batch[columns[1]]))
        return
    name = options.translation_field
    src_code, tgt_code = language_codes(cfg)
    for batch in data.select_columns([name]).iter(batch_size=ROWS_PER_BATCH):
        yield [
            (item.get(src_code), item.get(tgt_code)) if isinstance(item, Mapping) else (None, None)
            for item in batch[name]
        ]


def _sentence(value: Any, max_line_bytes: int) -> str | object | None:
    """The normalised sentence of one side: None when it is not text or empty once
    normalised, LONG_SIDE when longer than max_line_bytes, CONTROL_SIDE when it holds a
    control character (as a line of text_pair would)."""
    if not isinstance(value, str):
        return None
    if len(value.encode("utf-8", "surrogatepass")) > max_line_bytes:
        return LONG_SIDE
    if CONTROL_CHARACTERS.search(value):
        return CONTROL_SIDE
    return normalise(value) or None


def _clean_pairs(cfg: DataConfig, data: Any, stats: CorpusStats) -> Iterator[Pair]:
    """The clean pairs of one split, `stats` filled as the rows go by (row numbers from 1);
    the checks of too many skipped rows once the last is read (`kept_pairs`)."""
    options: HuggingFaceOptions = cfg.source_options
    rows = (
        [_sentence(value, options.max_line_bytes) for value in raw] for raw in _raw_pairs(cfg, data)
    )
    yield from kept_pairs(
        rows, stats, sentence_converters(cfg), options.max_line_bytes, options.max_malformed_share
    )


def _limited(cfg: DataConfig, pairs: Iterator[Pair]) -> Iterator[Pair]:
    """The first data.max_pairs pairs, the rest left unread (module docstring)."""
    return pairs if cfg.max_pairs is None else itertools.islice(pairs, cfg.max_pairs)


def _write_given_splits(cfg: DataConfig, corpus: OpenedDataset, folder: Path) -> dict[str, Any]:
    """Each run split from its own split of the dataset, in order, as text_pair writes its
    files."""
    stats = {split: CorpusStats(source=corpus.names[split]) for split in SPLIT_NAMES}

    def labelled() -> Iterator[tuple[Pair, str]]:
        for split in SPLIT_NAMES:
            pairs = _clean_pairs(cfg, corpus.splits[split], stats[split])
            for pair in _limited(cfg, pairs) if split == "train" else pairs:
                yield pair, split

    pairs, labels = itertools.tee(labelled())  # in step: one pair buffered
    counts = write_split_stream(
        (pair for pair, _ in pairs), (split for _, split in labels),
        folder, (cfg.src_lang, cfg.tgt_lang),
    )  # fmt: skip
    log.info("read %s", ", ".join(f"{split} {count:,} pairs" for split, count in counts.items()))
    return _counts(stats.values())


def _write_hash_split(cfg: DataConfig, corpus: OpenedDataset, folder: Path) -> dict[str, Any]:
    """The training split's clean pairs to a temporary file while their hashes are kept,
    the leakage-free split of the hashes, then the split files from the temporary one."""
    stats = CorpusStats(source=corpus.names["train"])
    pairs = _limited(cfg, _clean_pairs(cfg, corpus.splits["train"], stats))
    split, counts = write_hash_split(
        pairs, folder, (cfg.src_lang, cfg.tgt_lang), valid_size=cfg.valid_size,
        test_size=cfg.test_size, seed=cfg.seed, source=corpus.names["train"],
    )  # fmt: skip
    log.info(
        "split %s clean pairs of %s: %s, %s duplicates",
        f"{len(split.labels):,}", corpus.names["train"],
        ", ".join(f"{name} {count:,}" for name, count in counts.items()),
        f"{split.duplicates_removed:,}",
    )  # fmt: skip
    return {
        **_counts([stats]),
        "duplicates_removed": split.duplicates_removed,
        "sentence_groups": split.num_groups,
        "near_duplicate_groups_joined": split.near_duplicates_joined,
    }


def _counts(stats: Iterable[CorpusStats]) -> dict[str, int]:
    """The corpus part of the summary, summed over the splits read."""
    stats = list(stats)
    return {
        "lines_read": sum(s.lines_read for s in stats),
        "malformed_skipped": sum(s.malformed for s in stats),
        "control_char_skipped": sum(s.control_chars for s in stats),
        "converted_to_simplified": sum(s.converted_to_simplified for s in stats),
    }
