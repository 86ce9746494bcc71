"""`DataConfig`: every setting of the corpus pipeline, validated in one place.

A plain dataclass: Hydra registers it as the schema of the `data` config group, and tests
and scripts build it directly with keyword arguments. Invalid values raise a ValueError
naming the key as it is written on the command line (`data.valid_size must be > 0`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import unquote, urlsplit

from seq2seq.data.languages import is_chinese

KINDS = ("parallel", "toy")
TOY_TASKS = ("copy", "reverse")
MODEL_TYPES = ("unigram", "bpe", "char", "word")
MAX_TOY_SYMBOLS = 26  # the toy symbols are the letters 'a' ... 'z'
URL_SCHEMES = ("http", "https", "file")
DEFAULT_MAX_MEMBER_BYTES = 2 << 30  # 2 GiB: Tatoeba's largest pair is a few hundred MB
DEFAULT_MAX_LINE_BYTES = 1 << 20  # 1 MiB: Tatoeba's longest line is a few hundred bytes
SHA256_PATTERN = re.compile(r"[0-9a-fA-F]{64}")


@dataclass
class DataConfig:
    """Where the corpus comes from, how it is cleaned, split, cut into subwords and batched."""

    name: str = "tatoeba_zh_en"  # prepared files go to <root>/prepared/<name>/
    kind: str = "parallel"  # "parallel" (a downloaded corpus) | "toy" (generated in memory)
    # corpus
    url: str = "https://www.manythings.org/anki/cmn-eng.zip"
    member: str = "cmn.txt"  # file inside the zip; "" for a plain .txt/.tsv download
    src_lang: str = "zh"
    tgt_lang: str = "en"
    src_column: int = 1  # 0-based tab-separated column of the source sentence
    tgt_column: int = 0
    num_columns: int = 3  # a line with another number of columns is malformed
    licence: str = "CC-BY 2.0 France; Tatoeba (tatoeba.org), via manythings.org/anki"
    sha256: str | None = None  # pin the corpus file: any other content is refused
    max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES  # larger zip members are not read
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES  # a longer line is malformed, never held whole
    # cleaning
    traditional_to_simplified: bool = False  # OpenCC t2s on the Chinese side only
    max_malformed_share: float = 0.5  # more malformed lines than this: wrong file, stop
    max_pairs: int | None = None  # keep only the first N clean pairs (quick trials, tests)
    # split
    seed: int = 1234
    valid_size: int = 1000
    test_size: int = 1000
    # subwords (sentencepiece)
    joint_vocab: bool = False  # one model for both sides, of size src_vocab_size
    src_vocab_size: int = 4000
    tgt_vocab_size: int = 4000
    model_type: str = "unigram"  # "unigram" | "bpe" | "char" | "word"
    # A vocabulary size the training text cannot reach (sentencepiece makes fewer pieces from
    # it): false stops with the largest possible size in the message; true uses that largest
    # size, with a warning naming the size asked and the size used.
    vocab_cap: bool = False
    # Train sentencepiece on at most this many sentences of the training side, a random
    # sample (seeded by data.seed) when it has more; null: every sentence. A training side
    # that fits is trained on whole, exactly as before samples existed.
    spm_sample_size: int | None = 1_000_000
    # encoding
    encode_workers: int | None = None  # processes encoding a large split; null: the cores (<= 8)
    # batching
    max_tokens: int = 4096  # batch_size * longest side (with EOS/BOS) never exceeds this
    max_len: int = 100  # longer training pairs (subwords) are dropped, valid/test ids cut
    # toy tasks
    toy_task: str = "reverse"  # "copy" | "reverse"
    toy_vocab_size: int = 10  # number of symbols 'a', 'b', ...
    toy_min_len: int = 3
    toy_max_len: int = 12
    toy_train_size: int = 10000
    toy_valid_size: int = 500
    toy_test_size: int = 500
    # guided alignment (alignment=guided): a Pharaoh file of word links, one line per line of
    # the training split (train.<src_lang> of the prepared folder); null: made otherwise
    alignments: str | None = None
    # files
    root: str = "data"  # raw/ and prepared/ go below this folder
    # A prepared file that differs from its preparation's record (size, hash, ids outside
    # the vocabulary, offsets out of order): true prepares it again from the corpus with a
    # warning naming it; false stops with one line naming it. Never trained on either way.
    rebuild: bool = True

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first invalid key."""
        _check_choice("kind", self.kind, KINDS)
        check_plain_name("data.name", self.name)
        _check_positive("max_tokens", self.max_tokens)
        _check_positive("max_len", self.max_len)
        if self.max_tokens < self.max_len + 1:
            raise ValueError(
                f"data.max_tokens ({self.max_tokens}) must be >= data.max_len + 1 "
                f"({self.max_len + 1}), so that the longest allowed pair fits in a batch"
            )
        if self.alignments is not None and not str(self.alignments).strip():
            raise ValueError("data.alignments must be the path of a Pharaoh file, or null")
        if self.kind == "toy":
            self._validate_toy()
        else:
            self._validate_parallel()

    def _validate_parallel(self) -> None:
        file_name_from_url(self.url)
        if self.sha256 is not None and not SHA256_PATTERN.fullmatch(str(self.sha256)):
            raise ValueError(
                f"data.sha256 must be null or 64 hexadecimal digits, got {self.sha256!r}"
            )
        _check_positive("max_member_bytes", self.max_member_bytes)
        _check_positive("max_line_bytes", self.max_line_bytes)
        _check_positive("num_columns", self.num_columns)
        for key in ("src_column", "tgt_column"):
            column = getattr(self, key)
            if not 0 <= column < self.num_columns:
                raise ValueError(
                    f"data.{key} must be in [0, data.num_columns={self.num_columns}), got {column}"
                )
        if self.src_column == self.tgt_column:
            raise ValueError("data.src_column and data.tgt_column must differ")
        if not self.src_lang or not self.tgt_lang or self.src_lang == self.tgt_lang:
            raise ValueError(
                "data.src_lang and data.tgt_lang must be non-empty and differ "
                f"(they name the split files), got {self.src_lang!r} and {self.tgt_lang!r}"
            )
        if self.traditional_to_simplified and not self.chinese_side():
            raise ValueError(
                "data.traditional_to_simplified needs a Chinese side "
                "(a src_lang or tgt_lang such as zh, cmn or zh-Hant)"
            )
        if not 0.0 <= self.max_malformed_share <= 1.0:
            raise ValueError(
                f"data.max_malformed_share must be in [0, 1], got {self.max_malformed_share}"
            )
        _check_positive("valid_size", self.valid_size)
        _check_positive("test_size", self.test_size)
        if self.max_pairs is not None and self.max_pairs <= self.valid_size + self.test_size:
            raise ValueError(
                f"data.max_pairs ({self.max_pairs}) must exceed data.valid_size + data.test_size"
            )
        _check_choice("model_type", self.model_type, MODEL_TYPES)
        for key in ("spm_sample_size", "encode_workers"):
            if getattr(self, key) is not None:
                _check_positive(key, getattr(self, key))
        for key in ("src_vocab_size", "tgt_vocab_size"):
            if getattr(self, key) <= 4:
                raise ValueError(f"data.{key} must be > 4 (the four special tokens)")

    def _validate_toy(self) -> None:
        _check_choice("toy_task", self.toy_task, TOY_TASKS)
        if not 1 <= self.toy_vocab_size <= MAX_TOY_SYMBOLS:
            raise ValueError(f"data.toy_vocab_size must be in [1, {MAX_TOY_SYMBOLS}]")
        _check_positive("toy_min_len", self.toy_min_len)
        if self.toy_max_len < self.toy_min_len:
            raise ValueError("data.toy_max_len must be >= data.toy_min_len")
        if self.toy_max_len > self.max_len:
            raise ValueError("data.toy_max_len must be <= data.max_len")
        for key in ("toy_train_size", "toy_valid_size", "toy_test_size"):
            _check_positive(key, getattr(self, key))

    def chinese_side(self) -> str | None:
        """ "src" or "tgt" when that side is Chinese, else None."""
        if is_chinese(self.src_lang):
            return "src"
        if is_chinese(self.tgt_lang):
            return "tgt"
        return None

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> DataConfig:
        """Build from a dict or an OmegaConf DictConfig; an unknown key is a ValueError."""
        known = {field.name for field in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown data config key(s): {', '.join(unknown)}")
        return cls(**{key: values[key] for key in values})


def file_name_from_url(url: str) -> str:
    """The file name a corpus URL is saved under: its last path segment, unquoted.

    `https://x.org/anki/cmn-eng.zip` -> `cmn-eng.zip`. Raises ValueError (naming `data.url`)
    for a scheme other than http, https or file, or when the last segment is not a plain
    file name once unquoted (empty, `.`, `..`, or holding a `/`, `\\` or NUL, as `%2F`
    would), so that the download can never land outside `raw/`.
    """
    parts = urlsplit(str(url))
    if parts.scheme.lower() not in URL_SCHEMES:
        raise ValueError(
            f"data.url must start with one of {', '.join(s + '://' for s in URL_SCHEMES)}; "
            f"got {url!r}"
        )
    segment = parts.path.rstrip("/").rsplit("/", 1)[-1]
    name = unquote(segment)
    if not name:
        raise ValueError(f"data.url must end in a file name, got {url!r}")
    check_plain_name("data.url", name, f" (the file name {name!r} of {url!r})")
    return name


def check_plain_name(key: str, name: str, context: str = "") -> None:
    """Raise ValueError naming `key` unless `name` is one plain file or folder name.

    Plain: not empty, not `.` or `..`, no path separator (`/`, `\\`) and no NUL byte, so
    that joining it to a folder stays inside that folder.
    """
    if name in ("", ".", "..") or any(char in name for char in "/\\\0"):
        raise ValueError(
            f"{key} must be a plain name (not empty, '.' or '..', and without '/', '\\' or "
            f"NUL){context}; got {name!r}"
        )


def _check_positive(key: str, value: int) -> None:
    if value <= 0:
        raise ValueError(f"data.{key} must be > 0, got {value}")


def _check_choice(key: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"data.{key} must be one of {', '.join(choices)}; got {value!r}")
