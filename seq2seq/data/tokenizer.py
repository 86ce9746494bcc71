"""Tokenisers: sentencepiece subwords for real corpora, single symbols for the toy tasks.

Both share one small API (`encode`, `encode_many`, `decode`, `pieces`, `id_to_piece`,
`vocab_size`, `lang`, `to_bytes` / `from_bytes`) and the special ids of
`seq2seq.special_tokens`, so a model and a checkpoint never depend on which one is used.

Subword models are trained on the training split only and cached as
`spm_<lang>_<hash>.model`, the hash covering the training text and every setting: a second
run reuses the file and a changed setting or text trains a new one. The text may be any
iterable that can be read more than once (a list, or `TextFiles` reading the split files
again each time), so a large training split is streamed, never held.

Sample (`SentenceSample`, `data.spm_sample_size`): from a text of more sentences than the
sample size, sentencepiece gets a uniform random sample of that many (drawn with numpy from
the seed, streamed in text order), so its memory is the sample's. Not sentencepiece's own
`input_sentence_size` sampling: its generator is seeded once per process (a later
`set_random_generator_seed` is ignored, and unseeded it differs from run to run), so the
same inputs could give another model. A text that fits is trained on whole, with exactly
the call and cache key of a model trained before samples existed, so such models (and
checkpoints using them) stay valid.

Vocabulary cap (`vocab_cap=True`): sentencepiece refuses a vocabulary larger than the text
supports, and its error states the largest size it would accept ("Please set it to a value
<= N"). With the cap that N is parsed and the model trained again at N, with the same hard
limit, so it is exactly the model `vocab_size=N` gives and is cached under N's hash (the
size used is in the key). A note `spm_<lang>_<hash of the asked settings>.cap.json` records
N, so a later run goes straight to that model without the failing training. Parsing costs
one extra training; bisection would cost about log2(asked) of them, and sentencepiece's
`hard_vocab_limit=False` gives a size known only after training, under a trainer spec that
differs from the one `vocab_size=N` records.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import sentencepiece as spm

from seq2seq.bounded_files import parse_json_text, read_json
from seq2seq.data.corpus import CorpusError
from seq2seq.data.languages import is_unspaced_cjk
from seq2seq.files import write_atomically
from seq2seq.special_tokens import (
    BOS_ID,
    BOS_PIECE,
    EOS_ID,
    EOS_PIECE,
    PAD_ID,
    PAD_PIECE,
    UNK_ID,
    UNK_PIECE,
)

log = logging.getLogger(__name__)
NOTE_LIMIT = 4096  # bytes: a cap note is `{"asked": 8000, "used": 5210}`

SPECIAL_PIECES = (PAD_PIECE, UNK_PIECE, BOS_PIECE, EOS_PIECE)  # in id order 0, 1, 2, 3
NOT_DECODED_IDS = frozenset((PAD_ID, BOS_ID, EOS_ID))
TOY_SYMBOLS = "abcdefghijklmnopqrstuvwxyz"
SAMPLE_STREAM = 0x5E47  # numpy seed prefix of the sentence sample, apart from other draws
CAP_NOTE_SUFFIX = ".cap.json"  # beside the asked model's name: the size the cap used
# sentencepiece 0.2: "Vocabulary size too high (5000). Please set it to a value <= 39."
TOO_LARGE = re.compile(r"vocab\w*\s+size\s+too\s+(?:high|large).*?<=\s*(\d+)", re.I | re.S)
REQUIRED_CHARS = re.compile(r"smaller than required_chars\. (\d+) vs (\d+)")


class VocabularySizeError(CorpusError):
    """A vocabulary size the training text cannot give: too small for its characters, or
    more pieces than it supports (`largest` is then the most it does)."""

    def __init__(self, message: str, largest: int | None = None) -> None:
        super().__init__(message)
        self.largest = largest


class SubwordModelError(CorpusError):
    """A cached subword model file that sentencepiece cannot load (damaged, cut short), or
    one without the project's special ids; `path` is the file."""

    def __init__(self, message: str, path: Path) -> None:
        super().__init__(message)
        self.path = path


@dataclass(frozen=True)
class SentenceSample:
    """Train on at most `size` sentences, drawn at random with `seed`, when the text has more."""

    size: int
    seed: int

    def rows(self, count: int) -> np.ndarray | None:
        """(size,) int64 sorted sentence numbers of the sample of a text of `count`
        sentences; None when the whole text fits."""
        if count <= self.size:
            return None
        rng = np.random.default_rng([SAMPLE_STREAM, self.seed])
        return np.sort(rng.choice(count, size=self.size, replace=False)).astype(np.int64)


def sampled(texts: Iterable[str], rows: np.ndarray | None) -> Iterator[str]:
    """The texts at `rows` (sorted), in order, as a stream; every text when rows is None."""
    if rows is None:
        yield from texts
        return
    wanted = iter(rows.tolist())
    next_row = next(wanted, None)
    for number, text in enumerate(texts):
        if next_row is None:
            return
        if number == next_row:
            yield text
            next_row = next(wanted, None)


class TextFiles:
    """The lines of some UTF-8 text files, one after the other, read anew at each iteration."""

    def __init__(self, *paths: Path | str) -> None:
        self.paths = [Path(path) for path in paths]

    def __iter__(self) -> Iterator[str]:
        for path in self.paths:
            with open(path, "rb") as stream:
                for line in stream:
                    yield line.rstrip(b"\n").decode("utf-8")


class Tokenizer(Protocol):
    kind: str
    lang: str

    @property
    def vocab_size(self) -> int: ...
    def encode(self, text: str) -> list[int]: ...
    def encode_many(self, texts: Sequence[str]) -> list[list[int]]: ...
    def decode(self, ids: Iterable[int]) -> str: ...
    def pieces(self, text: str) -> list[str]: ...
    def id_to_piece(self, index: int) -> str: ...
    def to_bytes(self) -> bytes: ...


def spm_settings(
    vocab_size: int,
    model_type: str,
    text_langs: Sequence[str],
    user_symbols: Sequence[str] = (),
    byte_fallback: bool = False,
    character_coverage: float | None = None,
) -> dict[str, object]:
    """sentencepiece training settings that depend on the languages of the text.

    A language written without spaces (Chinese, Japanese) gets no dummy "▁" prefix, which
    would otherwise often become a piece of its own at the start of every sentence, and a
    character coverage of 0.9995 (its rarest characters become <unk>) instead of 1.
    `user_symbols` (the separator of pseudo-documents) are each kept one piece wherever
    they occur; none: the settings, and so the cache key, of a model trained before them.
    `byte_fallback` spells a character outside the model in its UTF-8 bytes instead of
    <unk> (256 byte pieces join the vocabulary); off, the settings are those of before it.
    `character_coverage` replaces the coverage chosen by language.
    """
    unspaced = [is_unspaced_cjk(lang) for lang in text_langs]
    if character_coverage is None:
        character_coverage = 0.9995 if any(unspaced) else 1.0
    settings: dict[str, object] = {
        "vocab_size": vocab_size,
        "model_type": model_type,
        "character_coverage": character_coverage,
        "add_dummy_prefix": not all(unspaced),
    }
    if user_symbols:
        settings["user_defined_symbols"] = list(user_symbols)
    if byte_fallback:
        settings["byte_fallback"] = True
    return settings


class SubwordTokenizer:
    """A sentencepiece model with the project's special ids; `encode` adds no BOS/EOS."""

    kind = "sentencepiece"

    def __init__(
        self, processor: spm.SentencePieceProcessor, lang: str, path: Path | None = None
    ) -> None:
        _check_special_ids(processor)
        self.processor = processor
        self.lang = lang
        self.path = path  # the cached model file it was trained into or loaded from, if any

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        *,
        lang: str,
        vocab_size: int,
        folder: Path | str,
        model_type: str = "unigram",
        text_langs: Sequence[str] | None = None,
        vocab_key: str = "vocab_size",
        vocab_cap: bool = False,
        sample: SentenceSample | None = None,
        user_symbols: Sequence[str] = (),
        byte_fallback: bool = False,
        character_coverage: float | None = None,
    ) -> SubwordTokenizer:
        """Train on `texts`, or load the cached model trained on the same text and settings.

        `texts` is read several times (hash, training). `text_langs` are the languages in
        `texts` (default `[lang]`; both for a joint model). `sample` bounds the sentences
        trained on (module docstring). `user_symbols` are pieces kept whole, `byte_fallback`
        spells unknown characters in bytes, `character_coverage` replaces the coverage chosen
        by language (`spm_settings`).

        `vocab_key` names the setting in the VocabularySizeError raised when `vocab_size` is
        larger than the text allows (sentencepiece's hard limit, kept on purpose so that the
        vocabulary is the size asked for; the message gives the largest possible size).
        With `vocab_cap` that largest size is used instead (module docstring): the
        tokenizer's `vocab_size` then says which.
        """
        settings = spm_settings(vocab_size, model_type, text_langs or [lang], user_symbols,
                                byte_fallback, character_coverage)  # fmt: skip
        path, rows = model_path(folder, lang, texts, settings, sample)
        if (cached := cls._reuse(path, lang)) is not None:
            log.info("reusing the subword model %s", path)
            return cached
        if vocab_cap:
            return cls._train_capped(texts, settings, lang, path, vocab_key, sample)
        model = _train_model(sampled(texts, rows), settings, lang, vocab_key)
        _cache_model(path, model)
        return cls.from_bytes(model, lang, path)

    @classmethod
    def _train_capped(
        cls,
        texts: Iterable[str],
        asked: dict[str, object],
        lang: str,
        path: Path,
        vocab_key: str,
        sample: SentenceSample | None,
    ) -> SubwordTokenizer:
        """The model of the largest size up to `asked`'s that the text supports, trained or
        found through the cap note beside `path` (the asked model's cache file)."""
        note = path.with_name(path.stem + CAP_NOTE_SUFFIX)
        asked_size = int(asked["vocab_size"])
        start = {**asked, "vocab_size": min(_noted_size(note) or asked_size, asked_size)}
        capped_path, rows = model_path(path.parent, lang, texts, start, sample)
        if (cached := cls._reuse(capped_path, lang)) is not None:
            log.info("reusing the subword model %s (capped, %s)", capped_path, note.name)
            return cached
        used, model = _train_largest(texts, rows, start, lang, vocab_key)
        used_path = model_path(path.parent, lang, texts, used, sample)[0]
        _cache_model(used_path, model)
        if used["vocab_size"] != asked_size:
            note_text = json.dumps({"asked": asked_size, "used": used["vocab_size"]})
            write_atomically(note, note_text.encode())
        return cls.from_bytes(model, lang, used_path)

    @classmethod
    def load(cls, path: Path | str, lang: str) -> SubwordTokenizer:
        """The model cached in `path`; SubwordModelError naming it when it cannot be loaded
        (sentencepiece's own error is a RuntimeError with no file name)."""
        path = Path(path)
        data = path.read_bytes()
        try:
            return cls.from_bytes(data, lang, path)
        except (RuntimeError, ValueError) as error:
            reason = "; ".join(line.strip() for line in str(error).splitlines() if line.strip())
            raise SubwordModelError(
                f"{path}: not a usable sentencepiece model ({reason})", path
            ) from error

    @classmethod
    def _reuse(cls, path: Path, lang: str) -> SubwordTokenizer | None:
        """The cached model at `path`, or None (trained again) when there is none or it
        cannot be loaded (a warning names it; the new model replaces it)."""
        if not path.is_file():
            return None
        try:
            return cls.load(path, lang)
        except SubwordModelError as error:
            log.warning("%s; training it again", error)
            return None

    @classmethod
    def from_bytes(cls, data: bytes, lang: str, path: Path | None = None) -> SubwordTokenizer:
        return cls(spm.SentencePieceProcessor(model_proto=data), lang, path)

    def to_bytes(self) -> bytes:
        return self.processor.serialized_model_proto()

    @property
    def vocab_size(self) -> int:
        return self.processor.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return self.processor.encode(text, out_type=int)

    def encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        return self.processor.encode(list(texts), out_type=int)

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`, skipping PAD/BOS/EOS; an UNK shows as sentencepiece's " ⁇ "."""
        return self.processor.decode([int(i) for i in ids if int(i) not in NOT_DECODED_IDS])

    def pieces(self, text: str) -> list[str]:
        return self.processor.encode(text, out_type=str)

    def id_to_piece(self, index: int) -> str:
        return self.processor.id_to_piece(int(index))


def model_path(
    folder: Path | str,
    lang: str,
    texts: Iterable[str],
    settings: dict[str, object],
    sample: SentenceSample | None = None,
) -> tuple[Path, np.ndarray | None]:
    """Where the model of `texts` under `settings` is cached, `spm_<lang>_<hash>.model`, and
    the sentence numbers its training sample takes (None: the whole text)."""
    key, rows = training_hash(texts, settings, sample)
    return Path(folder) / f"spm_{lang}_{key}.model", rows


def training_hash(
    texts: Iterable[str], settings: dict[str, object], sample: SentenceSample | None = None
) -> tuple[str, np.ndarray | None]:
    """Short sha256 of the training text, the settings and the sentencepiece version, read
    in one pass; and the sample's sentence numbers. A sampled training's hash also covers
    the sample size and seed; an unsampled one is the hash models had before samples."""
    digest = hashlib.sha256()
    digest.update(json.dumps({**settings, "spm": spm.__version__}, sort_keys=True).encode())
    count = 0
    for text in texts:
        digest.update(text.encode("utf-8") + b"\n")
        count += 1
    rows = sample.rows(count) if sample is not None else None
    if sample is None or rows is None:
        return digest.hexdigest()[:16], None
    extra = json.dumps({"sample_size": sample.size, "sample_seed": sample.seed}, sort_keys=True)
    return hashlib.sha256(f"{digest.hexdigest()}{extra}".encode()).hexdigest()[:16], rows


def _cache_model(path: Path, model: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, model)
    log.info("trained the subword model %s", path)


def _noted_size(note: Path) -> int | None:
    """The size a cap note records (at least 1; the caller caps it at the asked size);
    None without a readable note (then train to find it)."""
    try:
        used = int(read_json(note, limit=NOTE_LIMIT)["used"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return used if used >= 1 else None


def _train_largest(
    texts: Iterable[str], rows: np.ndarray | None, settings: dict, lang: str, vocab_key: str
) -> tuple[dict, bytes]:
    """Train at `settings` on the sample `rows` of `texts`, or again at the largest size
    sentencepiece says the text supports; returns the settings used and the model. The
    size only ever goes down, so this ends; an error without a smaller size is raised."""
    while True:
        try:
            return settings, _train_model(sampled(texts, rows), settings, lang, vocab_key)
        except VocabularySizeError as error:
            if error.largest is None or error.largest >= settings["vocab_size"]:
                raise
            settings = {**settings, "vocab_size": error.largest}


def _train_model(texts: Iterable[str], settings: dict, lang: str, vocab_key: str) -> bytes:
    """Train one model on every text of `texts`, read as a stream."""
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(texts),
            model_writer=model,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            pad_piece=PAD_PIECE,
            unk_piece=UNK_PIECE,
            bos_piece=BOS_PIECE,
            eos_piece=EOS_PIECE,
            num_threads=1,  # deterministic, and the machines this runs on are small
            minloglevel=2,
            **settings,
        )
    except RuntimeError as error:
        raise _vocab_error(error, settings["vocab_size"], lang, vocab_key) from error
    return model.getvalue()


def _vocab_error(error: RuntimeError, vocab_size: object, lang: str, vocab_key: str) -> Exception:
    """sentencepiece's error as a VocabularySizeError naming `vocab_key`; others unchanged."""
    required = REQUIRED_CHARS.search(str(error))
    if required is not None:
        return VocabularySizeError(
            f"{vocab_key}={vocab_size} is too small for the '{lang}' training text: its "
            f"characters alone need {required.group(2)} pieces; set {vocab_key} above that"
        )
    limit = TOO_LARGE.search(str(error))
    if limit is None:
        return error
    largest = int(limit.group(1))
    return VocabularySizeError(
        f"{vocab_key}={vocab_size} is too large for the '{lang}' training text: sentencepiece "
        f"can make at most {largest} pieces from it; set {vocab_key} to {largest} or less, "
        "or data.vocab_cap=true to use the largest size",
        largest,
    )


def _check_special_ids(processor: spm.SentencePieceProcessor) -> None:
    found = (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id())
    if found != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
        raise ValueError(
            f"sentencepiece model has special ids pad/unk/bos/eos = {found}, "
            f"expected {(PAD_ID, UNK_ID, BOS_ID, EOS_ID)}"
        )


SYMBOLS_RECORD_LIMIT = 1024  # bytes of a SymbolTokenizer's `to_bytes` record


class SymbolTokenizer:
    """Toy vocabulary: the symbols 'a', 'b', ... get ids 4, 5, ...; text is space separated."""

    kind = "symbols"

    def __init__(self, num_symbols: int, lang: str = "toy") -> None:
        if not 1 <= num_symbols <= len(TOY_SYMBOLS):
            raise ValueError(f"num_symbols must be in [1, {len(TOY_SYMBOLS)}], got {num_symbols}")
        self.symbols = TOY_SYMBOLS[:num_symbols]
        self.lang = lang
        self._ids = {symbol: len(SPECIAL_PIECES) + i for i, symbol in enumerate(self.symbols)}

    @classmethod
    def from_bytes(cls, data: bytes, lang: str) -> SymbolTokenizer:
        if len(data) > SYMBOLS_RECORD_LIMIT:  # `{"num_symbols": 12}`: never scan megabytes
            raise ValueError(
                f"{lang} tokenizer: {len(data):,} bytes, over the {SYMBOLS_RECORD_LIMIT} "
                "a toy vocabulary's record takes"
            )
        return cls(
            parse_json_text(data.decode("utf-8"), source=f"{lang} tokenizer")["num_symbols"], lang
        )

    def to_bytes(self) -> bytes:
        return json.dumps({"num_symbols": len(self.symbols)}).encode("utf-8")

    @property
    def vocab_size(self) -> int:
        return len(SPECIAL_PIECES) + len(self.symbols)

    def encode(self, text: str) -> list[int]:
        return [self._ids.get(piece, UNK_ID) for piece in self.pieces(text)]

    def encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(text) for text in texts]

    def decode(self, ids: Iterable[int]) -> str:
        return " ".join(self.id_to_piece(i) for i in ids if int(i) not in NOT_DECODED_IDS)

    def pieces(self, text: str) -> list[str]:
        return text.split()

    def id_to_piece(self, index: int) -> str:
        index = int(index)
        if not 0 <= index < self.vocab_size:
            raise ValueError(f"id {index} is outside the vocabulary of size {self.vocab_size}")
        if index < len(SPECIAL_PIECES):
            return SPECIAL_PIECES[index]
        return self.symbols[index - len(SPECIAL_PIECES)]


def tokenizer_from_bytes(kind: str, data: bytes, lang: str) -> Tokenizer:
    """Rebuild a tokenizer saved with `to_bytes` (for example from a checkpoint)."""
    classes = {SubwordTokenizer.kind: SubwordTokenizer, SymbolTokenizer.kind: SymbolTokenizer}
    if kind not in classes:
        raise ValueError(f"unknown tokenizer kind {kind!r}; expected one of {', '.join(classes)}")
    return classes[kind].from_bytes(data, lang)
