"""Memory-mapped token arrays: the encoded splits on disk, opened lazily.

One side of a split is two `.npy` files:

    <side>_ids.npy      (total,) int16 or int32   every sentence's ids, concatenated
    <side>_offsets.npy  (n + 1,) int64            sentence i is ids[offsets[i]:offsets[i + 1]]

`open_ragged` maps them with `np.load(mmap_mode="r")`: opening costs nothing however large
the split, and a sentence's ids are read from disk (or the page cache, shared by every
process on the machine) only when it is asked for. So a data-parallel rank reads the
sentences of its own batches and no others.

`RaggedIds`, `ArrayExamples` and `TextLines` are read-only sequences over such files; each
may carry a selection of rows (`select`), so dropping over-long pairs copies no ids.
`RaggedWriter` writes one side in chunks, never holding more than a chunk in memory.
"""

from __future__ import annotations

import mmap
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

OFFSET_DTYPE = np.int64
INT16_LIMIT = 1 << 15  # ids of a vocabulary up to this size fit in int16
COPY_BYTES = 1 << 20
SCAN_BYTES = 1 << 24  # text scanned for line ends 16 MiB at a time


class ArrayFileError(ValueError):
    """A token array file that is missing, damaged or inconsistent with its partner;
    `path` is the file at fault, when one is (the message names it too)."""

    def __init__(self, message: str, path: Path | str | None = None) -> None:
        super().__init__(message)
        self.path = Path(path) if path is not None else None


def ids_dtype(vocab_size: int) -> np.dtype:
    """The narrowest signed integer type holding ids 0 .. vocab_size - 1."""
    return np.dtype(np.int16) if vocab_size <= INT16_LIMIT else np.dtype(np.int32)


class RaggedIds(Sequence[list[int]]):
    """Sequences of ids stored flat; `rows` (m,) int64, when given, picks and orders them."""

    def __init__(self, ids: np.ndarray, offsets: np.ndarray, rows: np.ndarray | None = None):
        self.ids = ids  # (total,) int16 / int32, usually a read-only memmap
        self.offsets = offsets  # (n + 1,) int64
        self.rows = rows  # (m,) int64 indices into the n stored sentences, or None: all

    def __len__(self) -> int:
        return len(self.offsets) - 1 if self.rows is None else len(self.rows)

    def __getitem__(self, index: int) -> list[int]:  # type: ignore[override]
        if isinstance(index, slice):  # a list, as slicing a list gives
            return [self[i] for i in range(*index.indices(len(self)))]
        row = self._row(index)
        start, end = int(self.offsets[row]), int(self.offsets[row + 1])
        return self.ids[start:end].tolist()

    def _row(self, index: int) -> int:
        length = len(self)
        if not -length <= index < length:
            raise IndexError(f"sentence {index} of {length}")
        index %= length
        return index if self.rows is None else int(self.rows[index])

    def lengths(self) -> np.ndarray:
        """(m,) int64: the number of ids of each sentence, without special tokens."""
        lengths = np.diff(self.offsets)  # (n,)
        return lengths if self.rows is None else lengths[self.rows]

    def select(self, keep: Sequence[int] | np.ndarray) -> RaggedIds:
        """The sentences at `keep` (positions in this sequence), in that order."""
        keep = np.asarray(keep, dtype=np.int64)  # (k,)
        rows = keep if self.rows is None else self.rows[keep]
        return RaggedIds(self.ids, self.offsets, rows)


class ArrayExamples(Sequence[tuple[list[int], list[int]]]):
    """`(src_ids, tgt_ids)` examples read on demand from two `RaggedIds` of equal length."""

    def __init__(self, src: RaggedIds, tgt: RaggedIds) -> None:
        if len(src) != len(tgt):
            raise ArrayFileError(
                f"the source side holds {len(src)} sentences, the target side {len(tgt)}"
            )
        self.src, self.tgt = src, tgt

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, index: int) -> tuple[list[int], list[int]]:  # type: ignore[override]
        if isinstance(index, slice):  # a list, as slicing a list gives
            return [self[i] for i in range(*index.indices(len(self)))]
        return self.src[index], self.tgt[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or len(other) != len(self):
            return False
        return all(
            (list(src), list(tgt)) == mine for (src, tgt), mine in zip(other, self, strict=True)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable-looking sequence: not hashable

    def select(self, keep: Sequence[int] | np.ndarray) -> ArrayExamples:
        return ArrayExamples(self.src.select(keep), self.tgt.select(keep))


class TextLines(Sequence[str]):
    """The lines of a UTF-8 text file (one sentence a line), read on demand.

    The file is mapped and its line starts found on first use, (n + 1,) int64; `rows`
    picks and orders lines as in `RaggedIds`.
    """

    def __init__(self, path: Path | str, rows: np.ndarray | None = None) -> None:
        self.path = Path(path)
        self.rows = rows  # (m,) int64 or None: every line
        self._starts: np.ndarray | None = None  # (n + 1,) int64 byte offsets, found lazily
        self._buffer: Any = None

    def _index(self) -> tuple[Any, np.ndarray]:
        if self._starts is None or self._buffer is None:
            self._buffer, self._starts = _map_lines(self.path)
        return self._buffer, self._starts

    def __len__(self) -> int:
        return len(self._index()[1]) - 1 if self.rows is None else len(self.rows)

    def __getitem__(self, index: int) -> str:  # type: ignore[override]
        if isinstance(index, slice):  # a list, as slicing a list gives
            return [self[i] for i in range(*index.indices(len(self)))]
        buffer, starts = self._index()
        length = len(self)
        if not -length <= index < length:
            raise IndexError(f"line {index} of {length} in {self.path}")
        index %= length
        row = index if self.rows is None else int(self.rows[index])
        return bytes(buffer[int(starts[row]) : int(starts[row + 1]) - 1]).decode("utf-8")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or len(other) != len(self):
            return False
        return all(mine == theirs for mine, theirs in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def select(self, keep: Sequence[int] | np.ndarray) -> TextLines:
        keep = np.asarray(keep, dtype=np.int64)  # (k,)
        rows = keep if self.rows is None else self.rows[keep]
        selected = TextLines(self.path, rows)
        selected._buffer, selected._starts = self._buffer, self._starts
        return selected


def _map_lines(path: Path) -> tuple[Any, np.ndarray]:
    """The mapped file and its line starts (n + 1,) int64 (the last: the end of the file)."""
    with open(path, "rb") as stream:
        size = os.fstat(stream.fileno()).st_size
        if size == 0:
            return b"", np.zeros(1, dtype=np.int64)
        buffer = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
    starts = [np.zeros(1, dtype=np.int64)]
    for begin in range(0, size, SCAN_BYTES):  # in blocks: the mask of one block at a time
        block = np.frombuffer(buffer, np.uint8, count=min(SCAN_BYTES, size - begin), offset=begin)
        starts.append(np.flatnonzero(block == ord("\n")).astype(np.int64) + begin + 1)
    line_starts = np.concatenate(starts)  # (n + 1,)
    if line_starts[-1] != size:
        raise ArrayFileError(f"{path}: the last line has no line ending (a damaged file?)", path)
    return buffer, line_starts


class RaggedWriter:
    """Writes one side's `<side>_ids.npy` and `<side>_offsets.npy` into `folder`, chunk by
    chunk: ids go to a raw file as they come, the offsets are kept ((n + 1,) int64, 8 bytes
    a sentence) and `close` writes both `.npy` files."""

    def __init__(self, folder: Path, side: str, dtype: np.dtype) -> None:
        self.folder, self.side, self.dtype = Path(folder), side, np.dtype(dtype)
        self._raw_path = self.folder / f"{side}_ids.raw"
        self._raw = open(self._raw_path, "wb")  # noqa: SIM115 - closed in close()
        self._lengths: list[np.ndarray] = []
        self._total = 0
        self._limit = np.iinfo(self.dtype).max

    def add(self, flat: np.ndarray, lengths: np.ndarray) -> None:
        """Append one chunk: its ids concatenated (chunk_ids,) and their lengths (chunk,)."""
        if len(flat) != int(lengths.sum()):
            raise ArrayFileError(
                f"a chunk of {len(flat)} ids with lengths summing to {lengths.sum()}"
            )
        if flat.size and (int(flat.max()) > self._limit or int(flat.min()) < 0):
            raise ArrayFileError(f"an id outside [0, {self._limit}] for {self.dtype} ids")
        self._raw.write(np.asarray(flat).astype(self.dtype).tobytes())
        self._lengths.append(np.asarray(lengths, dtype=np.int64))
        self._total += len(flat)

    def close(self) -> int:
        """Write the two `.npy` files; returns the number of sentences."""
        self._raw.close()
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, np.int64)
        offsets = np.zeros(len(lengths) + 1, dtype=OFFSET_DTYPE)  # (n + 1,)
        np.cumsum(lengths, out=offsets[1:])
        np.save(self.folder / f"{self.side}_offsets.npy", offsets)
        _raw_to_npy(self._raw_path, self.folder / f"{self.side}_ids.npy", self.dtype, self._total)
        self._raw_path.unlink()
        return len(lengths)


def _raw_to_npy(raw: Path, target: Path, dtype: np.dtype, count: int) -> None:
    """Prefix the raw ids with a `.npy` header: a (count,) array of `dtype`."""
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False}
    with open(target, "wb") as out, open(raw, "rb") as source:
        np.lib.format.write_array_header_1_0(out, {**header, "shape": (count,)})
        shutil.copyfileobj(source, out, COPY_BYTES)


def open_ragged(folder: Path, side: str, vocab_size: int | None = None) -> RaggedIds:
    """Map `<side>_ids.npy` and `<side>_offsets.npy` of `folder` read-only, after checking
    that they fit together: offsets from 0, never decreasing, ending at the number of ids;
    with `vocab_size`, every id in [0, vocab_size). ArrayFileError names the file otherwise.

    The checks are vectorised (a few passes over the mapped arrays, no copy of the ids):
    see `seq2seq.data.record` for their cost at millions of pairs."""
    ids_path = Path(folder) / f"{side}_ids.npy"
    offsets_path = Path(folder) / f"{side}_offsets.npy"
    ids = _load(ids_path)
    offsets = _load(offsets_path)
    if ids.ndim != 1 or ids.dtype not in (np.int16, np.int32):
        raise ArrayFileError(
            f"{ids_path}: expected a 1-d int16/int32 array, got {ids.dtype}", ids_path
        )
    if offsets.ndim != 1 or offsets.dtype != OFFSET_DTYPE or len(offsets) == 0:
        raise ArrayFileError(f"{offsets_path}: expected a non-empty 1-d int64 array", offsets_path)
    if int(offsets[0]) != 0 or int(offsets[-1]) != len(ids):
        raise ArrayFileError(
            f"{offsets_path}: offsets run from {int(offsets[0])} to {int(offsets[-1])}, "
            f"but {ids_path.name} holds {len(ids)} ids",
            offsets_path,
        )
    _check_order(offsets, offsets_path)
    if vocab_size is not None:
        _check_ids(ids, vocab_size, ids_path)
    return RaggedIds(ids, offsets)


def _check_order(offsets: np.ndarray, path: Path) -> None:
    """ArrayFileError unless the (n + 1,) offsets never decrease."""
    falling = offsets[1:] < offsets[:-1]  # (n,) bool: sentence i would end before it starts
    if falling.any():
        first = int(np.argmax(falling))
        raise ArrayFileError(
            f"{path}: offsets not in order: sentence {first} starts at {int(offsets[first])} "
            f"and ends at {int(offsets[first + 1])}",
            path,
        )


def _check_ids(ids: np.ndarray, vocab_size: int, path: Path) -> None:
    """ArrayFileError unless every id of the (total,) array is in [0, vocab_size)."""
    if not ids.size:
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        position = int(np.argmax(ids == bad))
        raise ArrayFileError(
            f"{path}: id {bad} (at position {position}) is outside the vocabulary of "
            f"{vocab_size} pieces",
            path,
        )


def _load(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as error:
        raise ArrayFileError(f"{path}: cannot be read as a .npy array ({error})", path) from error


def iter_lines(path: Path) -> Iterator[str]:
    """The lines of a UTF-8 text file, split at b"\\n" only, without their ending."""
    with open(path, "rb") as stream:
        for line in stream:
            yield line.rstrip(b"\n").decode("utf-8")
