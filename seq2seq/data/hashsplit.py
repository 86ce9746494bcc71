"""The split of `seq2seq.data.split`, computed from hashes in compact arrays.

`split_pairs` holds every pair and sentence as Python strings (about 1.7 KB a pair). Here a
pair costs 32 bytes while the corpus streams by (`PairHashes.add`): 64-bit hashes of each
sentence and of each sentence's `near_duplicate_key` (a pair is its two sentence hashes).
`assign_splits` then runs the same algorithm on those arrays:

    exact duplicates removed (first occurrence kept)
    -> groups: connected components of "shares a source or a target sentence"
    -> groups shuffled with random.Random(seed), as split_pairs shuffles its list of groups
    -> families: groups joined by near-twin sentences, placed where their first group is
    -> first fit of the families into valid, then test, the rest into train

and gives every pair a label (`TRAIN`, `VALID`, `TEST` or `DUPLICATE`), so the splits are
written by streaming the pairs a second time. The result is the one `split_pairs` gives
(tests/test_data_hashsplit.py compares them), unless two different sentences share a 64-bit
hash: with n distinct sentences the chance is about n² / 2^65, 3e-6 for ten million. Such a
collision joins two groups (no leak, a slightly different split) or drops a pair as a
duplicate.

Components are found with union-find over the few edges between distinct nodes, always
keeping the smallest node as the root; the components, and so the split, do not depend on
the order the edges are visited.
"""

from __future__ import annotations

import array
import hashlib
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from seq2seq.data.corpus import CorpusError, Pair
from seq2seq.data.split import near_duplicate_key, write_split_stream
from seq2seq.files import temporary_beside

TRAIN, VALID, TEST = 0, 1, 2  # the split labels of `SplitAssignment.labels`
DUPLICATE = 255  # a later copy of an earlier pair: in no split
LABELS = {"train": TRAIN, "valid": VALID, "test": TEST}
HASH_BYTES = 8


def text_hash(text: str) -> int:
    """A deterministic signed 64-bit hash of `text` (blake2b)."""
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=HASH_BYTES).digest()
    return int.from_bytes(digest, "little", signed=True)


class PairHashes:
    """Four 64-bit hashes per pair, appended as the corpus streams by (32 bytes a pair)."""

    COLUMNS = ("src", "tgt", "src_near", "tgt_near")

    def __init__(self) -> None:
        self._columns = {name: array.array("q") for name in self.COLUMNS}

    def add(self, src: str, tgt: str) -> None:
        columns = self._columns
        columns["src"].append(text_hash(src))
        columns["tgt"].append(text_hash(tgt))
        columns["src_near"].append(text_hash(near_duplicate_key(src)))
        columns["tgt_near"].append(text_hash(near_duplicate_key(tgt)))

    def __len__(self) -> int:
        return len(self._columns["src"])

    def column(self, name: str) -> np.ndarray:
        """(pairs,) int64, a view of the stored hashes."""
        return np.frombuffer(self._columns[name], dtype=np.int64)


@dataclass
class SplitAssignment:
    """Which split each pair (in corpus order) goes to, and the counts of the summary."""

    labels: np.ndarray  # (pairs,) uint8: TRAIN, VALID, TEST or DUPLICATE
    duplicates_removed: int
    num_groups: int  # families after near-twins joined
    near_duplicates_joined: int  # groups that joined another group's family as near-twins


def assign_splits(
    hashes: PairHashes, *, valid_size: int, test_size: int, seed: int
) -> SplitAssignment:
    """The labels `split_pairs` would give (module docstring); same errors."""
    first_pairs = _first_occurrences(hashes.column("src"), hashes.column("tgt"))  # (unique,)
    unique = len(first_pairs)
    if valid_size + test_size >= unique:
        raise ValueError(
            f"data.valid_size + data.test_size ({valid_size + test_size}) must be smaller "
            f"than the number of distinct pairs ({unique})"
        )
    src, tgt = (hashes.column(side)[first_pairs] for side in ("src", "tgt"))  # (unique,)
    group_of = _component_index(unique, [src, tgt])  # (unique,) groups by first pair
    num_groups = int(group_of.max()) + 1
    position = _shuffled_positions(num_groups, seed)[group_of]  # (unique,) shuffled group
    near = [hashes.column(side)[first_pairs] for side in ("src_near", "tgt_near")]
    family_root = _family_roots(num_groups, position, near)  # (unique,) first group position
    unique_labels = _fill(family_root, num_groups, [valid_size, test_size])  # (unique,)
    labels = np.full(len(hashes), DUPLICATE, dtype=np.uint8)  # (pairs,)
    labels[first_pairs] = unique_labels
    num_families = len(np.unique(family_root))
    return SplitAssignment(
        labels=labels,
        duplicates_removed=len(hashes) - unique,
        num_groups=num_families,
        near_duplicates_joined=num_groups - num_families,
    )


def _first_occurrences(src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
    """(unique,) int64 positions of the first occurrence of each (src, tgt) hash pair, in
    increasing order: the corpus positions of the pairs kept after deduplication."""
    order = np.lexsort((tgt, src))  # stable: equal pairs stay in corpus order
    sorted_src, sorted_tgt = src[order], tgt[order]
    changed = (sorted_src[1:] != sorted_src[:-1]) | (sorted_tgt[1:] != sorted_tgt[:-1])
    return np.sort(order[np.r_[True, changed]]).astype(np.int64)


def _first_with_same(keys: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """(n,) for each entry, the smallest of `nodes` among the entries with the same key."""
    order = np.lexsort((nodes, keys))  # by key, then node
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])  # (distinct,)
    smallest = nodes[order][starts]  # (distinct,)
    result = np.empty_like(nodes)
    result[order] = np.repeat(smallest, np.diff(np.r_[starts, len(keys)]))
    return result


def _roots(count: int, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """(count,) int64: for each node 0..count-1 the smallest node of its component, nodes
    joined by the edges left[i] - right[i] (union-find; only edges between distinct nodes
    are visited, in Python)."""
    parent = array.array("q", range(count))

    def find(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]  # path halving
            node = parent[node]
        return node

    distinct = left != right
    for a, b in zip(left[distinct].tolist(), right[distinct].tolist(), strict=True):
        root_a, root_b = find(a), find(b)
        if root_a != root_b:  # the smaller root stays: a root is its component's first node
            parent[max(root_a, root_b)] = min(root_a, root_b)
    roots = np.frombuffer(parent, dtype=np.int64).copy()  # (count,)
    while True:  # every node straight to its root
        hop = roots[roots]
        if np.array_equal(hop, roots):
            return roots
        roots = hop


def _component_index(count: int, key_columns: list[np.ndarray]) -> np.ndarray:
    """(count,) int64: components of the nodes 0..count-1 joined when they share a key of
    the same column, numbered in the order of their first node."""
    nodes = np.arange(count, dtype=np.int64)
    left = np.concatenate([nodes] * len(key_columns))
    right = np.concatenate([_first_with_same(keys, nodes) for keys in key_columns])
    roots = _roots(count, left, right)
    first_nodes = np.flatnonzero(roots == nodes)  # (components,) increasing
    return np.searchsorted(first_nodes, roots).astype(np.int64)


def _shuffled_positions(num_groups: int, seed: int) -> np.ndarray:
    """(groups,) int64: where each group lands once `random.Random(seed).shuffle` reorders
    the list of groups. Shuffling depends on the list's length only, so shuffling the
    numbers 0..groups-1 (in a compact array) draws the permutation split_pairs draws."""
    order = array.array("q", range(num_groups))
    random.Random(seed).shuffle(order)  # order[k] = the group at position k
    positions = np.empty(num_groups, dtype=np.int64)
    positions[np.frombuffer(order, dtype=np.int64)] = np.arange(num_groups, dtype=np.int64)
    return positions


def _family_roots(num_groups: int, position: np.ndarray, near: list[np.ndarray]) -> np.ndarray:
    """(unique,) int64: for each pair, the shuffled position of the first group of its
    family (groups joined when a sentence of one has the near-twin key of a sentence of the
    other, on the same side)."""
    left = np.concatenate([position] * len(near))
    right = np.concatenate([_first_with_same(keys, position) for keys in near])
    roots = _roots(num_groups, left, right)  # (groups,) by shuffled position
    return roots[position]


def _fill(family_root: np.ndarray, num_groups: int, sizes: list[int]) -> np.ndarray:
    """(unique,) uint8 labels: families, in the order of their first group, go into the
    first of `sizes` (valid, test) where they fit, else into train."""
    family_sizes = np.bincount(family_root, minlength=num_groups)  # (groups,) 0: not a root
    bin_of_root = np.full(num_groups, TRAIN, dtype=np.uint8)  # (groups,)
    free = list(sizes)
    for root in np.flatnonzero(family_sizes).tolist():
        if not any(free):
            break  # valid and test are full: everything else is train
        size = int(family_sizes[root])
        for bin_index, room in enumerate(free):
            if size <= room:
                free[bin_index] -= size
                bin_of_root[root] = (VALID, TEST)[bin_index]
                break
    return bin_of_root[family_root]


def write_hash_split(
    pairs: Iterable[Pair],
    folder: Path,
    langs: tuple[str, str],
    *,
    valid_size: int,
    test_size: int,
    seed: int,
    source: str,
) -> tuple[SplitAssignment, dict[str, int]]:
    """Split a stream of clean pairs without leakage and write the split files below
    `folder`: the pairs go to a temporary file beside them while their hashes are kept,
    `assign_splits` splits the hashes, and the pairs are read back into their splits. Only
    the hashes (32 bytes a pair) grow with the corpus.

    Returns the assignment and the pairs written per split; CorpusError naming `source`
    when the valid and test sizes cannot be filled."""
    hashes = PairHashes()
    with temporary_beside(folder / "clean_pairs.tsv") as clean:
        with open(clean, "wb") as stream:
            for src, tgt in pairs:
                hashes.add(src, tgt)
                stream.write(f"{src}\t{tgt}\n".encode())  # normalised: no tab, no newline
        try:
            split = assign_splits(hashes, valid_size=valid_size, test_size=test_size, seed=seed)
        except ValueError as error:  # valid + test sizes the corpus cannot fill
            raise CorpusError(f"{source}: {error}") from error
        del hashes
        names = {label: name for name, label in LABELS.items()}
        labels = (names.get(label) for label in split.labels.tolist())
        counts = write_split_stream(_read_clean(clean), labels, folder, langs)
    return split, counts


def _read_clean(path: Path) -> Iterator[Pair]:
    """The pairs of the temporary clean-pairs file, one `src<TAB>tgt` a line."""
    with open(path, "rb") as stream:
        for line in stream:
            src, tgt = line.rstrip(b"\n").decode("utf-8").split("\t")
            yield src, tgt
