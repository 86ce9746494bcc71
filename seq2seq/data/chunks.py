"""Encode sentence pairs chunk by chunk, in this process or in several worker processes.

`encode_chunks` turns an iterator of chunks (a list of sources and a list of targets)
into an iterator of encoded chunks, in the same order, each as flat arrays:

    src_ids (chunk_ids,) int64, src_lengths (chunk,) int64, tgt_ids ..., tgt_lengths ...

With `workers > 1` the chunks go to a pool of worker processes, forked where the platform
can (they start at once, as PyTorch's DataLoader workers do; they only run sentencepiece),
spawned elsewhere; at most two chunks a worker are in flight, so memory stays bounded
whatever the corpus size. The ids are the same either way: each sentence is encoded on its
own by the same model. A pool whose workers die (a spawned worker cannot import the main
module of `python -`, say) raises BrokenProcessPool; `seq2seq.data.encode` then encodes in
this process.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor

import numpy as np

from seq2seq.data.tokenizer import Tokenizer, tokenizer_from_bytes

Chunk = tuple[list[str], list[str]]  # sources, targets
EncodedChunk = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
TokenizerSpec = tuple[str, bytes, str]  # kind, model bytes, lang: rebuilt in a worker
IN_FLIGHT_PER_WORKER = 2


def flatten(sequences: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """All ids (total,) int64 and the lengths (n,) int64 of `sequences`."""
    lengths = np.fromiter((len(ids) for ids in sequences), dtype=np.int64, count=len(sequences))
    flat = np.fromiter((i for ids in sequences for i in ids), dtype=np.int64, count=lengths.sum())
    return flat, lengths


def encode_chunks(
    chunks: Iterable[Chunk], src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer, workers: int
) -> Iterator[EncodedChunk]:
    """Each chunk's ids, in order (module docstring); `workers` <= 1: in this process."""
    if workers <= 1:
        for sources, targets in chunks:
            yield _encode(src_tokenizer, tgt_tokenizer, sources, targets)
        return
    specs = (_spec(src_tokenizer), _spec(tgt_tokenizer))
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        pending: deque[Future[EncodedChunk]] = deque()
        for sources, targets in chunks:
            pending.append(pool.submit(_encode_in_worker, specs, sources, targets))
            if len(pending) >= IN_FLIGHT_PER_WORKER * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _spec(tokenizer: Tokenizer) -> TokenizerSpec:
    return tokenizer.kind, tokenizer.to_bytes(), tokenizer.lang


def _encode_in_worker(
    specs: tuple[TokenizerSpec, TokenizerSpec], sources: list[str], targets: list[str]
) -> EncodedChunk:
    """Worker side: rebuild both tokenizers (a few ms, small against a chunk) and encode."""
    src_tokenizer, tgt_tokenizer = (tokenizer_from_bytes(*spec) for spec in specs)
    return _encode(src_tokenizer, tgt_tokenizer, sources, targets)


def _encode(
    src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer, sources: list[str], targets: list[str]
) -> EncodedChunk:
    src_ids, src_lengths = flatten(src_tokenizer.encode_many(sources))
    tgt_ids, tgt_lengths = flatten(tgt_tokenizer.encode_many(targets))
    return src_ids, src_lengths, tgt_ids, tgt_lengths
