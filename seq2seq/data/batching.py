"""Encoded examples, padded batches, and a token-budget batch sampler.

An example is a pair of id lists without specials. A batch adds them:

    src     = pieces + EOS          tgt_in  = BOS + pieces
    tgt_out = pieces + EOS          (tgt_in and tgt_out have the same length)

and pads with PAD on the right. Masks are bool, True = real token, batch first.

`TokenBatchSampler.batches(epoch)` is a pure function of (seed, epoch), so a trainer resumes
in the middle of an epoch from (epoch, position) alone:

    for position, indices in enumerate(sampler.batches(epoch)[start:], start):
        batch = data.batch(indices)  # or collate([data[i] for i in indices], indices)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np
import torch

from seq2seq.data.arrays import ArrayExamples, TextLines
from seq2seq.special_tokens import BOS_ID, EOS_ID, PAD_ID

Example = tuple[list[int], list[int]]  # (source ids, target ids), no special tokens


@dataclass
class Batch:
    src: torch.Tensor  # (batch, src_len) long: pieces + EOS, PAD after
    src_mask: torch.Tensor  # (batch, src_len) bool, True = real token
    src_lengths: torch.Tensor  # (batch,) long, EOS included
    tgt_in: torch.Tensor  # (batch, tgt_len) long: BOS + pieces
    tgt_out: torch.Tensor  # (batch, tgt_len) long: pieces + EOS
    tgt_mask: torch.Tensor  # (batch, tgt_len) bool, True = real token
    indices: list[int]  # example ids in the dataset, one per row
    num_src_tokens: int  # real source tokens (EOS included, PAD not)
    num_tgt_tokens: int  # real target tokens predicted (EOS included, PAD not)
    # guided alignment's target p* (batch, tgt_len, src_len) float32, rows of tgt_out over
    # src, each linked row summing to 1; None without links (`seq2seq.data.links`)
    align: torch.Tensor | None = None

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        """A copy with every tensor on `device`."""
        moved = {
            field.name: getattr(self, field.name).to(device, non_blocking=non_blocking)
            for field in fields(self)
            if isinstance(getattr(self, field.name), torch.Tensor)
        }
        return replace(self, **moved)

    def __len__(self) -> int:
        return len(self.indices)


def collate(examples: Sequence[Example], indices: Sequence[int]) -> Batch:
    """Pad `(src_ids, tgt_ids)` examples (no specials) into a Batch."""
    if len(examples) != len(indices):
        raise ValueError(f"collate got {len(examples)} examples but {len(indices)} indices")
    if not examples:
        raise ValueError("collate needs at least one example")
    sources = [list(src) + [EOS_ID] for src, _ in examples]
    tgt_in = [[BOS_ID] + list(tgt) for _, tgt in examples]
    tgt_out = [list(tgt) + [EOS_ID] for _, tgt in examples]
    src, src_lengths = _pad(sources)  # (batch, src_len), (batch,)
    tgt_in_tensor, tgt_lengths = _pad(tgt_in)  # (batch, tgt_len), (batch,)
    tgt_out_tensor, _ = _pad(tgt_out)  # (batch, tgt_len)
    return Batch(
        src=src,
        src_mask=_length_mask(src_lengths, src.size(1)),
        src_lengths=src_lengths,
        tgt_in=tgt_in_tensor,
        tgt_out=tgt_out_tensor,
        tgt_mask=_length_mask(tgt_lengths, tgt_out_tensor.size(1)),
        indices=[int(i) for i in indices],
        num_src_tokens=int(src_lengths.sum()),
        num_tgt_tokens=int(tgt_lengths.sum()),
    )


def _pad(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad `rows` with PAD: (batch, longest) long and the lengths (batch,) long."""
    lengths = np.array([len(row) for row in rows], dtype=np.int64)  # (batch,)
    padded = np.full((len(rows), int(lengths.max())), PAD_ID, dtype=np.int64)
    for row_index, row in enumerate(rows):
        padded[row_index, : len(row)] = row
    return torch.from_numpy(padded), torch.from_numpy(lengths)


def _length_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    positions = torch.arange(max_len, device=lengths.device)  # (max_len,)
    return positions.unsqueeze(0) < lengths.unsqueeze(1)  # (batch, max_len)


class ParallelData:
    """The encoded examples of one split, with their text lines (the BLEU references).

    `examples[i]` is `(src_ids, tgt_ids)` without specials; `src_lengths[i]` and
    `tgt_lengths[i]` are the lengths they take in a batch (with EOS, resp. BOS).

    Built from lists (`ParallelData(examples, src_lines, tgt_lines)`, as valid, test and the
    toy tasks are), everything is in memory. Built `from_arrays` (the training split of a
    corpus), the examples and lines stay in memory-mapped files and are read when asked
    for: `examples` and the lines are read-only sequences, the lengths (examples,) int64
    arrays, and `batch` reads only the examples of its indices.
    """

    def __init__(
        self, examples: Sequence[Example], src_lines: Sequence[str], tgt_lines: Sequence[str]
    ) -> None:
        _check_sizes(len(examples), len(src_lines), len(tgt_lines))
        self.examples: Sequence[Example] = [(list(src), list(tgt)) for src, tgt in examples]
        self.src_lines: Sequence[str] = list(src_lines)
        self.tgt_lines: Sequence[str] = list(tgt_lines)
        self.src_lengths: Sequence[int] = [len(src) + 1 for src, _ in self.examples]  # + EOS
        self.tgt_lengths: Sequence[int] = [len(tgt) + 1 for _, tgt in self.examples]  # + BOS

    @classmethod
    def from_arrays(
        cls, examples: ArrayExamples, src_lines: TextLines, tgt_lines: TextLines, size: int
    ) -> ParallelData:
        """Lazy data over memory-mapped ids and text files; `size` is the number of lines
        the text files are known to hold (counting them would read them)."""
        _check_sizes(len(examples), size, size)
        data = cls.__new__(cls)
        data.examples, data.src_lines, data.tgt_lines = examples, src_lines, tgt_lines
        data.src_lengths = examples.src.lengths() + 1  # (examples,) int64, pieces + EOS
        data.tgt_lengths = examples.tgt.lengths() + 1  # (examples,) int64, BOS + pieces
        return data

    @property
    def lazy(self) -> bool:
        """Whether the examples are read from memory-mapped arrays on demand."""
        return isinstance(self.examples, ArrayExamples)

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int) -> Example:
        return self.examples[index]

    def batch(self, indices: Sequence[int]) -> Batch:
        return collate([self.examples[i] for i in indices], indices)

    def sampler(self, max_tokens: int, shuffle: bool, seed: int) -> TokenBatchSampler:
        return TokenBatchSampler(self.src_lengths, self.tgt_lengths, max_tokens, shuffle, seed)

    def select(self, keep: Sequence[int]) -> ParallelData:
        """The examples at `keep`, in that order (lazy data stays lazy: no ids are read)."""
        if isinstance(self.examples, ArrayExamples):
            lines = (self.src_lines, self.tgt_lines)
            src_lines, tgt_lines = (text.select(keep) for text in lines)  # type: ignore[attr-defined]
            return ParallelData.from_arrays(
                self.examples.select(keep), src_lines, tgt_lines, len(keep)
            )
        return ParallelData(
            [self.examples[i] for i in keep],
            [self.src_lines[i] for i in keep],
            [self.tgt_lines[i] for i in keep],
        )


def _check_sizes(examples: int, src_lines: int, tgt_lines: int) -> None:
    if not examples == src_lines == tgt_lines:
        raise ValueError(
            "ParallelData needs as many examples, src_lines and tgt_lines; got "
            f"{examples}, {src_lines}, {tgt_lines}"
        )


class EpochBatches(Sequence[list[int]]):
    """The batches of one epoch, as the sampler serves them: a sequence of index lists.

    Held as one index array, sorted by length, with each batch's bounds in it and the order
    in which batches are served; a batch becomes a list of ints only when it is read. So an
    epoch of millions of pairs costs 8 bytes a pair and is ready as soon as it is cut, not a
    Python object per index (about 180 MB and a second more at 5 million pairs).
    """

    def __init__(self, order: np.ndarray, bounds: np.ndarray, served: np.ndarray | None) -> None:
        self._order = order  # (examples,) example indices, batch after batch
        self._starts, self._ends = bounds[:-1], bounds[1:]  # (batches,) each, into `_order`
        self._served = served  # (batches,) which batch comes at each position; None: in turn

    def __len__(self) -> int:
        return len(self._starts)

    def __getitem__(self, position):  # type: ignore[override]
        if isinstance(position, slice):
            return [self[i] for i in range(*position.indices(len(self)))]
        batch = self._served[position] if self._served is not None else position
        return self._order[self._starts[batch] : self._ends[batch]].tolist()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # compared by content, like a list

    def __repr__(self) -> str:
        return f"EpochBatches({len(self)} batches of {len(self._order)} examples)"


class TokenBatchSampler:
    """Batches of example indices whose padded size stays within a token budget.

    Padded size of a batch = batch_size * max(longest src, longest tgt), lengths with
    EOS/BOS. With `shuffle`, each epoch draws a random order, sorts it by length (longer
    side, then source, then target; equal lengths stay in random order, so batches change
    from epoch to epoch), packs neighbours greedily and shuffles the batches; without it,
    batches follow increasing length. With `short_first_epochs=N`, the first N epochs are
    drawn and packed the same way but keep their batches in increasing length: a simple
    length curriculum (short sentences first, as in Bengio et al. 2009's curriculum idea).
    """

    def __init__(
        self,
        src_lengths: Sequence[int],
        tgt_lengths: Sequence[int],
        max_tokens: int,
        shuffle: bool = True,
        seed: int = 0,
        short_first_epochs: int = 0,
    ) -> None:
        if len(src_lengths) != len(tgt_lengths):
            raise ValueError("src_lengths and tgt_lengths must have the same length")
        if max_tokens <= 0:
            raise ValueError(f"max_tokens must be > 0, got {max_tokens}")
        if short_first_epochs < 0:
            raise ValueError(f"short_first_epochs must be >= 0, got {short_first_epochs}")
        self.src_lengths = np.asarray(src_lengths, dtype=np.int64)  # (examples,)
        self.tgt_lengths = np.asarray(tgt_lengths, dtype=np.int64)  # (examples,)
        self.sizes = np.maximum(self.src_lengths, self.tgt_lengths)  # (examples,)
        # one integer per example orders like (size, src, tgt): one stable argsort per epoch,
        # about twice as fast as a three-key lexsort on millions of pairs
        src_span, tgt_span = _span(self.src_lengths), _span(self.tgt_lengths)
        self.sort_keys = (self.sizes * src_span + self.src_lengths) * tgt_span + self.tgt_lengths
        self.max_tokens = max_tokens
        self.shuffle = shuffle
        self.seed = seed
        self.short_first_epochs = short_first_epochs
        _check_fits(self.sizes, max_tokens)

    def batches(self, epoch: int) -> EpochBatches:
        """Every example exactly once, the same for the same (seed, epoch)."""
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(len(self.sizes)) if self.shuffle else np.arange(len(self.sizes))
        # sort by longer side, then source, then target length; exact ties stay as drawn
        order = order[_stable_argsort(self.sort_keys[order])]  # (examples,)
        bounds = np.asarray([0, *self._cuts(order)], dtype=np.int64)  # (batches + 1,)
        served = None  # batches in increasing length
        if self.shuffle and epoch >= self.short_first_epochs:
            served = rng.permutation(len(bounds) - 1)  # (batches,)
        return EpochBatches(order, bounds, served)

    def _cuts(self, order: np.ndarray) -> list[int]:
        """Greedily cut `order` (sorted by size, ascending) into batches within the budget;
        the end (exclusive) of each batch.

        Sorted sizes make a batch's longest example its last one, so the padded size of the
        batch [start, j] is (j - start + 1) * size[j], non-decreasing in j. The sizes form
        runs of equal values (a hundred or so); within the run of size v, the batch from
        `start` may extend to just before start + max_tokens // v. So each cut is found by
        walking the runs from the batch's first one, a few integer steps in Python per
        batch, not one per example (millions of pairs are cut in a fraction of a second).
        """
        sizes = self.sizes[order]  # (examples,), non-decreasing
        total = len(order)
        bounds = (np.flatnonzero(np.diff(sizes)) + 1).tolist()  # where a run of sizes begins
        run_starts, run_ends = [0, *bounds], [*bounds, total]
        run_sizes = sizes[run_starts].tolist() if total else []
        cuts: list[int] = []
        start, run = 0, 0
        while start < total:
            while run_ends[run] <= start:  # the run holding `start`
                run += 1
            end, later = start, run
            while later < len(run_sizes):
                limit = start + self.max_tokens // run_sizes[later]  # exclusive end in this run
                if limit <= run_starts[later]:  # not even its first example fits
                    break
                end = min(limit, run_ends[later])
                if end < run_ends[later]:  # the budget ends inside this run
                    break
                later += 1
            cuts.append(end)  # end > start: every size fits (_check_fits)
            start = end
        return cuts

    def padding_ratio(self, batches: Sequence[Sequence[int]]) -> float:
        """Share of padded positions among all src and tgt positions of `batches`."""
        positions = real = 0
        for batch in batches:
            for lengths in (self.src_lengths[batch], self.tgt_lengths[batch]):  # (batch,)
                positions += len(batch) * int(lengths.max())
                real += int(lengths.sum())
        return 1.0 - real / positions if positions else 0.0


def _stable_argsort(keys: np.ndarray) -> np.ndarray:
    """`np.argsort(keys, kind="stable")` for non-negative integer keys, about three times
    faster on millions of them: each key is joined with its position into one unique
    integer (key in the high bits, position in the low ones), and those are sorted."""
    count = len(keys)
    shift = max(count - 1, 1).bit_length()
    if count == 0 or int(keys.max()) >= 1 << (62 - shift):  # the joined keys would overflow
        return np.argsort(keys, kind="stable")
    joined = (keys.astype(np.int64) << shift) | np.arange(count, dtype=np.int64)  # (count,)
    return np.sort(joined) & ((1 << shift) - 1)


def _span(lengths: np.ndarray) -> int:
    """One more than the largest length (1 when there are none)."""
    return int(lengths.max()) + 1 if lengths.size else 1


def _check_fits(sizes: np.ndarray, max_tokens: int) -> None:
    too_long = np.flatnonzero(sizes > max_tokens)
    if too_long.size:
        first = int(too_long[0])
        raise ValueError(
            f"example {first} has {int(sizes[first])} tokens on its longer side (with EOS), "
            f"more than max_tokens={max_tokens}; lower data.max_len or raise data.max_tokens"
        )
