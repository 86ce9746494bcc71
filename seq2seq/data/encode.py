"""Encode sentence pairs into ids once, and cache the result on disk.

The cache file `encoded_<split>_<hash>.npz` holds, per side, all ids concatenated and the
offsets where each sentence starts (no pickled objects, loaded with `allow_pickle=False`).
The hash covers both subword models and the text, so any change re-encodes. The file is
written through a temporary file named for the writing process, so parallel runs never
write into one another's file; one that cannot be read (damaged by hand, a full disk) is
encoded and written again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from seq2seq.data.batching import ParallelData
from seq2seq.data.corpus import Pair
from seq2seq.data.fetch import temporary_beside
from seq2seq.data.tokenizer import Tokenizer

log = logging.getLogger(__name__)


def encode_pairs(
    pairs: Sequence[Pair], src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer
) -> ParallelData:
    """Encode both sides (no special tokens) and keep the text lines."""
    sources = [src for src, _ in pairs]
    targets = [tgt for _, tgt in pairs]
    examples = zip(
        src_tokenizer.encode_many(sources), tgt_tokenizer.encode_many(targets), strict=True
    )
    return ParallelData(list(examples), sources, targets)


def encode_pairs_cached(
    pairs: Sequence[Pair],
    src_tokenizer: Tokenizer,
    tgt_tokenizer: Tokenizer,
    folder: Path,
    split_name: str,
) -> ParallelData:
    """`encode_pairs`, read from / written to `<folder>/encoded_<split_name>_<hash>.npz`."""
    digest = encoding_hash(pairs, src_tokenizer, tgt_tokenizer)
    path = folder / f"encoded_{split_name}_{digest}.npz"
    if path.is_file():
        try:
            return _load(path, pairs)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
            log.warning("cannot use the encoding cache %s (%s); encoding again", path, error)
    data = encode_pairs(pairs, src_tokenizer, tgt_tokenizer)
    _save(path, data)
    return data


def encoding_hash(pairs: Sequence[Pair], src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer) -> str:
    digest = hashlib.sha256()
    for model in (src_tokenizer.to_bytes(), tgt_tokenizer.to_bytes()):
        digest.update(hashlib.sha256(model).digest())
    for src, tgt in pairs:
        digest.update(f"{src}\t{tgt}\n".encode())
    return digest.hexdigest()[:16]


def _save(path: Path, data: ParallelData) -> None:
    src_ids, src_offsets = _flatten([src for src, _ in data.examples])
    tgt_ids, tgt_offsets = _flatten([tgt for _, tgt in data.examples])
    path.parent.mkdir(parents=True, exist_ok=True)
    with temporary_beside(path) as temporary:
        with open(temporary, "wb") as stream:
            np.savez(
                stream,
                src_ids=src_ids,
                src_offsets=src_offsets,
                tgt_ids=tgt_ids,
                tgt_offsets=tgt_offsets,
            )
        os.replace(temporary, path)


def _load(path: Path, pairs: Sequence[Pair]) -> ParallelData:
    with np.load(path, allow_pickle=False) as arrays:
        sources = _unflatten(arrays["src_ids"], arrays["src_offsets"])
        targets = _unflatten(arrays["tgt_ids"], arrays["tgt_offsets"])
    if len(sources) != len(pairs):
        raise ValueError(f"{path} holds {len(sources)} examples, expected {len(pairs)}")
    examples = list(zip(sources, targets, strict=True))
    return ParallelData(examples, [src for src, _ in pairs], [tgt for _, tgt in pairs])


def _flatten(sequences: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """All ids (total,) int32 and offsets (n + 1,): sequence i is ids[offsets[i]:offsets[i+1]]."""
    lengths = np.array([len(ids) for ids in sequences], dtype=np.int64)  # (n,)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)  # (n + 1,)
    ids = np.fromiter((i for ids in sequences for i in ids), dtype=np.int32, count=int(offsets[-1]))
    return ids, offsets


def _unflatten(ids: np.ndarray, offsets: np.ndarray) -> list[list[int]]:
    flat = ids.tolist()
    bounds = offsets.tolist()
    return [flat[start:end] for start, end in zip(bounds[:-1], bounds[1:], strict=True)]
