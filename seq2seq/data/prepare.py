"""`prepare(cfg)`: from a data source to encoded train / valid / test splits.

`data.source` names the source (`seq2seq.data.sources`, the registry's "source" group), and
`prepare` hands the work to it: the toy tasks are generated in memory; a corpus source
(a tab-separated file split by hashes, or given text files) runs the shared pipeline,
`CorpusSource.prepare` (`seq2seq.data.sources.base`), with the cache of this module:

    locate the corpus (fetch it; a sha256 of its content) -> the source writes the split
    text files of cleaned pairs (the tab-separated source: read and clean as a stream, 32
    bytes of hashes kept a pair, then a leakage-free split from the hashes and a second
    stream writing the text) -> sentencepiece on a bounded sample of the training text
    (train or reuse) -> encode in chunks into memory-mapped arrays (or find the cached
    ones) -> record the files -> drop over-long training pairs and truncate over-long
    valid / test sentences

Memory does not grow with the corpus beyond a few compact arrays: see
`seq2seq.data.hashsplit`, `seq2seq.data.tokenizer` (SentenceSample) and
`seq2seq.data.encode`. The training split is returned lazily (`ParallelData.from_arrays`):
its ids stay on disk until a batch asks for them. A later call finds the record of the
files (`seq2seq.data.record`, keyed by the corpus content and the settings) and opens them
without reading the corpus again, so start-up time does not grow with it.

Those files are checked before they are used: each one's size and a hash of sampled
blocks against the record, then every id against its side's vocabulary and every offset
for order (`seq2seq.data.record`, `seq2seq.data.arrays.open_ragged`). A damaged one is
removed (its model, or its whole encoding cache) and prepared again from the corpus, with
a warning naming it; with `data.rebuild=false` a DamagedCacheError (a CorpusError: one
line on the command line) names it instead, and nothing is removed or used. Temporaries
left by a preparation killed mid-write (`*.<pid>[.<random>].part`, in `prepared/<name>/`
and `raw/`) are removed by the next one, holding the folder's lock, when their process is
gone.

Everything written goes to `<root>/prepared/<name>/`: the split text files
(`train.zh`, `train.en`, ...), the subword models `spm_<lang>_<hash>.model` and the encoded
splits `encoded_<split>_<hash>/`, both cached by a hash of their inputs, so a second call
is fast and a changed setting recomputes only what it affects. The folder is locked
(`flock`, where the platform has it) while it is written, so runs preparing the same corpus
at once (a parallel sweep) take turns and end with the same files. Toy tasks are generated
in memory and write nothing.

Training pairs with a side longer than `data.max_len` pieces are dropped. Valid and test
pairs are never dropped (the evaluation sets keep their size): their ids are cut to
`data.max_len` pieces on each side, so decoding and the teacher-forced valid loss see at
most that many positions, while their text lines, the BLEU references, stay whole. The
summary counts the cut sentences (`valid_src_truncated`, ...).

A vocabulary size larger than the training text supports stops preparation with a
`VocabularySizeError` naming the key and the largest size; with `data.vocab_cap=true` that
largest size is used instead, with a warning naming both sizes (see
`seq2seq.data.tokenizer`), and the summary's `src_vocab_size` / `tgt_vocab_size` show it.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from seq2seq.data.batching import ParallelData
from seq2seq.data.corpus import CorpusError
from seq2seq.data.encode import CACHE_FILES, encode_split, open_encoded, remove_cache
from seq2seq.data.links import CACHE_FILES as LINKS_CACHE_FILES
from seq2seq.data.record import (
    DamagedCacheError,
    PreparationRecord,
    check_files,
    check_reusable,
    load_record,
    record_path,
    recorded_files,
    text_state,
)
from seq2seq.data.settings import DataConfig, data_source
from seq2seq.data.tokenizer import SentenceSample, SubwordTokenizer, TextFiles, Tokenizer
from seq2seq.output_folders import OutputPlaceError, check_output_place, remove_recognised_folder
from seq2seq.special_tokens import SEP_ID, SEP_PIECE

log = logging.getLogger(__name__)

SPLITS = ("train", "valid", "test")
MAX_AUTO_WORKERS = 8  # data.encode_workers=null: the usable cores, at most this many
# What an interrupted write leaves: `<name>.<pid>.<random>.part` (fetch.temporary_beside,
# the split files, the record, an encoding cache folder) or `<name>.<pid>.part` (a model)
STALE_CACHE_FILES = (*CACHE_FILES, *LINKS_CACHE_FILES)  # what a temporary cache folder holds
TEMPORARY_NAME = re.compile(r".+?\.(\d+)(?:\.[0-9a-f]{8})?\.part")


@dataclass
class PreparedData:
    """The tokenizers and the three splits; `summary` (sizes, vocabularies, lengths, the
    padding of the epoch-0 batches) is computed when first read: `seq2seq-data` prints it,
    training does not read it, so its start-up does not pack millions of pairs twice."""

    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    train: ParallelData
    valid: ParallelData
    test: ParallelData
    summary_parts: SummaryParts = field(repr=False)
    folder: Path | None = None  # where the prepared files are; None for toy tasks

    def split(self, name: str) -> ParallelData:
        if name not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}; got {name!r}")
        return getattr(self, name)

    @cached_property
    def summary(self) -> dict[str, Any]:
        parts = self.summary_parts
        data_summary = _data_summary(parts.cfg, self, parts.dropped)
        return {"name": parts.cfg.name, **parts.corpus, **data_summary, **parts.truncated}


@dataclass(frozen=True)
class SummaryParts:
    """What the summary needs beyond the splits: the settings, the corpus counts, the
    training pairs dropped by data.max_len, the valid / test sentences cut to it."""

    cfg: DataConfig
    corpus: dict[str, Any]
    dropped: int
    truncated: dict[str, int]


def prepare(cfg: DataConfig | Mapping[str, Any]) -> PreparedData:
    """Prepare the data described by `cfg` (a DataConfig, or plain data turned into one) with
    the source its `data.source` names."""
    if not isinstance(cfg, DataConfig):
        cfg = DataConfig.from_mapping(cfg)
    cfg.validate()
    return data_source(cfg.source_name).prepare(cfg)


class DataPlaceError(CorpusError):
    """A data folder (`data.root` and below) that cannot be made or written."""


def check_data_folder(place: Path, *, writing: bool = False) -> None:
    """A data folder that is not one yet must be one the preparation can make and write
    (`check_output_place`): `data.root` naming a file, a place under a file or in a
    read-only folder is DataPlaceError, one line naming data.root, before the corpus is
    fetched or read. An existing folder is checked only when it is about to be `writing`
    (a read-only shared cache that is complete needs no write)."""
    if place.is_dir() and not writing:
        return
    try:
        check_output_place(place)
    except OutputPlaceError as error:
        raise DataPlaceError(f"data.root: {error}") from None


Opened = tuple[SubwordTokenizer, SubwordTokenizer, dict[str, ParallelData]]


def open_prepared(cfg: DataConfig, folder: Path, record: PreparationRecord) -> Opened:
    """The tokenizers and the encoded splits a record names (train lazily), every id
    checked against its side's vocabulary and every offset for order."""
    src_tokenizer, tgt_tokenizer = _load_tokenizers(cfg, folder, record.models)
    vocab_sizes = (src_tokenizer.vocab_size, tgt_tokenizer.vocab_size)
    encoded = {
        name: open_encoded(folder / cache, lazy=name == "train", vocab_sizes=vocab_sizes)
        for name, cache in record.encoded.items()
    }
    return src_tokenizer, tgt_tokenizer, encoded


def _open_recorded(cfg: DataConfig, folder: Path, record: PreparationRecord) -> Opened | None:
    """`open_prepared` once the recorded files match the record (`check_files`), or None when one
    is damaged: with data.rebuild (the default) a warning names it, it is removed, and the
    preparation runs again from the corpus; with data.rebuild=false DamagedCacheError
    stops, naming it (one line), and nothing is removed."""
    try:
        damaged = check_files(folder, record)
        if damaged:
            raise _damaged(cfg, folder, damaged)
        try:
            return open_prepared(cfg, folder, record)
        except (OSError, ValueError, KeyError) as error:  # ArrayFileError, SubwordModelError
            raise _damaged(cfg, folder, [(_at_fault(folder, error), str(error))]) from error
    except DamagedCacheError as error:
        if not cfg.rebuild:
            raise
        log.warning("%s; preparing it again from the corpus", error)
        names = [name for name, _ in error.damaged]
        # an error naming no file: every encoding cache (a damaged model is always named,
        # by its hash or by the error loading it)
        _remove_damaged(folder, list(record.encoded.values()) if "." in names else names)
        return None


def remove_damaged_reusable(cfg: DataConfig, folder: Path) -> None:
    """Before preparing: a model or an encoding cache that a record of the folder (for
    other settings, or before the key changed) holds another hash for would be reused by
    name; removed with a warning (with data.rebuild=false: DamagedCacheError)."""
    damaged = check_reusable(folder)
    if not damaged:
        return
    error = _damaged(cfg, folder, damaged)
    if not cfg.rebuild:
        raise error
    log.warning("%s; preparing it again from the corpus", error)
    _remove_damaged(folder, [name for name, _ in damaged])


def _damaged(cfg: DataConfig, folder: Path, damaged: list[tuple[str, str]]) -> DamagedCacheError:
    """The error naming each damaged file (and, with data.rebuild=false, what to do)."""
    files = "; ".join(
        f"{folder / name}: {' '.join(reason.removeprefix(f'{folder / name}: ').split())}"
        for name, reason in damaged
    )
    message = f"damaged prepared file{'s' if len(damaged) > 1 else ''} ({files})"
    if not cfg.rebuild:
        message += (
            "; data.rebuild=false: stopping rather than using it (data.rebuild=true, the "
            "default, prepares it again from the corpus)"
        )
    return DamagedCacheError(message, folder, damaged)


def _at_fault(folder: Path, error: Exception) -> str:
    """The file (relative to `folder`) an error of opening names, else the folder itself.
    Total, as an error path must be: the file may be the link loop that made opening fail
    (`Path.resolve` raises RuntimeError on one; `os.path.realpath` leaves it unresolved)."""
    path = getattr(error, "path", None) or getattr(error, "filename", None)
    try:
        return str(Path(os.path.realpath(path)).relative_to(os.path.realpath(folder)))
    except (TypeError, ValueError):
        return "."


def _remove_damaged(folder: Path, names: list[str]) -> None:
    """Remove what the damaged files belong to, so that preparing again does not reuse
    it: a whole encoding cache folder, or a top-level file (a model; a split text, which
    is written again anyway). A folder that cannot be written is DataPlaceError first."""
    check_data_folder(folder, writing=True)
    for name in names:
        parts = Path(name).parts
        top = folder / parts[0] if parts else folder
        if not parts or parts[0] in (".", "..") or Path(name).is_absolute():
            log.warning("not removing %s: a record names it, but it lies outside %s",
                        name, folder)  # fmt: skip
        elif top.is_dir() and not top.is_symlink():
            remove_cache(top)  # an encoding cache: only when it holds nothing else
        else:
            top.unlink(missing_ok=True)


def remove_stale_temporaries(folder: Path) -> None:
    """Remove what writes interrupted by a kill left in `folder` (its own entries only,
    `TEMPORARY_NAME`): files and encoding cache folders whose writing process is gone.

    Call it holding the folder's lock (`folder_lock`): then no other preparation is writing
    there. A temporary whose process is alive is kept all the same (where the platform has
    no lock, or that process is not a preparation but took the pid of a dead one: it goes
    at a later run); a process we may not signal counts as alive."""
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        match = TEMPORARY_NAME.fullmatch(path.name)
        if match is None or _process_alive(int(match.group(1))):
            continue
        if path.is_dir() and not path.is_symlink():
            try:  # a cache folder being written: only a cache's files, or left alone
                remove_recognised_folder(path, STALE_CACHE_FILES, what="a preparation")
            except OutputPlaceError as error:
                log.warning("left %s in place: %s", path, error)
                continue
        else:
            path.unlink(missing_ok=True)
        log.info("removed %s, left by an interrupted preparation", path)


def _process_alive(pid: int) -> bool:
    if pid <= 0:
        return True  # not a process id we could have written: leave it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def open_cached(cfg: DataConfig, folder: Path, key: str) -> tuple[PreparationRecord, Opened] | None:
    """The record of `folder` for `key` and what it names, opened and checked, or None
    when there is none or a damaged file was removed (`_open_recorded`): prepare again."""
    record = load_record(folder, key)
    opened = _open_recorded(cfg, folder, record) if record is not None else None
    if record is None or opened is None:
        return None
    log.info("using the prepared files of %s", record_path(folder, key))
    return record, opened


def encode_splits(
    cfg: DataConfig, folder: Path, corpus_summary: dict[str, Any]
) -> PreparationRecord:
    """After the source wrote the split texts into `folder`: train (or reuse) the subword
    models, encode (or reuse); the record of every file written."""
    langs = (cfg.src_lang, cfg.tgt_lang)
    tokenizers = _subword_tokenizers(cfg, folder)
    workers = _encode_workers(cfg)
    encoded = {}
    for name in SPLITS:
        paths = (folder / f"{name}.{langs[0]}", folder / f"{name}.{langs[1]}")
        encoded[name] = encode_split(paths, *tokenizers, folder, name, workers=workers).name
    texts = [f"{name}.{lang}" for name in SPLITS for lang in langs]
    models = [_model_file(model) for model in tokenizers]
    cache_files = [
        f"{cache}/{path.name}" for cache in encoded.values() for path in (folder / cache).iterdir()
    ]
    return PreparationRecord(
        corpus_summary=corpus_summary,
        texts={text: text_state(folder / text) for text in texts},
        models=models,
        encoded=encoded,
        files=recorded_files(folder, [*texts, *models, *cache_files]),
    )


def _load_tokenizers(
    cfg: DataConfig, folder: Path, models: list[str]
) -> tuple[SubwordTokenizer, SubwordTokenizer]:
    """The source and target models the record names: one object when joint."""
    if cfg.joint_vocab:
        joint = SubwordTokenizer.load(folder / models[0], f"{cfg.src_lang}-{cfg.tgt_lang}")
        return joint, joint
    src, tgt = (
        SubwordTokenizer.load(folder / name, lang)
        for name, lang in zip(models, (cfg.src_lang, cfg.tgt_lang), strict=True)
    )
    return src, tgt


def _model_file(tokenizer: SubwordTokenizer) -> str:
    if tokenizer.path is None:  # SubwordTokenizer.train always caches its model
        raise RuntimeError(f"the '{tokenizer.lang}' subword model has no cache file")
    return tokenizer.path.name


def _encode_workers(cfg: DataConfig) -> int:
    """data.encode_workers, or the usable cores (at most MAX_AUTO_WORKERS) when null."""
    if cfg.encode_workers is not None:
        return cfg.encode_workers
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cores or 1, MAX_AUTO_WORKERS))


def _subword_tokenizers(cfg: DataConfig, folder: Path) -> tuple[SubwordTokenizer, SubwordTokenizer]:
    """Train (or reuse) sentencepiece on the training split's text files: per side, or
    one joint model; on a sample of data.spm_sample_size sentences when there are more."""
    sources = TextFiles(folder / f"train.{cfg.src_lang}")
    targets = TextFiles(folder / f"train.{cfg.tgt_lang}")
    if cfg.joint_vocab:
        joint_lang = f"{cfg.src_lang}-{cfg.tgt_lang}"
        langs = [cfg.src_lang, cfg.tgt_lang]
        both = TextFiles(*sources.paths, *targets.paths)
        joint = _subword_tokenizer(
            cfg, both, joint_lang, "src_vocab_size", folder, text_langs=langs
        )
        return joint, joint
    src = _subword_tokenizer(cfg, sources, cfg.src_lang, "src_vocab_size", folder)
    tgt = _subword_tokenizer(cfg, targets, cfg.tgt_lang, "tgt_vocab_size", folder)
    return src, tgt


def _subword_tokenizer(
    cfg: DataConfig, texts: TextFiles, lang: str, size_key: str, folder: Path, **options: Any
) -> SubwordTokenizer:
    """One sentencepiece model of the size `data.<size_key>` asks for or, with
    data.vocab_cap, of the largest size the text supports when that is less (a warning)."""
    asked = getattr(cfg, size_key)
    vocab_key = f"data.{size_key}" + (" (the joint vocabulary size)" if cfg.joint_vocab else "")
    sample = None
    if cfg.spm_sample_size is not None:
        sample = SentenceSample(cfg.spm_sample_size, cfg.seed)
    user_symbols = (SEP_PIECE,) if cfg.documents is not None else ()  # one piece a boundary
    tokenizer = SubwordTokenizer.train(
        texts,
        lang=lang,
        vocab_size=asked,
        folder=folder,
        model_type=cfg.model_type,
        vocab_key=vocab_key,
        vocab_cap=cfg.vocab_cap,
        sample=sample,
        user_symbols=user_symbols,
        byte_fallback=cfg.byte_fallback,
        character_coverage=cfg.character_coverage,
        **options,
    )
    if user_symbols and tokenizer.id_to_piece(SEP_ID) != SEP_PIECE:  # models find it by id
        raise CorpusError(f"the {lang} subword model has {tokenizer.id_to_piece(SEP_ID)!r} at "
                          f"id {SEP_ID}, where models look for {SEP_PIECE}")  # fmt: skip
    return tokenizer


def warn_if_capped(cfg: DataConfig, src: Tokenizer, tgt: Tokenizer) -> None:
    """With data.vocab_cap, a warning for each model smaller than its size key asked (a
    joint model: data.src_vocab_size, once)."""
    models = [(src, "src_vocab_size")] + ([] if cfg.joint_vocab else [(tgt, "tgt_vocab_size")])
    for tokenizer, size_key in models:
        asked = getattr(cfg, size_key)
        if tokenizer.vocab_size == asked:
            continue
        vocab_key = f"data.{size_key}" + (" (the joint vocabulary size)" if cfg.joint_vocab else "")
        log.warning(
            "data.vocab_cap=true: %s=%d is more than the '%s' training text supports; "
            "using %d pieces, the largest size it does",
            vocab_key, asked, tokenizer.lang, tokenizer.vocab_size,
        )  # fmt: skip


def finish(
    cfg: DataConfig,
    encoded: dict[str, ParallelData],
    src_tokenizer: Tokenizer,
    tgt_tokenizer: Tokenizer,
    folder: Path | None,
    summary: dict[str, Any],
) -> PreparedData:
    """Drop over-long training pairs, truncate over-long valid / test ones; what the
    summary needs is kept for when it is read."""
    train, dropped = drop_long_pairs(encoded["train"], cfg.max_len)
    if dropped:
        log.info("dropped %d training pairs longer than data.max_len=%d", dropped, cfg.max_len)
    valid, valid_cut = truncate_long_pairs(encoded["valid"], cfg.max_len)
    test, test_cut = truncate_long_pairs(encoded["test"], cfg.max_len)
    truncated = {**_truncation_summary("valid", valid_cut), **_truncation_summary("test", test_cut)}
    if any(truncated.values()):
        log.warning(
            "valid/test sentences longer than data.max_len=%d pieces are cut to it for decoding "
            "and the valid loss (their references stay whole): %s",
            cfg.max_len,
            ", ".join(f"{key} {count}" for key, count in truncated.items()),
        )
    parts = SummaryParts(cfg, summary, dropped, truncated)
    return PreparedData(src_tokenizer, tgt_tokenizer, train, valid, test, parts, folder)


def drop_long_pairs(data: ParallelData, max_len: int) -> tuple[ParallelData, int]:
    """Keep the pairs whose two sides have at most `max_len` pieces; also return the drop
    count. Decided from the lengths alone, so lazy data reads no ids."""
    src_pieces = np.asarray(data.src_lengths, dtype=np.int64) - 1  # (examples,) no EOS
    tgt_pieces = np.asarray(data.tgt_lengths, dtype=np.int64) - 1  # (examples,) no BOS
    keep = np.flatnonzero((src_pieces <= max_len) & (tgt_pieces <= max_len))  # (kept,)
    if len(keep) == len(data) and data.lazy:
        return data, 0  # nothing to drop: no selection over every row
    return data.select(keep.tolist() if not data.lazy else keep), len(data) - len(keep)


def truncate_long_pairs(data: ParallelData, max_len: int) -> tuple[ParallelData, tuple[int, int]]:
    """Cut each side's ids to `max_len` pieces, keeping every pair and every text line.

    Returns the data and how many sources and targets were cut. The text lines (the
    references BLEU is computed against) are left whole.
    """
    examples = [(src[:max_len], tgt[:max_len]) for src, tgt in data.examples]
    src_cut = sum(len(src) > max_len for src, _ in data.examples)
    tgt_cut = sum(len(tgt) > max_len for _, tgt in data.examples)
    if not src_cut and not tgt_cut:
        return data, (0, 0)
    return ParallelData(examples, data.src_lines, data.tgt_lines), (src_cut, tgt_cut)


def _truncation_summary(split_name: str, counts: tuple[int, int]) -> dict[str, int]:
    src_cut, tgt_cut = counts
    return {f"{split_name}_src_truncated": src_cut, f"{split_name}_tgt_truncated": tgt_cut}


def _data_summary(cfg: DataConfig, prepared: PreparedData, dropped: int) -> dict[str, Any]:
    """Sizes, vocabularies, lengths in pieces (no EOS) and the padding of epoch-0 batches."""
    train = prepared.train
    sampler = train.sampler(cfg.max_tokens, shuffle=True, seed=cfg.seed)
    batches = sampler.batches(epoch=0)
    return {
        "direction": f"{prepared.src_tokenizer.lang} -> {prepared.tgt_tokenizer.lang}",
        "train_size": len(train),
        "valid_size": len(prepared.valid),
        "test_size": len(prepared.test),
        "dropped_by_max_len": dropped,
        "src_vocab_size": prepared.src_tokenizer.vocab_size,
        "tgt_vocab_size": prepared.tgt_tokenizer.vocab_size,
        "mean_src_len": _mean_pieces(train.src_lengths),
        "mean_tgt_len": _mean_pieces(train.tgt_lengths),
        "max_eval_src_len": _longest(prepared, "src"),
        "max_eval_tgt_len": _longest(prepared, "tgt"),
        "max_tokens": cfg.max_tokens,
        "train_batches": len(batches),
        "padding_ratio": round(sampler.padding_ratio(batches), 4),
    }


def _mean_pieces(batch_lengths: Sequence[int]) -> float:
    """Mean length in pieces, from lengths that include one EOS/BOS."""
    return round(float(np.mean(batch_lengths)) - 1.0, 2) if len(batch_lengths) else 0.0


def _longest(prepared: PreparedData, side: str) -> int:
    """Longest valid/test sentence of `side` ("src" | "tgt") in pieces."""
    lengths = [
        length - 1
        for data in (prepared.valid, prepared.test)
        for length in getattr(data, f"{side}_lengths")
    ]
    return max(lengths, default=0)
