"""Piece links of the training split, for guided alignment: stored, opened, batched.

A piece link (t, s) says that target position t translates source position s, both counted
as a batch counts them: t in `tgt_out` (pieces + EOS), s in `src` (pieces + EOS). EOS
belongs to no word, so the links made from word links never name it. An example's links
are a (k, 2) int array of [t, s] rows; `PieceLinks` holds them for a whole split, ragged,
in memory or memory-mapped, and `select`s rows as `ParallelData` does.

On disk (the prepared folder of a corpus) the links of one set of inputs are a cache
folder `links_<key>/`, the key a hash of what they were made from (`seq2seq.align.training_links`):

    links_ids.npy, links_offsets.npy   the pairs flattened t0, s0, t1, s1, ... per example
                                       (`seq2seq.data.arrays`)
    meta.json                          {"format": 1, "pairs": n}, last

written under a temporary name and renamed into place, holding the folder's lock (as the
encoding caches are), so parallel runs make them once. Opening checks the offsets and that
every link lies inside its example; a cache that fails is made again, with a warning.

In a batch the links become the target of guided alignment (Garg et al. 2019):

    p*(t, s) = 1[(t, s) linked] / |{s' : (t, s') linked}|          a row without links: 0

`GuidedSplit` is a split that carries its links: its batches hold `align`, p* as
(batch, tgt_len, src_len) float32. Every other split's batches are made as before.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from seq2seq.bounded_files import read_json
from seq2seq.data.arrays import ArrayFileError, RaggedIds, RaggedWriter, open_ragged
from seq2seq.data.batching import Batch, ParallelData
from seq2seq.data.encode import remove_cache
from seq2seq.files import folder_lock, temporary_name

log = logging.getLogger(__name__)

FORMAT = 1
SIDE = "links"  # links_ids.npy, links_offsets.npy
CACHE_FILES = ("meta.json", f"{SIDE}_ids.npy", f"{SIDE}_offsets.npy", f"{SIDE}_ids.raw")
CHUNK_EXAMPLES = 16_384  # examples written at a time


class PieceLinks(Sequence[np.ndarray]):
    """Each example's piece links, (k, 2) int64 [t, s] rows, over one flat array of pairs."""

    def __init__(self, pairs: RaggedIds) -> None:
        self.pairs = pairs  # per example its links flattened: t0, s0, t1, s1, ...

    @classmethod
    def from_lists(cls, links: Iterable[Sequence[tuple[int, int]] | np.ndarray]) -> PieceLinks:
        """In-memory links from one [(t, s), ...] (or (k, 2) array) per example."""
        flat = [np.asarray(pairs, dtype=np.int32).reshape(-1) for pairs in links]
        offsets = np.zeros(len(flat) + 1, dtype=np.int64)  # (n + 1,)
        np.cumsum([len(pairs) for pairs in flat], out=offsets[1:])
        ids = np.concatenate(flat) if flat else np.zeros(0, dtype=np.int32)  # (2 · links,)
        return cls(RaggedIds(ids, offsets))

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, index: int) -> np.ndarray:  # type: ignore[override]
        return np.asarray(self.pairs[index], dtype=np.int64).reshape(-1, 2)  # (k, 2)

    def count(self) -> int:
        """The number of links of all the examples."""
        return int(self.pairs.lengths().sum()) // 2

    def select(self, keep: Sequence[int] | np.ndarray) -> PieceLinks:
        """The examples at `keep`, in that order (no pair is copied)."""
        return PieceLinks(self.pairs.select(keep))


def link_targets(links: Sequence[np.ndarray], tgt_len: int, src_len: int) -> torch.Tensor:
    """p* of a batch (module docstring): (batch, tgt_len, src_len) float32, each linked row
    summing to 1, every other row (unlinked positions, padding) all zero."""
    target = np.zeros((len(links), tgt_len, src_len), dtype=np.float32)
    rows = np.repeat(np.arange(len(links)), [len(pairs) for pairs in links])  # (links,)
    pairs = np.concatenate([np.reshape(pairs, (-1, 2)) for pairs in links])  # (links, 2)
    target[rows, pairs[:, 0], pairs[:, 1]] = 1.0
    target /= np.maximum(target.sum(axis=-1, keepdims=True), 1.0)  # rows of links sum to 1
    return torch.from_numpy(target)


def stored_rows(split: ParallelData) -> tuple[np.ndarray, int]:
    """(the row of each example in the split as stored, the number of stored rows): for a
    corpus's training split, the line of `train.<lang>` each kept example comes from
    (`data.max_len` drops pairs by selecting rows); for data in memory, its own order."""
    if split.lazy:
        stored = split.examples.src  # type: ignore[attr-defined]  # RaggedIds
        total = len(stored.offsets) - 1
        rows = stored.rows if stored.rows is not None else np.arange(total, dtype=np.int64)
        return np.asarray(rows, dtype=np.int64), total
    return np.arange(len(split), dtype=np.int64), len(split)


class GuidedSplit(ParallelData):
    """A split whose batches carry `align`, the guided-alignment target of their links."""

    links: PieceLinks

    @classmethod
    def of(cls, data: ParallelData, links: PieceLinks) -> GuidedSplit:
        """`data` (lazy or not, as it is) with one entry of `links` per example."""
        if len(links) != len(data):
            raise ValueError(f"{len(links)} examples of links for a split of {len(data)}")
        split = cls.__new__(cls)
        split.__dict__.update(vars(data))
        split.links = links
        return split

    def batch(self, indices: Sequence[int]) -> Batch:
        batch = super().batch(indices)
        sizes = batch.tgt_out.size(1), batch.src.size(1)
        return replace(batch, align=link_targets([self.links[i] for i in indices], *sizes))

    def select(self, keep: Sequence[int]) -> GuidedSplit:
        return GuidedSplit.of(super().select(keep), self.links.select(keep))


# ---------------------------------------------------------------- the cache on disk


def cached_links(
    folder: Path,
    key: str,
    make: Callable[[], Iterable[np.ndarray]],
    lengths: tuple[Sequence[int], Sequence[int]],
) -> PieceLinks:
    """The links cached as `folder/links_<key>/`, made by `make()` (one (k, 2) array per
    example, in order) when there is no intact cache. `lengths`: the examples' source and
    target lengths in a batch (with EOS), which every link must lie inside."""
    cache = folder / f"links_{key}"
    with folder_lock(folder):
        if cache.is_dir():
            try:
                return open_links(cache, *lengths)
            except (ArrayFileError, OSError, ValueError, KeyError) as error:
                log.warning("cannot use the links cache %s (%s); making them again", cache, error)
                remove_cache(cache, CACHE_FILES, "the links cache")
        _write_cache(cache, make())
        log.info("wrote the guided-alignment links %s", cache)
        return open_links(cache, *lengths)


def _write_cache(cache: Path, links: Iterable[np.ndarray]) -> None:
    """Write the folder under a temporary name of this process, then rename it into place."""
    temporary = temporary_name(cache)
    temporary.mkdir(parents=True)
    try:
        count = write_links(temporary, links)
        (temporary / "meta.json").write_text(json.dumps({"format": FORMAT, "pairs": count}))
        os.rename(temporary, cache)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def write_links(folder: Path, links: Iterable[np.ndarray]) -> int:
    """`links_ids.npy` and `links_offsets.npy` of one (k, 2) array per example, written in
    chunks; returns the number of examples."""
    writer = RaggedWriter(folder, SIDE, np.dtype(np.int32))
    chunk: list[np.ndarray] = []
    for pairs in links:
        chunk.append(np.asarray(pairs, dtype=np.int64).reshape(-1))
        if len(chunk) == CHUNK_EXAMPLES:
            _add(writer, chunk)
            chunk = []
    _add(writer, chunk)
    return writer.close()


def _add(writer: RaggedWriter, chunk: list[np.ndarray]) -> None:
    if chunk:
        writer.add(np.concatenate(chunk), np.array([len(pairs) for pairs in chunk]))


def open_links(cache: Path, src_lengths: Sequence[int], tgt_lengths: Sequence[int]) -> PieceLinks:
    """The links of a cache folder, mapped read-only, once they fit the examples: as many
    as there are examples, every [t, s] with 0 <= t < tgt_length and 0 <= s < src_length
    of its example; ArrayFileError (or OSError, ValueError) otherwise."""
    meta_path = cache / "meta.json"
    meta = read_json(meta_path)
    if meta.get("format") != FORMAT or int(meta["pairs"]) != len(src_lengths):
        raise ArrayFileError(f"{meta_path}: {meta} is not for {len(src_lengths)} examples")
    pairs = open_ragged(cache, SIDE)
    check_inside(pairs, np.asarray(src_lengths), np.asarray(tgt_lengths), cache)
    return PieceLinks(pairs)


def check_inside(
    pairs: RaggedIds, src_lengths: np.ndarray, tgt_lengths: np.ndarray, where: Path
) -> None:
    """ArrayFileError unless each example holds whole pairs inside its (tgt, src) lengths;
    read CHUNK_EXAMPLES examples at a time."""
    counts = np.diff(pairs.offsets)  # (n,) numbers of ids: two per link
    if len(counts) != len(src_lengths) or np.any(counts % 2):
        raise ArrayFileError(f"{where}: the links do not come in [t, s] pairs per example")
    for start in range(0, len(counts), CHUNK_EXAMPLES):
        stop = min(start + CHUNK_EXAMPLES, len(counts))
        ids = pairs.ids[pairs.offsets[start] : pairs.offsets[stop]]
        flat = np.asarray(ids, dtype=np.int64).reshape(-1, 2)  # (links, 2)
        example = start + np.repeat(np.arange(stop - start), counts[start:stop] // 2)  # (links,)
        outside = (flat < 0).any(axis=1)
        outside |= flat[:, 0] >= tgt_lengths[example]
        outside |= flat[:, 1] >= src_lengths[example]
        if outside.any():
            first = int(np.argmax(outside))
            raise ArrayFileError(
                f"{where}: link {flat[first].tolist()} lies outside example {int(example[first])}"
            )
