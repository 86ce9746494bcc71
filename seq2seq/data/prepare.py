"""`prepare(cfg)`: from a corpus URL (or a toy task) to encoded train / valid / test splits.

    fetch -> read and clean -> leakage-free split -> write text -> sentencepiece (train or
    reuse) -> encode (or load the cached encoding) -> drop over-long training pairs and
    truncate over-long valid / test sentences

Everything written goes to `<root>/prepared/<name>/`: the split text files
(`train.zh`, `train.en`, ...), the subword models `spm_<lang>_<hash>.model` and the encoded
splits `encoded_<split>_<hash>.npz`, both cached by a hash of their inputs, so a second call
is fast and a changed setting recomputes only what it affects. The folder is locked
(`flock`, where the platform has it) while it is written, so runs preparing the same corpus
at once (a parallel sweep) take turns and end with the same files. Toy tasks are generated
in memory and write nothing.

Training pairs with a side longer than `data.max_len` pieces are dropped. Valid and test
pairs are never dropped (the evaluation sets keep their size): their ids are cut to
`data.max_len` pieces on each side, so decoding and the teacher-forced valid loss see at
most that many positions, while their text lines, the BLEU references, stay whole. The
summary counts the cut sentences (`valid_src_truncated`, ...).

A vocabulary size larger than the training text supports stops preparation with a
`VocabularySizeError` naming the key and the largest size; with `data.vocab_cap=true` that
largest size is used instead, with a warning naming both sizes (see
`seq2seq.data.tokenizer`), and the summary's `src_vocab_size` / `tgt_vocab_size` show it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from seq2seq.data.batching import ParallelData
from seq2seq.data.config import DataConfig
from seq2seq.data.corpus import (
    CorpusError,
    CorpusStats,
    Pair,
    read_pairs,
    traditional_to_simplified,
)
from seq2seq.data.encode import encode_pairs, encode_pairs_cached
from seq2seq.data.fetch import fetch, folder_lock
from seq2seq.data.split import SplitPairs, split_pairs, write_split
from seq2seq.data.tokenizer import SubwordTokenizer, SymbolTokenizer, Tokenizer
from seq2seq.data.toy import ToySpec, toy_splits

log = logging.getLogger(__name__)

SPLITS = ("train", "valid", "test")


@dataclass
class PreparedData:
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    train: ParallelData
    valid: ParallelData
    test: ParallelData
    summary: dict[str, Any]
    folder: Path | None = None  # where the prepared files are; None for toy tasks

    def split(self, name: str) -> ParallelData:
        if name not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}; got {name!r}")
        return getattr(self, name)


def prepare(cfg: DataConfig | Mapping[str, Any]) -> PreparedData:
    """Prepare the data described by `cfg` (a DataConfig, a dict or a DictConfig)."""
    if not isinstance(cfg, DataConfig):
        cfg = DataConfig.from_mapping(cfg)
    cfg.validate()
    return _prepare_toy(cfg) if cfg.kind == "toy" else _prepare_parallel(cfg)


def _prepare_parallel(cfg: DataConfig) -> PreparedData:
    root = Path(cfg.root)
    folder = root / "prepared" / cfg.name
    corpus_path = fetch(cfg.url, cfg.member or None, root=root, sha256=cfg.sha256)
    pairs, stats = read_pairs(
        corpus_path,
        member=cfg.member or None,
        src_column=cfg.src_column,
        tgt_column=cfg.tgt_column,
        num_columns=cfg.num_columns,
        max_malformed_share=cfg.max_malformed_share,
        max_member_bytes=cfg.max_member_bytes,
        **_converters(cfg),
    )
    if cfg.max_pairs is not None:
        pairs = pairs[: cfg.max_pairs]
    try:
        split = split_pairs(
            pairs, valid_size=cfg.valid_size, test_size=cfg.test_size, seed=cfg.seed
        )
    except ValueError as error:  # valid + test sizes the corpus cannot fill
        raise CorpusError(f"{corpus_path}: {error}") from error
    with folder_lock(folder):
        write_split(split, folder, cfg.src_lang, cfg.tgt_lang)
        src_tokenizer, tgt_tokenizer = _subword_tokenizers(cfg, split.train, folder)
        encoded = {
            name: encode_pairs_cached(pairs_of_split, src_tokenizer, tgt_tokenizer, folder, name)
            for name, pairs_of_split in split.by_name().items()
        }
    corpus_summary = _corpus_summary(stats, split)
    return _finish(cfg, encoded, src_tokenizer, tgt_tokenizer, folder, corpus_summary)


def _prepare_toy(cfg: DataConfig) -> PreparedData:
    spec = ToySpec(cfg.toy_task, cfg.toy_vocab_size, cfg.toy_min_len, cfg.toy_max_len)
    sizes = {"train": cfg.toy_train_size, "valid": cfg.toy_valid_size, "test": cfg.toy_test_size}
    tokenizer = SymbolTokenizer(cfg.toy_vocab_size)
    encoded = {
        name: encode_pairs(pairs, tokenizer, tokenizer)
        for name, pairs in toy_splits(spec, sizes, cfg.seed).items()
    }
    return _finish(cfg, encoded, tokenizer, tokenizer, None, {"toy_task": cfg.toy_task})


def _converters(cfg: DataConfig) -> dict[str, Any]:
    """`convert_src` / `convert_tgt` for read_pairs: t2s on the Chinese side when asked."""
    if not cfg.traditional_to_simplified:
        return {}
    return {f"convert_{cfg.chinese_side()}": traditional_to_simplified()}


def _subword_tokenizers(
    cfg: DataConfig, train: Sequence[Pair], folder: Path
) -> tuple[SubwordTokenizer, SubwordTokenizer]:
    """Train (or reuse) sentencepiece on the training split: per side, or one joint model."""
    sources = [src for src, _ in train]
    targets = [tgt for _, tgt in train]
    if cfg.joint_vocab:
        joint_lang = f"{cfg.src_lang}-{cfg.tgt_lang}"
        langs = [cfg.src_lang, cfg.tgt_lang]
        joint = _subword_tokenizer(
            cfg, sources + targets, joint_lang, "src_vocab_size", folder, text_langs=langs
        )
        return joint, joint
    src = _subword_tokenizer(cfg, sources, cfg.src_lang, "src_vocab_size", folder)
    tgt = _subword_tokenizer(cfg, targets, cfg.tgt_lang, "tgt_vocab_size", folder)
    return src, tgt


def _subword_tokenizer(
    cfg: DataConfig, texts: list[str], lang: str, size_key: str, folder: Path, **options: Any
) -> SubwordTokenizer:
    """One sentencepiece model of the size `data.<size_key>` asks for or, with
    data.vocab_cap, of the largest size the text supports when that is less (a warning)."""
    asked = getattr(cfg, size_key)
    vocab_key = f"data.{size_key}" + (" (the joint vocabulary size)" if cfg.joint_vocab else "")
    tokenizer = SubwordTokenizer.train(
        texts,
        lang=lang,
        vocab_size=asked,
        folder=folder,
        model_type=cfg.model_type,
        vocab_key=vocab_key,
        vocab_cap=cfg.vocab_cap,
        **options,
    )
    if tokenizer.vocab_size != asked:
        log.warning(
            "data.vocab_cap=true: %s=%d is more than the '%s' training text supports; "
            "using %d pieces, the largest size it does",
            vocab_key, asked, lang, tokenizer.vocab_size,
        )  # fmt: skip
    return tokenizer


def _finish(
    cfg: DataConfig,
    encoded: dict[str, ParallelData],
    src_tokenizer: Tokenizer,
    tgt_tokenizer: Tokenizer,
    folder: Path | None,
    summary: dict[str, Any],
) -> PreparedData:
    """Drop over-long training pairs, truncate over-long valid / test ones, then summarise."""
    train, dropped = drop_long_pairs(encoded["train"], cfg.max_len)
    if dropped:
        log.info("dropped %d training pairs longer than data.max_len=%d", dropped, cfg.max_len)
    valid, valid_cut = truncate_long_pairs(encoded["valid"], cfg.max_len)
    test, test_cut = truncate_long_pairs(encoded["test"], cfg.max_len)
    truncated = {**_truncation_summary("valid", valid_cut), **_truncation_summary("test", test_cut)}
    if any(truncated.values()):
        log.warning(
            "valid/test sentences longer than data.max_len=%d pieces are cut to it for decoding "
            "and the valid loss (their references stay whole): %s",
            cfg.max_len,
            ", ".join(f"{key} {count}" for key, count in truncated.items()),
        )
    prepared = PreparedData(
        src_tokenizer, tgt_tokenizer, train, valid, test, summary={}, folder=folder
    )
    data_summary = _data_summary(cfg, prepared, dropped)
    prepared.summary = {"name": cfg.name, **summary, **data_summary, **truncated}
    return prepared


def drop_long_pairs(data: ParallelData, max_len: int) -> tuple[ParallelData, int]:
    """Keep the pairs whose two sides have at most `max_len` pieces; also return the drop count."""
    keep = [
        index
        for index, (src, tgt) in enumerate(data.examples)
        if len(src) <= max_len and len(tgt) <= max_len
    ]
    return data.select(keep), len(data) - len(keep)


def truncate_long_pairs(data: ParallelData, max_len: int) -> tuple[ParallelData, tuple[int, int]]:
    """Cut each side's ids to `max_len` pieces, keeping every pair and every text line.

    Returns the data and how many sources and targets were cut. The text lines (the
    references BLEU is computed against) are left whole.
    """
    examples = [(src[:max_len], tgt[:max_len]) for src, tgt in data.examples]
    src_cut = sum(len(src) > max_len for src, _ in data.examples)
    tgt_cut = sum(len(tgt) > max_len for _, tgt in data.examples)
    if not src_cut and not tgt_cut:
        return data, (0, 0)
    return ParallelData(examples, data.src_lines, data.tgt_lines), (src_cut, tgt_cut)


def _truncation_summary(split_name: str, counts: tuple[int, int]) -> dict[str, int]:
    src_cut, tgt_cut = counts
    return {f"{split_name}_src_truncated": src_cut, f"{split_name}_tgt_truncated": tgt_cut}


def _corpus_summary(stats: CorpusStats, split: SplitPairs) -> dict[str, Any]:
    return {
        "lines_read": stats.lines_read,
        "malformed_skipped": stats.malformed,
        "control_char_skipped": stats.control_chars,
        "converted_to_simplified": stats.converted_to_simplified,
        "duplicates_removed": split.duplicates_removed,
        "sentence_groups": split.num_groups,
        "near_duplicate_groups_joined": split.near_duplicates_joined,
    }


def _data_summary(cfg: DataConfig, prepared: PreparedData, dropped: int) -> dict[str, Any]:
    """Sizes, vocabularies, lengths in pieces (no EOS) and the padding of epoch-0 batches."""
    train = prepared.train
    sampler = train.sampler(cfg.max_tokens, shuffle=True, seed=cfg.seed)
    batches = sampler.batches(epoch=0)
    return {
        "direction": f"{prepared.src_tokenizer.lang} -> {prepared.tgt_tokenizer.lang}",
        "train_size": len(train),
        "valid_size": len(prepared.valid),
        "test_size": len(prepared.test),
        "dropped_by_max_len": dropped,
        "src_vocab_size": prepared.src_tokenizer.vocab_size,
        "tgt_vocab_size": prepared.tgt_tokenizer.vocab_size,
        "mean_src_len": _mean_pieces(train.src_lengths),
        "mean_tgt_len": _mean_pieces(train.tgt_lengths),
        "max_eval_src_len": _longest(prepared, "src"),
        "max_eval_tgt_len": _longest(prepared, "tgt"),
        "max_tokens": cfg.max_tokens,
        "train_batches": len(batches),
        "padding_ratio": round(sampler.padding_ratio(batches), 4),
    }


def _mean_pieces(batch_lengths: Sequence[int]) -> float:
    """Mean length in pieces, from lengths that include one EOS/BOS."""
    return round(float(np.mean(batch_lengths)) - 1.0, 2) if batch_lengths else 0.0


def _longest(prepared: PreparedData, side: str) -> int:
    """Longest valid/test sentence of `side` ("src" | "tgt") in pieces."""
    lengths = [
        length - 1
        for data in (prepared.valid, prepared.test)
        for length in getattr(data, f"{side}_lengths")
    ]
    return max(lengths, default=0)
