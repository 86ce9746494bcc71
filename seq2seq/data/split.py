"""Split sentence pairs into train / valid / test without leaking sentences across splits.

Tatoeba translates the same sentence several times ("Hi." -> "嗨。", "你好。"), so a split by
line puts test sentences into training. Instead, pairs are nodes of a graph with an edge
between two pairs that share their source or their target sentence; each connected group
(found with union-find) goes whole into one split. Groups are visited in a seeded random
order and go to valid while they fit, then to test while they fit, then to train, so the
evaluation sets get their exact sizes (small groups fill the last places).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from seq2seq.data.corpus import Pair
from seq2seq.data.fetch import write_atomically

SPLIT_NAMES = ("train", "valid", "test")


@dataclass
class SplitPairs:
    train: list[Pair]
    valid: list[Pair]
    test: list[Pair]
    duplicates_removed: int
    num_groups: int

    def by_name(self) -> dict[str, list[Pair]]:
        return {"train": self.train, "valid": self.valid, "test": self.test}


def split_pairs(pairs: Sequence[Pair], *, valid_size: int, test_size: int, seed: int) -> SplitPairs:
    """Deduplicate `pairs` and assign whole sentence-sharing groups to valid, test and train.

    Deterministic in `seed`. No source or target sentence of valid or test occurs in
    train or in the other evaluation set. Pairs keep their corpus order within a split.
    """
    unique = list(dict.fromkeys(pairs))
    groups = sentence_groups(unique)
    if valid_size + test_size >= len(unique):
        raise ValueError(
            f"data.valid_size + data.test_size ({valid_size + test_size}) must be smaller "
            f"than the number of distinct pairs ({len(unique)})"
        )
    random.Random(seed).shuffle(groups)
    valid, test, train = _fill(groups, [valid_size, test_size])
    return SplitPairs(
        train=[unique[i] for i in sorted(train)],
        valid=[unique[i] for i in sorted(valid)],
        test=[unique[i] for i in sorted(test)],
        duplicates_removed=len(pairs) - len(unique),
        num_groups=len(groups),
    )


def sentence_groups(pairs: Sequence[Pair]) -> list[list[int]]:
    """Indices of `pairs` grouped into connected components of "shares a sentence".

    Groups are ordered by their first index and list indices in increasing order.
    """
    parent = list(range(len(pairs)))

    def find(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]  # path halving
            node = parent[node]
        return node

    first_with_sentence: dict[tuple[str, str], int] = {}
    for index, (src, tgt) in enumerate(pairs):
        for key in (("src", src), ("tgt", tgt)):
            other = first_with_sentence.setdefault(key, index)
            parent[find(index)] = find(other)
    members: dict[int, list[int]] = {}
    for index in range(len(pairs)):
        members.setdefault(find(index), []).append(index)
    return list(members.values())


def _fill(groups: list[list[int]], sizes: list[int]) -> list[list[int]]:
    """Put each group into the first bin (of `sizes`) where it fits, else into a last bin."""
    bins: list[list[int]] = [[] for _ in range(len(sizes) + 1)]
    for group in groups:
        for bin_index, size in enumerate(sizes):
            if len(bins[bin_index]) + len(group) <= size:
                bins[bin_index].extend(group)
                break
        else:
            bins[-1].extend(group)
    return bins


def write_split(split: SplitPairs, folder: Path, src_lang: str, tgt_lang: str) -> None:
    """Write `<split>.<src_lang>` and `<split>.<tgt_lang>`, one sentence a line, parallel."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, pairs in split.by_name().items():
        _write_lines(folder / f"{name}.{src_lang}", [src for src, _ in pairs])
        _write_lines(folder / f"{name}.{tgt_lang}", [tgt for _, tgt in pairs])


def _write_lines(path: Path, lines: Sequence[str]) -> None:
    """Write the lines through a temporary file, so a parallel reader never sees half a file."""
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    if path.is_file() and path.read_bytes() == data:
        return  # unchanged: keep the file (and its mtime) as it is
    write_atomically(path, data)
