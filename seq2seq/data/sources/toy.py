"""`data.source.name=toy`: copy or reverse a random symbol sequence, generated in memory.

The source's option `task` picks the task (`ToyOptions`, `seq2seq.data.toy_tasks`): both sides
use the symbol vocabulary (4 specials + `vocab_size` letters), nothing is downloaded or
written, and the alignment is known: target position j copies source position j (copy,
the diagonal) or n − 1 − j (reverse, the anti-diagonal), so the alignment hook scores
attention against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from seq2seq import registry
from seq2seq.data.encode import encode_pairs
from seq2seq.data.prepare import PreparedData, finish
from seq2seq.data.settings import DataConfig, check_choice, check_positive
from seq2seq.data.sources.base import DataSource
from seq2seq.data.tokenizer import TOY_SYMBOLS, SymbolTokenizer
from seq2seq.data.toy_tasks import TASKS, ToySpec, gold_alignment, toy_splits

SIZE_KEYS = {"train": "train_size", "valid": "valid_size", "test": "test_size"}


@dataclass(frozen=True)
class ToyOptions:
    """The task, its symbols, the lengths of its sequences and the size of each split."""

    task: str = "reverse"  # "copy" | "reverse"
    vocab_size: int = 10  # number of symbols 'a', 'b', ...
    min_len: int = 3  # lengths uniform in [min_len, max_len]
    max_len: int = 12
    train_size: int = 10000
    valid_size: int = 500  # valid and test sequences are distinct and never occur in train
    test_size: int = 500


@registry.register("source", "toy", options=ToyOptions)
class ToySource(DataSource):
    """The copy and reverse tasks (module docstring)."""

    known_alignment = True

    def validate(self, cfg: DataConfig) -> None:
        options: ToyOptions = cfg.source_options
        check_choice("source.task", options.task, TASKS)
        if not 1 <= options.vocab_size <= len(TOY_SYMBOLS):
            raise ValueError(f"data.source.vocab_size must be in [1, {len(TOY_SYMBOLS)}]")
        check_positive("source.min_len", options.min_len)
        if options.max_len < options.min_len:
            raise ValueError("data.source.max_len must be >= data.source.min_len")
        if options.max_len > cfg.max_len:
            raise ValueError("data.source.max_len must be <= data.max_len")
        for key in SIZE_KEYS.values():
            check_positive(f"source.{key}", getattr(options, key))

    def prepare(self, cfg: DataConfig) -> PreparedData:
        options: ToyOptions = cfg.source_options
        spec = ToySpec(options.task, options.vocab_size, options.min_len, options.max_len)
        sizes = {split: getattr(options, key) for split, key in SIZE_KEYS.items()}
        tokenizer = SymbolTokenizer(options.vocab_size)
        encoded = {
            name: encode_pairs(pairs, tokenizer, tokenizer)
            for name, pairs in toy_splits(spec, sizes, cfg.seed).items()
        }
        return finish(cfg, encoded, tokenizer, tokenizer, None, {"toy_task": options.task})

    def alignment(self, cfg: Any, src_len: int) -> list[int]:
        """`cfg`: the data settings (a DataConfig, or the run's completed `data` section)."""
        return gold_alignment(cfg.source["task"], src_len)
