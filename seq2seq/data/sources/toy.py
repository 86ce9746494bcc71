"""`data.kind=toy`: copy or reverse a random symbol sequence, generated in memory.

`data.toy_task` picks the task (`seq2seq.data.toy`): both sides use the symbol vocabulary
(4 specials + `data.toy_vocab_size` letters), nothing is downloaded or written, and the
alignment is known: target position j copies source position j (copy, the diagonal) or
n − 1 − j (reverse, the anti-diagonal), so the alignment hook scores attention against it.
"""

from __future__ import annotations

from typing import Any

from seq2seq import registry
from seq2seq.data.encode import encode_pairs
from seq2seq.data.prepare import PreparedData, finish
from seq2seq.data.settings import DataConfig, check_choice, check_positive
from seq2seq.data.sources.base import DataSource
from seq2seq.data.tokenizer import TOY_SYMBOLS, SymbolTokenizer
from seq2seq.data.toy import TASKS, ToySpec, gold_alignment, toy_splits

SIZE_KEYS = {"train": "toy_train_size", "valid": "toy_valid_size", "test": "toy_test_size"}


@registry.register("source", "toy")
class ToySource(DataSource):
    """The copy and reverse tasks (module docstring)."""

    known_alignment = True

    def validate(self, cfg: DataConfig) -> None:
        check_choice("toy_task", cfg.toy_task, TASKS)
        if not 1 <= cfg.toy_vocab_size <= len(TOY_SYMBOLS):
            raise ValueError(f"data.toy_vocab_size must be in [1, {len(TOY_SYMBOLS)}]")
        check_positive("toy_min_len", cfg.toy_min_len)
        if cfg.toy_max_len < cfg.toy_min_len:
            raise ValueError("data.toy_max_len must be >= data.toy_min_len")
        if cfg.toy_max_len > cfg.max_len:
            raise ValueError("data.toy_max_len must be <= data.max_len")
        for key in SIZE_KEYS.values():
            check_positive(key, getattr(cfg, key))

    def prepare(self, cfg: DataConfig) -> PreparedData:
        spec = ToySpec(cfg.toy_task, cfg.toy_vocab_size, cfg.toy_min_len, cfg.toy_max_len)
        sizes = {split: getattr(cfg, key) for split, key in SIZE_KEYS.items()}
        tokenizer = SymbolTokenizer(cfg.toy_vocab_size)
        encoded = {
            name: encode_pairs(pairs, tokenizer, tokenizer)
            for name, pairs in toy_splits(spec, sizes, cfg.seed).items()
        }
        return finish(cfg, encoded, tokenizer, tokenizer, None, {"toy_task": cfg.toy_task})

    def alignment(self, cfg: Any, src_len: int) -> list[int]:
        return gold_alignment(cfg.toy_task, src_len)
