"""`DataConfig`: every setting of the corpus pipeline, validated in one place.

A plain dataclass: Hydra registers it as the schema of the `data` config group, and tests
and scripts build it directly with keyword arguments. Invalid values raise a ValueError
naming the key as it is written on the command line (`data.valid_size must be > 0`).

`data.source` says where the pairs come from: a node, the name of a source registered in
the registry's "source" group (`seq2seq.data.sources`, or a plugin's) and that source's
options, declared in a dataclass beside its class and completed and checked as an
attention's score and region are (`seq2seq.option_rules.checked_node`):

    source: {name: tabular, url: ..., member: cmn.txt, src_column: 1, ...}  # split by hashes
    source: {name: text_pair, train_prefix: ..., valid_prefix: ..., test_prefix: ...}
    source: {name: toy, task: reverse, vocab_size: 10, min_len: 3, ...}

A bare name (`data.source=toy`) is that source with its default options. `data.documents`
(null: off) turns each split of a corpus source into documents: pseudo-documents of a few
consecutive or shuffled pairs, or the corpus's own documents where its source marks them
(`text_pair` with `document_marks`), joined on both sides or read as the context of each
sentence (`DocumentsOptions`, built by `seq2seq.data.documents`). The other keys
are those of the shared pipeline: languages, cleaning, the split, subwords, batching and
files (each source reads the ones it needs: the toy tasks only the seed, the lengths and
the batching). They are checked here; each source checks its options and how they fit the
rest (`DataSource.validate`), with the shared checks of the cleaned corpora
(`check_corpus_settings`).

Before `data.source` the source's keys were flat in `data` (`data.kind=parallel`,
`data.url`, `data.toy_task`, ...): `MOVED_KEYS` says where each went.
`seq2seq.config.stored` migrates old configs with it, and the preparation records of
prepared folders stay keyed by the old layout (`flat_settings`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any
from urllib.parse import unquote, urlsplit

from seq2seq import registry
from seq2seq.data.languages import is_chinese
from seq2seq.option_rules import at_least, checked_node, checked_options

MODEL_TYPES = ("unigram", "bpe", "char", "word")
URL_SCHEMES = ("http", "https", "file")
DEFAULT_MAX_MEMBER_BYTES = 2 << 30  # 2 GiB: Tatoeba's largest pair is a few hundred MB
DEFAULT_MAX_LINE_BYTES = 1 << 20  # 1 MiB: Tatoeba's longest line is a few hundred bytes
SOURCE_KEY = "data.source"
DEFAULT_SOURCE = "tabular"
# The keys of `data` that moved into the source's node, old -> new (below `data.`).
MOVED_KEYS = {
    "kind": "source.name",
    **{key: f"source.{key}" for key in (
        "url", "member", "src_column", "tgt_column", "num_columns", "licence", "sha256",
        "max_member_bytes", "max_line_bytes", "max_malformed_share",
        "train_prefix", "valid_prefix", "test_prefix",
    )},
    **{f"toy_{key}": f"source.{key}" for key in (
        "task", "vocab_size", "min_len", "max_len", "train_size", "valid_size", "test_size",
    )},
}  # fmt: skip
RENAMED_SOURCES = {"parallel": "tabular"}  # old data.kind -> data.source.name
DOCUMENTS_KEY = "data.documents"
# Keys added after the record key's layout was fixed: left out of `flat_settings` while
# null (off), so that the folders prepared without them keep their records.
KEYED_WHEN_SET = ("documents", "byte_fallback", "character_coverage")


class DocumentOrder(Enum):
    """Which pairs of a split a pseudo-document joins."""

    consecutive = "consecutive"  # the split's pairs in file order
    random = "random"  # the split's pairs after a shuffle seeded by data.seed


class DocumentBoundaries(Enum):
    """Where a document of `data.documents` may end."""

    drawn = "drawn"  # anywhere: groups of k pairs, k drawn from the range (pseudo-documents)
    corpus = "corpus"  # never across a document of the corpus (its source marks them)


@dataclass(frozen=True)
class DocumentsOptions:
    """`data.documents`: each split's pairs grouped into documents of k sentences, k drawn
    uniformly from [min_sentences, max_sentences] per document (the last document of a
    split, or with `boundaries: corpus` of a corpus document, takes what is left);
    `seq2seq.data.documents`. `context: null` joins a document's sentences on both sides
    into one pair; `context: c` keeps one pair per sentence, its source preceded by the c
    (at most) sentences before it in its document, its target its own translation."""

    min_sentences: int = field(default=1, metadata=at_least(1))
    max_sentences: int = field(default=6, metadata=at_least(1))
    order: DocumentOrder = DocumentOrder.consecutive
    boundaries: DocumentBoundaries = DocumentBoundaries.drawn
    context: int | None = field(default=None, metadata=at_least(1))


# Options of a source added after its record layout was fixed: keyed only when set.
SOURCE_KEYS_WHEN_SET = {"document_marks": None}
# Options of data.documents added after its record layout was fixed: keyed only when set.
DOCUMENT_KEYS_WHEN_SET = {"boundaries": DocumentBoundaries.drawn.name, "context": None}


@dataclass
class DataConfig:
    """Where the corpus comes from, how it is cleaned, split, cut into subwords and batched."""

    name: str = "tatoeba_zh_en"  # prepared files go to <root>/prepared/<name>/
    # where the pairs come from: {name: <source>, <its options>} (module docstring):
    # tabular (a downloaded tab-separated corpus) | text_pair (given files, one sentence a
    # line) | toy (generated in memory) | a plugin's
    source: Any = field(default_factory=lambda: {"name": DEFAULT_SOURCE})
    # documents of a corpus source (DocumentsOptions): null (off), or
    # {min_sentences: 1, max_sentences: 6, order: consecutive | random,
    #  boundaries: drawn | corpus, context: null | c}; the sentences of a document are
    # joined by the one piece <sep> (both sides, or with context the source alone)
    documents: Any = None
    src_lang: str = "zh"
    tgt_lang: str = "en"
    # cleaning (the corpus sources)
    traditional_to_simplified: bool = False  # OpenCC t2s on the Chinese side only
    max_pairs: int | None = None  # keep only the first N clean pairs (quick trials, tests)
    # split (tabular: by hashes; the toy tasks draw their splits from the seed)
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
    # A character the subword model lacks (unseen in training, or past the 0.9995 character
    # coverage of Chinese): false makes it <unk>; true spells it in its UTF-8 bytes, pieces
    # <0x00>..<0xFF> of the vocabulary (sentencepiece's byte fallback), so no text is lost.
    byte_fallback: bool = False
    # The share of the training side's characters the subword model must cover, the rest
    # becoming <unk> (sentencepiece's character_coverage, in (0, 1]); null: 0.9995 for a
    # language written without spaces (Chinese, Japanese), 1 for the others.
    character_coverage: float | None = None
    # Train sentencepiece on at most this many sentences of the training side, a random
    # sample (seeded by data.seed) when it has more; null: every sentence. A training side
    # that fits is trained on whole, exactly as before samples existed.
    spm_sample_size: int | None = 1_000_000
    # encoding
    encode_workers: int | None = None  # processes encoding a large split; null: the cores (<= 8)
    # batching: here, beside the corpus, as each data preset sizes the batches of its
    # sentences (and seq2seq-data's summary counts them); the trainer batches with them
    max_tokens: int = 4096  # batch_size * longest side (with EOS/BOS) never exceeds this
    max_len: int = 100  # longer training pairs (subwords) are dropped, valid/test ids cut
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
        """Complete the source's node (every option, `source_node`) and raise ValueError
        naming the first invalid key."""
        self.source = source_node(self.source)
        self.documents = documents_node(self.documents)
        source = data_source(self.source_name)
        if self.documents is not None and not source.takes_documents:
            raise ValueError(
                f"{DOCUMENTS_KEY} needs a corpus source (tabular, text_pair, hf, ...); "
                f"data.source.name={self.source_name} has no sentences to join: set it to null"
            )
        if self._documents_from_corpus() and not source.marks_documents(self):
            raise ValueError(
                f"{DOCUMENTS_KEY}.boundaries=corpus needs a corpus whose source marks its "
                f"documents (data.source.name=text_pair with data.source.document_marks="
                f"blank_lines or docids); data.source.name={self.source_name} marks none"
            )
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

    def _documents_from_corpus(self) -> bool:
        return self.documents is not None and self.documents["boundaries"] == "corpus"

    @property
    def source_name(self) -> str:
        """The chosen source's registered name (`tabular`, `toy`, ...)."""
        return self.source["name"]

    @property
    def source_options(self) -> Any:
        """The chosen source's options as its options dataclass (`TabularOptions`, ...), or
        None for a source without options."""
        schema = registry.get("source", self.source_name).options
        values = {key: value for key, value in self.source.items() if key != "name"}
        return None if schema is None else schema(**values)

    @property
    def documents_options(self) -> DocumentsOptions | None:
        """`data.documents` as its options dataclass, or None when it is off."""
        if self.documents is None:
            return None
        order = DocumentOrder[self.documents["order"]]
        boundaries = DocumentBoundaries[self.documents["boundaries"]]
        return DocumentsOptions(**{**self.documents, "order": order, "boundaries": boundaries})

    def check_corpus_settings(self) -> None:
        """The checks of every source whose text is cleaned and cut into subwords:
        languages, conversion, the subword settings."""
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
        check_choice("model_type", self.model_type, MODEL_TYPES)
        for key in ("spm_sample_size", "encode_workers"):
            if getattr(self, key) is not None:
                check_positive(key, getattr(self, key))
        for key in ("src_vocab_size", "tgt_vocab_size"):
            if getattr(self, key) <= 4:
                raise ValueError(f"data.{key} must be > 4 (the four special tokens)")
        coverage = self.character_coverage
        number = isinstance(coverage, int | float) and not isinstance(coverage, bool)
        if coverage is not None and not (number and 0 < coverage <= 1):  # NaN fails too
            raise ValueError(f"data.character_coverage must be in (0, 1], got {coverage!r}")

    def chinese_side(self) -> str | None:
        """ "src" or "tgt" when that side is Chinese, else None."""
        if is_chinese(self.src_lang):
            return "src"
        if is_chinese(self.tgt_lang):
            return "tgt"
        return None

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> DataConfig:
        """Build from plain data (a composed config is converted at the door); an unknown
        key is a ValueError (an old key's names its new one)."""
        known = {field.name for field in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            named = ", ".join(
                f"{key} (now data.{MOVED_KEYS[key]})" if key in MOVED_KEYS else key
                for key in unknown
            )
            raise ValueError(f"unknown data config key(s): {named}")
        return cls(**{key: values[key] for key in values})


def source_node(value: Any) -> dict[str, Any]:
    """`{name, **options}` of a `data.source` value (a source's name or a node), every
    option present and checked (`checked_node`); OptionError (a ValueError) naming the key."""
    choices = {source.name: source.options for source in registry.components("source")}
    return checked_node(value, SOURCE_KEY, "source", choices)


def documents_node(value: Any) -> dict[str, Any] | None:
    """`data.documents` completed and checked: None (off), or every option of
    DocumentsOptions (the order by its name); OptionError (a ValueError) naming the key."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError(
            f"{DOCUMENTS_KEY} must be null or a node {{min_sentences: ..., max_sentences: ..., "
            f"order: ...}}, got {value!r}"
        )
    node = checked_options(
        DocumentsOptions, {str(key): item for key, item in value.items()}, DOCUMENTS_KEY,
        DOCUMENTS_KEY,
    )  # fmt: skip
    if node["boundaries"] == DocumentBoundaries.corpus.name and node["order"] != "consecutive":
        raise ValueError(
            f"{DOCUMENTS_KEY}.order={node['order']} would join sentences of different corpus "
            f"documents: with {DOCUMENTS_KEY}.boundaries=corpus the order is the corpus's "
            "(consecutive)"
        )
    if node["max_sentences"] < node["min_sentences"]:
        raise ValueError(
            f"{DOCUMENTS_KEY}.max_sentences ({node['max_sentences']}) must be >= "
            f"{DOCUMENTS_KEY}.min_sentences ({node['min_sentences']})"
        )
    return node


def source_name(data: Any) -> str | None:
    """The source a data section chooses (`data.source`'s name, or the bare name given),
    whether it is a DataConfig or a mapping; None without one."""
    node = data.source if isinstance(data, DataConfig) else data.get("source")
    if isinstance(node, str):
        return node
    name = node.get("name") if isinstance(node, Mapping) else None
    return name if isinstance(name, str) else None


def moved_key(key: str) -> str | None:
    """`data.<new>` for an old key of `data` (`kind` -> `data.source.name`), else None."""
    return f"data.{MOVED_KEYS[key]}" if key in MOVED_KEYS else None


def flat_settings(cfg: DataConfig) -> dict[str, Any]:
    """The settings in the layout of `data` before `data.source` (`MOVED_KEYS`), which
    keys the preparation records (`seq2seq.data.record`): a folder prepared before keeps
    its record. The old corpus keys that the chosen source lacks hold their old defaults
    (the tabular source's), as they did; an option with no old key is `source.<option>`. A
    newer key (`KEYED_WHEN_SET`) is there only when it is set, not its default (null, false)."""
    flat = {
        item.name: getattr(cfg, item.name)
        for item in fields(cfg)
        if item.name != "source"
        and not (item.name in KEYED_WHEN_SET and getattr(cfg, item.name) == item.default)
    }
    if cfg.documents is not None:  # its newer options only when set, as KEYED_WHEN_SET
        flat["documents"] = {
            key: value for key, value in cfg.documents.items()
            if not (key in DOCUMENT_KEYS_WHEN_SET and value == DOCUMENT_KEYS_WHEN_SET[key])
        }  # fmt: skip
    old_names = {new.removeprefix("source."): old for old, new in MOVED_KEYS.items()}
    tabular = registry.get("source", DEFAULT_SOURCE).options
    flat |= {old_names[item.name]: item.default for item in fields(tabular)}
    old_kinds = {new: old for old, new in RENAMED_SOURCES.items()}
    flat["kind"] = old_kinds.get(cfg.source_name, cfg.source_name)
    built_in = registry.get("source", cfg.source_name).plugin is None
    for option, value in cfg.source.items():
        if option != "name" and not (
            option in SOURCE_KEYS_WHEN_SET and value == SOURCE_KEYS_WHEN_SET[option]
        ):
            flat[old_names.get(option, f"source.{option}") if built_in else f"source.{option}"] = (
                value
            )
    return flat


def file_name_from_url(url: str) -> str:
    """The file name a corpus URL is saved under: its last path segment, unquoted.

    `https://x.org/anki/cmn-eng.zip` -> `cmn-eng.zip`. Raises ValueError (naming
    `data.source.url`)
    for a scheme other than http, https or file, or when the last segment is not a plain
    file name once unquoted (empty, `.`, `..`, or holding a `/`, `\\` or NUL, as `%2F`
    would), so that the download can never land outside `raw/`.
    """
    parts = urlsplit(str(url))
    if parts.scheme.lower() not in URL_SCHEMES:
        raise ValueError(
            f"data.source.url must start with one of {', '.join(s + '://' for s in URL_SCHEMES)}; "
            f"got {url!r}"
        )
    segment = parts.path.rstrip("/").rsplit("/", 1)[-1]
    name = unquote(segment)
    if not name:
        raise ValueError(f"data.source.url must end in a file name, got {url!r}")
    check_plain_name("data.source.url", name, f" (the file name {name!r} of {url!r})")
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


def data_source(name: str) -> Any:
    """The source registered as `name` (a `seq2seq.data.sources.DataSource`); a ValueError
    names data.source.name and the registered sources."""
    try:
        return registry.get("source", name).builder()
    except registry.UnknownComponent:
        check_choice("source.name", name, registry.names("source"))
        raise


def check_reading_limits(options: Any) -> None:
    """The limits of a source that reads text files (its options `max_line_bytes` and
    `max_malformed_share`): a line's bytes > 0, the share of skipped lines in [0, 1]."""
    check_positive("source.max_line_bytes", options.max_line_bytes)
    if not 0.0 <= options.max_malformed_share <= 1.0:
        raise ValueError(
            f"data.source.max_malformed_share must be in [0, 1], got {options.max_malformed_share}"
        )


def check_positive(key: str, value: int) -> None:
    if value <= 0:
        raise ValueError(f"data.{key} must be > 0, got {value}")


def check_choice(key: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"data.{key} must be one of {', '.join(choices)}; got {value!r}")
