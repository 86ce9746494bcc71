"""`DataConfig`: every setting of the corpus pipeline, validated in one place.

A plain dataclass: Hydra registers it as the schema of the `data` config group, and tests
and scripts build it directly with keyword arguments. Invalid values raise a ValueError
naming the key as it is written on the command line (`data.valid_size must be > 0`).

`data.kind` names the source of the pairs, a component of the registry's "source" group
(`seq2seq.data.sources`): `parallel` (a tab-separated corpus file or zip member, split by
hashes), `text_pair` (given train / valid / test files, one sentence a line) or `toy`
(copy / reverse, generated in memory), or a plugin's. The settings common to every run
are checked here; each source checks the keys it reads (`DataSource.validate`), with the
shared corpus checks of `check_corpus_settings`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import unquote, urlsplit

from seq2seq import registry
from seq2seq.data.languages import is_chinese

MODEL_TYPES = ("unigram", "bpe", "char", "word")
URL_SCHEMES = ("http", "https", "file")
DEFAULT_MAX_MEMBER_BYTES = 2 << 30  # 2 GiB: Tatoeba's largest pair is a few hundred MB
DEFAULT_MAX_LINE_BYTES = 1 << 20  # 1 MiB: Tatoeba's longest line is a few hundred bytes


@dataclass
class DataConfig:
    """Where the corpus comes from, how it is cleaned, split, cut into subwords and batched."""

    name: str = "tatoeba_zh_en"  # prepared files go to <root>/prepared/<name>/
    # the source (seq2seq.data.sources): "parallel" (a downloaded tab-separated corpus) |
    # "text_pair" (given files, one sentence a line) | "toy" (generated in memory) | a plugin's
    kind: str = "parallel"
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
    # kind=text_pair: each split's two files, `<prefix>.<src_lang>` and `<prefix>.<tgt_lang>`,
    # line n of one the translation of line n of the other (the files' splits, not hashed)
    train_prefix: str | None = None
    valid_prefix: str | None = None
    test_prefix: str | None = None
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
        source = data_source(self.kind)
        check_plain_name("data.name", self.name)
        check_positive("max_tokens", self.max_tokens)
        check_positive("max_len", self.max_len)
        if self.max_tokens < self.max_len + 1:
            raise ValueError(
                f"data.max_tokens ({self.max_tokens}) must be >= data.max_len + 1 "
                f"({self.max_len + 1}), so that the longest allowed pair fits in a batch"
            )
        if self.alignments is not None and not str(self.alignments).strip():
            raise ValueError("data.alignments must be the path of a Pharaoh file, or null")
        source.validate(self)

    def check_corpus_settings(self) -> None:
        """The checks of every source whose text is cleaned and cut into subwords: line
        limits, languages, conversion, the share of skipped lines, the subword settings."""
        check_positive("max_line_bytes", self.max_line_bytes)
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
        check_choice("model_type", self.model_type, MODEL_TYPES)
        for key in ("spm_sample_size", "encode_workers"):
            if getattr(self, key) is not None:
                check_positive(key, getattr(self, key))
        for key in ("src_vocab_size", "tgt_vocab_size"):
            if getattr(self, key) <= 4:
                raise ValueError(f"data.{key} must be > 4 (the four special tokens)")

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


def data_source(kind: str) -> Any:
    """The source registered for `data.kind` (a `seq2seq.data.sources.DataSource`); a
    ValueError names data.kind and the registered sources."""
    try:
        return registry.get("source", kind).builder()
    except registry.UnknownComponent:
        check_choice("kind", kind, registry.names("source"))
        raise


def check_positive(key: str, value: int) -> None:
    if value <= 0:
        raise ValueError(f"data.{key} must be > 0, got {value}")


def check_choice(key: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"data.{key} must be one of {', '.join(choices)}; got {value!r}")
