"""Split sentence pairs into train / valid / test without leaking sentences across splits.

Tatoeba translates the same sentence several times ("Hi." -> "嗨。", "你好。"), so a split by
line puts test sentences into training. Instead, pairs are nodes of a graph with an edge
between two pairs that share their source or their target sentence; each connected group
(found with union-find) goes whole into one split. Groups are visited in a seeded random
order and go to valid while they fit, then to test while they fit, then to train, so the
evaluation sets get their exact sizes (small groups fill the last places).

Tatoeba also holds near-twins: sentences that differ only in punctuation, case or spaces
(真糟糕。 / 真糟糕!, 對不起打擾你了。 / 對不起,打擾你了。). Two groups whose sentences are
equal once normalised (`near_duplicate_key`) form one family, and a family goes whole into one
split too. The order stays that of the exact groups: a family is placed where its first
group falls in the shuffled order. So the groups without a near-twin elsewhere (all but a few
dozen) keep the split they had before families existed, and with them the hand-aligned
gold pairs drawn from valid and test (seq2seq/align/gold/).
"""

from __future__ import annotations

import contextlib
import filecmp
import functools
import random
import unicodedata
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from seq2seq.data.corpus import Pair
from seq2seq.files import replace, temporary_beside, write_atomically

SPLIT_NAMES = ("train", "valid", "test")


@dataclass
class SplitPairs:
    train: list[Pair]
    valid: list[Pair]
    test: list[Pair]
    duplicates_removed: int
    num_groups: int  # families after near-twins joined
    near_duplicates_joined: int  # groups that joined another group's family as near-twins

    def by_name(self) -> dict[str, list[Pair]]:
        return {"train": self.train, "valid": self.valid, "test": self.test}


def split_pairs(pairs: Sequence[Pair], *, valid_size: int, test_size: int, seed: int) -> SplitPairs:
    """Deduplicate `pairs` and assign whole sentence-sharing families to valid, test and train.

    Deterministic in `seed`. No source or target sentence of valid or test occurs in
    train or in the other evaluation set, not even as a near-twin (`near_duplicate_key`).
    Pairs keep their corpus order within a split.
    """
    unique = list(dict.fromkeys(pairs))
    if valid_size + test_size >= len(unique):
        raise ValueError(
            f"data.valid_size + data.test_size ({valid_size + test_size}) must be smaller "
            f"than the number of distinct pairs ({len(unique)})"
        )
    groups = sentence_groups(unique)
    random.Random(seed).shuffle(groups)
    families = near_duplicate_families(unique, groups)
    valid, test, train = _fill(families, [valid_size, test_size])
    return SplitPairs(
        train=[unique[i] for i in sorted(train)],
        valid=[unique[i] for i in sorted(valid)],
        test=[unique[i] for i in sorted(test)],
        duplicates_removed=len(pairs) - len(unique),
        num_groups=len(families),
        near_duplicates_joined=len(groups) - len(families),
    )


def near_duplicate_key(sentence: str) -> str:
    """The sentence with case, punctuation and spaces ignored: NFKC, casefolded, and every
    punctuation mark (Unicode category P*) and space removed. A sentence of nothing but
    punctuation keeps itself as its key."""
    folded = unicodedata.normalize("NFKC", sentence).casefold()
    kept = folded.translate(_ignored_characters())
    return kept or sentence


@functools.cache
def _ignored_characters() -> _IgnoredCharacters:
    """The str.translate table of `near_duplicate_key`, one per process (a memo)."""
    return _IgnoredCharacters()


class _IgnoredCharacters(dict):
    """str.translate table deleting every punctuation mark (category P*) and space: the
    same test as character by character, done once per distinct character and remembered
    (a character kept maps to itself)."""

    def __missing__(self, code: int) -> int | None:
        char = chr(code)
        ignored = unicodedata.category(char).startswith("P") or char.isspace()
        self[code] = None if ignored else code
        return self[code]


def sentence_groups(pairs: Sequence[Pair]) -> list[list[int]]:
    """Indices of `pairs` grouped into connected components of "shares a sentence".

    Groups are ordered by their first index and list indices in increasing order.
    """
    return _components(len(pairs), lambda index: list(enumerate(pairs[index])))


def near_duplicate_families(pairs: Sequence[Pair], groups: list[list[int]]) -> list[list[int]]:
    """`groups` (indices of `pairs`) joined when a sentence of one equals a sentence of the
    other on the same side once normalised (`near_duplicate_key`).

    A family sits where its first group is in `groups` and lists its indices in increasing
    order; a group without near-twins elsewhere is its own family, unchanged.
    """

    def keys(group_index: int) -> list[tuple[int, str]]:
        return [
            (side, near_duplicate_key(pairs[index][side]))
            for index in groups[group_index]
            for side in (0, 1)
        ]

    joined = _components(len(groups), keys)
    return [sorted(index for member in family for index in groups[member]) for family in joined]


def _components(count: int, keys_of: Callable[[int], Sequence[Hashable]]) -> list[list[int]]:
    """Nodes 0..count-1 joined (union-find) when they share a key; the components ordered by
    their first node, each listing its nodes in increasing order."""
    parent = list(range(count))

    def find(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]  # path halving
            node = parent[node]
        return node

    first_with_key: dict[Hashable, int] = {}
    for node in range(count):
        for key in keys_of(node):
            other = first_with_key.setdefault(key, node)
            parent[find(node)] = find(other)
    members: dict[int, list[int]] = {}
    for node in range(count):
        members.setdefault(find(node), []).append(node)
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


def write_split_stream(
    pairs: Iterable[Pair], labels: Iterable[str | None], folder: Path, langs: tuple[str, str]
) -> dict[str, int]:
    """Write the split files from a stream of pairs and their split names (None: no
    split, a duplicate); only one pair is held at a time. Returns the pairs per split.

    The same files as `write_split` with the same pairs: each goes through a temporary
    file, and a file whose content did not change is kept as it is (and its mtime)."""
    folder.mkdir(parents=True, exist_ok=True)
    targets = {
        (name, side): folder / f"{name}.{lang}"
        for name in SPLIT_NAMES
        for side, lang in enumerate(langs)
    }
    counts = dict.fromkeys(SPLIT_NAMES, 0)
    with contextlib.ExitStack() as stack:
        temporaries = {
            path: stack.enter_context(temporary_beside(path)) for path in targets.values()
        }
        streams = {
            key: stack.enter_context(open(temporaries[path], "wb")) for key, path in targets.items()
        }
        for pair, name in zip(pairs, labels, strict=True):
            if name is None:
                continue
            counts[name] += 1
            for side in (0, 1):
                streams[name, side].write(pair[side].encode("utf-8") + b"\n")
        for stream in streams.values():
            stream.close()
        for path, temporary in temporaries.items():
            _replace_if_changed(temporary, path)
    return counts


def _replace_if_changed(temporary: Path, path: Path) -> None:
    """Rename `temporary` to `path` unless `path` already holds the same bytes."""
    if path.is_file() and filecmp.cmp(temporary, path, shallow=False):
        return  # unchanged: keep the file (and its mtime) as it is
    replace(temporary, path)


def _write_lines(path: Path, lines: Sequence[str]) -> None:
    """Write the lines through a temporary file, so a parallel reader never sees half a file."""
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    if path.is_file() and path.read_bytes() == data:
        return  # unchanged: keep the file (and its mtime) as it is
    write_atomically(path, data)
