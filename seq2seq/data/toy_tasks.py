"""Toy tasks with a known alignment: copy or reverse a random symbol sequence.

Sequences are drawn in memory from a seed: lengths uniform in [min_len, max_len], symbols
uniform over the first `num_symbols` letters, written as space-separated text ("c a d").
Valid and test use their own random streams and hold distinct sequences that never occur
in train, so a model must generalise rather than remember.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seq2seq.data.corpus import Pair
from seq2seq.data.tokenizer import TOY_SYMBOLS

TASKS = ("copy", "reverse")
SPLIT_STREAMS = {"train": 0, "valid": 1, "test": 2}  # second word of each split's rng seed
MAX_DRAWS_PER_EXAMPLE = 100


@dataclass
class ToySpec:
    task: str  # "copy" | "reverse"
    num_symbols: int
    min_len: int
    max_len: int

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"toy task must be one of {', '.join(TASKS)}; got {self.task!r}")
        if not 1 <= self.num_symbols <= len(TOY_SYMBOLS):
            raise ValueError(f"num_symbols must be in [1, {len(TOY_SYMBOLS)}]")
        if not 1 <= self.min_len <= self.max_len:
            raise ValueError(f"need 1 <= min_len <= max_len, got {self.min_len}, {self.max_len}")


def target_for(task: str, source: list[str]) -> list[str]:
    return list(source) if task == "copy" else source[::-1]


def gold_alignment(task: str, src_len: int) -> list[int]:
    """Source position that target position j copies, for j = 0 .. src_len - 1 (EOS excluded).

    Copy aligns the diagonal (j -> j), reverse the anti-diagonal (j -> src_len - 1 - j).
    """
    if task not in TASKS:
        raise ValueError(f"toy task must be one of {', '.join(TASKS)}; got {task!r}")
    positions = list(range(src_len))
    return positions if task == "copy" else positions[::-1]


def toy_splits(spec: ToySpec, sizes: dict[str, int], seed: int) -> dict[str, list[Pair]]:
    """Pairs for each split in `sizes` ("train", "valid", "test").

    Valid and test sequences are distinct and disjoint from each other; train may repeat a
    sequence but never contains one of valid or test.
    """
    held_out: set[str] = set()
    splits = {}
    for name in ("valid", "test"):
        sources = _draw(spec, sizes[name], _rng(seed, name), exclude=held_out, distinct=True)
        held_out.update(sources)
        splits[name] = sources
    splits["train"] = _draw(
        spec, sizes["train"], _rng(seed, "train"), exclude=held_out, distinct=False
    )
    return {
        name: [(source, " ".join(target_for(spec.task, source.split()))) for source in splits[name]]
        for name in ("train", "valid", "test")
    }


def _rng(seed: int, split: str) -> np.random.Generator:
    return np.random.default_rng([seed, SPLIT_STREAMS[split]])


def _draw(
    spec: ToySpec, count: int, rng: np.random.Generator, exclude: set[str], distinct: bool
) -> list[str]:
    """`count` random source sentences not in `exclude` (and all different when `distinct`)."""
    sources: list[str] = []
    seen = set(exclude)
    for _ in range(MAX_DRAWS_PER_EXAMPLE * count):
        length = int(rng.integers(spec.min_len, spec.max_len + 1))
        symbols = rng.integers(0, spec.num_symbols, size=length)  # (length,)
        sentence = " ".join(TOY_SYMBOLS[s] for s in symbols)
        if sentence not in seen:
            sources.append(sentence)
            if distinct:
                seen.add(sentence)
        if len(sources) == count:
            return sources
    raise ValueError(
        f"could not draw {count} toy sequences outside the held-out ones: the space of "
        f"{spec.num_symbols} symbols with lengths {spec.min_len}..{spec.max_len} is too small; "
        "raise data.source.vocab_size or data.source.max_len, or lower the split sizes"
    )
