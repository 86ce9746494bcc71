"""Encode the split text files into memory-mapped token arrays once, and cache them.

The cache of one split is a folder `encoded_<split>_<hash>/` beside the split files:

    src_ids.npy, src_offsets.npy    the source side (`seq2seq.data.arrays`)
    tgt_ids.npy, tgt_offsets.npy    the target side
    src.txt, tgt.txt                the text lines (hard links to the split files, or copies)
    meta.json                       {"format": 1, "pairs": n, "text_bytes": {...}}, last

The hash covers both subword models and the text, so any change re-encodes; an old
`encoded_<split>_<hash>.npz` cache is not read (it is simply rebuilt in the new form). The
text is read as a stream and encoded in chunks (`seq2seq.data.chunks`, in several processes
for a large split), so memory does not grow with the corpus. The folder is written under a
name of the writing process and renamed into place, so parallel runs never write into one
another's files; one that cannot be read (damaged by hand, a full disk) is encoded and
written again.

`open_encoded` gives the training split lazily (`ParallelData.from_arrays`: nothing is read
at start-up but the offsets) and valid / test as lists.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import shutil
from collections.abc import Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from seq2seq.bounded_files import read_json
from seq2seq.data.arrays import (
    ArrayExamples,
    ArrayFileError,
    RaggedIds,
    RaggedWriter,
    TextLines,
    ids_dtype,
    iter_lines,
    open_ragged,
)
from seq2seq.data.batching import ParallelData
from seq2seq.data.chunks import Chunk, encode_chunks
from seq2seq.data.corpus import CorpusError, Pair
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.files import temporary_name
from seq2seq.output_folders import OutputPlaceError, remove_recognised_folder

log = logging.getLogger(__name__)

FORMAT = 1
CHUNK_PAIRS = 16_384  # pairs encoded at a time
PARALLEL_MIN_PAIRS = 100_000  # smaller splits are encoded in this process
SIDES = ("src", "tgt")
CACHE_FILES = ("meta.json", *(f"{side}{suffix}" for side in SIDES
                              for suffix in (".txt", "_ids.npy", "_offsets.npy", "_ids.raw")))  # fmt: skip


def encode_pairs(
    pairs: Sequence[Pair], src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer
) -> ParallelData:
    """Encode both sides (no special tokens) in memory and keep the text lines."""
    sources = [src for src, _ in pairs]
    targets = [tgt for _, tgt in pairs]
    examples = zip(
        src_tokenizer.encode_many(sources), tgt_tokenizer.encode_many(targets), strict=True
    )
    return ParallelData(list(examples), sources, targets)


def encode_split(
    text_paths: tuple[Path, Path],
    src_tokenizer: Tokenizer,
    tgt_tokenizer: Tokenizer,
    folder: Path,
    split_name: str,
    *,
    workers: int = 1,
) -> Path:
    """The cache folder of the split whose source / target lines are in `text_paths`,
    encoded now unless an intact one exists (module docstring)."""
    digest = encoding_hash(text_paths, src_tokenizer, tgt_tokenizer)
    cache = folder / f"encoded_{split_name}_{digest}"
    if cache.is_dir():
        try:
            _check_cache(cache, (src_tokenizer.vocab_size, tgt_tokenizer.vocab_size))
            return cache
        except (ArrayFileError, OSError, ValueError, KeyError) as error:
            log.warning("cannot use the encoding cache %s (%s); encoding again", cache, error)
            remove_cache(cache)
    temporary = temporary_name(cache)
    temporary.mkdir(parents=True)
    try:
        _write_cache(temporary, text_paths, (src_tokenizer, tgt_tokenizer), workers)
        _move_into_place(temporary, cache)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    log.info("encoded the %s split into %s", split_name, cache)
    return cache


def remove_cache(
    cache: Path, files: Sequence[str] = CACHE_FILES, what: str = "the encoding"
) -> None:
    """Remove a cache folder (by default an encoding cache) when it holds only the `files`
    its writer writes; CorpusError (one line) for anything else there, which is left alone."""
    try:
        remove_recognised_folder(cache, files, what=what)
    except OutputPlaceError as error:
        raise CorpusError(str(error)) from None


def _write_cache(
    folder: Path,
    text_paths: tuple[Path, Path],
    tokenizers: tuple[Tokenizer, Tokenizer],
    workers: int,
) -> None:
    """The arrays, the text links and (last) meta.json of one cache folder; in this process
    when the worker processes fail."""
    try:
        pairs = _write_arrays(folder, text_paths, *tokenizers, workers)
    except BrokenProcessPool as error:
        log.warning(
            "the encoding worker processes failed (%s); encoding %s in this process "
            "(data.encode_workers=1 does so from the start)",
            error, text_paths[0].name,
        )  # fmt: skip
        for leftover in folder.iterdir():
            leftover.unlink()
        pairs = _write_arrays(folder, text_paths, *tokenizers, 1)
    text_bytes = {}
    for side, path in zip(SIDES, text_paths, strict=True):
        _link_or_copy(path, folder / f"{side}.txt")
        text_bytes[side] = (folder / f"{side}.txt").stat().st_size
    meta = {"format": FORMAT, "pairs": pairs, "text_bytes": text_bytes}
    (folder / "meta.json").write_text(json.dumps(meta))


def open_encoded(
    cache: Path, lazy: bool, vocab_sizes: tuple[int, int] | None = None
) -> ParallelData:
    """The split in `cache`: lazy over the mapped files, or read into lists. With
    `vocab_sizes` (source, target) every id is checked to be below its side's size."""
    pairs, sides = _check_cache(cache, vocab_sizes)
    examples = ArrayExamples(*sides)
    src_lines, tgt_lines = (TextLines(cache / f"{side}.txt") for side in SIDES)
    if lazy:
        return ParallelData.from_arrays(examples, src_lines, tgt_lines, pairs)
    return ParallelData(list(examples), list(src_lines), list(tgt_lines))


def encoding_hash(
    text_paths: tuple[Path, Path], src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer
) -> str:
    """Short sha256 of both models and of every `src<TAB>tgt` line, read as a stream."""
    digest = hashlib.sha256()
    for model in (src_tokenizer.to_bytes(), tgt_tokenizer.to_bytes()):
        digest.update(hashlib.sha256(model).digest())
    for src, tgt in _read_pairs(text_paths):
        digest.update(f"{src}\t{tgt}\n".encode())
    return digest.hexdigest()[:16]


def _read_pairs(text_paths: tuple[Path, Path]) -> Iterator[Pair]:
    """(src, tgt) lines of two parallel text files; a length mismatch names both files."""
    src_path, tgt_path = text_paths
    for count, (src, tgt) in enumerate(
        itertools.zip_longest(iter_lines(src_path), iter_lines(tgt_path)), start=1
    ):
        if src is None or tgt is None:
            raise ArrayFileError(
                f"{src_path} and {tgt_path} are not parallel: one ends at line {count - 1}"
            )
        yield src, tgt


def _chunks(text_paths: tuple[Path, Path]) -> Iterator[Chunk]:
    pairs = _read_pairs(text_paths)
    while batch := list(itertools.islice(pairs, CHUNK_PAIRS)):
        yield [src for src, _ in batch], [tgt for _, tgt in batch]


def _write_arrays(
    folder: Path,
    text_paths: tuple[Path, Path],
    src_tokenizer: Tokenizer,
    tgt_tokenizer: Tokenizer,
    workers: int,
) -> int:
    """Encode the text into the four `.npy` files of `folder`; returns the pair count."""
    vocab_size = max(src_tokenizer.vocab_size, tgt_tokenizer.vocab_size)
    writers = {side: RaggedWriter(folder, side, ids_dtype(vocab_size)) for side in SIDES}
    if workers > 1 and _count_lines(text_paths[0]) < PARALLEL_MIN_PAIRS:
        workers = 1  # starting the workers would cost more than they save
    chunks = encode_chunks(_chunks(text_paths), src_tokenizer, tgt_tokenizer, workers)
    for src_ids, src_lengths, tgt_ids, tgt_lengths in chunks:
        writers["src"].add(src_ids, src_lengths)
        writers["tgt"].add(tgt_ids, tgt_lengths)
    counts = {side: writer.close() for side, writer in writers.items()}
    return counts["src"]


def _count_lines(path: Path) -> int:
    with open(path, "rb") as stream:
        return sum(block.count(b"\n") for block in iter(lambda: stream.read(1 << 20), b""))


def _check_cache(
    cache: Path, vocab_sizes: tuple[int, int] | None = None
) -> tuple[int, list[RaggedIds]]:
    """The number of pairs of an intact cache folder and its two opened sides (ids and
    offsets range-checked, `open_ragged`; ids below `vocab_sizes` when given);
    ArrayFileError (or OSError) naming the file otherwise."""
    meta_path = cache / "meta.json"
    try:
        meta = read_json(meta_path)
        pairs = int(meta["pairs"])
        text_bytes = {side: int(meta["text_bytes"][side]) for side in SIDES}
    except (ValueError, KeyError, TypeError) as error:
        raise ArrayFileError(f"{meta_path}: cannot be read ({error!r})", meta_path) from error
    if meta.get("format") != FORMAT:
        raise ArrayFileError(
            f"{meta_path}: format {meta.get('format')!r}, expected {FORMAT}", meta_path
        )
    sides = []
    for index, side in enumerate(SIDES):
        ragged = open_ragged(cache, side, vocab_sizes[index] if vocab_sizes else None)
        if len(ragged) != pairs:
            offsets = cache / f"{side}_offsets.npy"
            raise ArrayFileError(
                f"{offsets}: {len(ragged)} sentences, {meta_path.name} says {pairs}", offsets
            )
        text = cache / f"{side}.txt"
        if text.stat().st_size != text_bytes[side]:  # edited in place (a hard link)
            raise ArrayFileError(
                f"{text}: {text.stat().st_size} bytes, {meta_path.name} says {text_bytes[side]}",
                text,
            )
        sides.append(ragged)
    return pairs, sides


def _link_or_copy(source: Path, target: Path) -> None:
    """A hard link (the split file may be replaced later: the link keeps this text), or a
    copy where the file system has no hard links."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _move_into_place(temporary: Path, cache: Path) -> None:
    """Rename the finished folder to its cache name; another writer's finished folder
    there (same inputs, same content) is kept and ours dropped."""
    try:
        os.rename(temporary, cache)
    except OSError:
        if not cache.is_dir():
            raise
        log.debug("%s was written by another process meanwhile; keeping it", cache)
