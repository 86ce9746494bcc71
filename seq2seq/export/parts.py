"""The parts of an export folder checked against each other before CTranslate2 loads them.

An export folder is files a user can move, edit or mix up: `seq2seq_export.json` (the
metadata), `model.bin` (the weights), CTranslate2's vocabularies and the tokenisers. At
load they must belong together, or every sentence fails later (a target piece the
tokeniser does not know is a KeyError; a `max_source_len` beyond the position table lets
one long line grow without bound). So, before anything is built:

* the metadata is read within `META_LIMIT` bytes (`seq2seq.bounded_files.read_json`);
* `model.bin`'s index is read (names and shapes only, `model_shapes`; the weights are
  skipped): the rows of the two embedding tables and of the two position tables are what
  the export itself fixes;
* `max_source_len` must leave room for EOS in the encoder's position table and
  `decoder_positions` must not exceed the decoder's (one line naming the file and key);
* each vocabulary has as many entries as its embedding table has rows and as the
  metadata's `vocabulary_sizes` says, and holds exactly its tokeniser's pieces, id by id;
* every file with a fingerprint in the metadata (`fingerprints`, sha256; written since
  the tokenisers and vocabularies were fingerprinted) still has it. An older export has
  none: the piece-by-piece comparison still catches exchanged vocabularies.

Every refusal is one ExportError line starting with the file at fault.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import BinaryIO

from seq2seq.bounded_files import (
    StructuredFileError,
    checked_size,
    read_json,
    read_text_bounded,
)
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.export.ctranslate2 import (
    EXPORT_FORMAT,
    META_FILE,
    WEIGHTS_FILE,
    ExportError,
    file_fingerprint,
)

META_LIMIT = 1024 * 1024  # bytes; the metadata is well under 2 kB
VOCABULARY_LIMIT = 256 * 1024 * 1024  # bytes; a 1M-piece vocabulary is about 20 MB
TOKENIZER_LIMIT = 256 * 1024 * 1024  # bytes; a sentencepiece model is a few MB
BINARY_VERSIONS = (6,)  # the model.bin layouts `model_shapes` reads (CTranslate2 4.x)
MAX_VARIABLES = 100_000
MAX_RANK = 8
SIDES = {"src": "source", "tgt": "target"}
EMBEDDINGS = {"src": "encoder/embeddings_0/weight", "tgt": "decoder/embeddings/weight"}
POSITIONS = {"src": "encoder/position_encodings/encodings",
             "tgt": "decoder/position_encodings/encodings"}  # fmt: skip


def read_meta(folder: Path) -> dict:
    """`seq2seq_export.json` of an export folder, read within META_LIMIT bytes;
    ExportError naming what is wrong. Its numbers are checked by `check_parts`."""
    path = folder / META_FILE
    if not path.is_file():
        raise ExportError(f"{folder}: no {META_FILE}; give a folder written by seq2seq-export")
    try:
        meta = read_json(path, limit=META_LIMIT)
    except StructuredFileError as error:
        raise ExportError(str(error)) from None
    if not isinstance(meta, dict) or meta.get("format") != EXPORT_FORMAT:
        raise ExportError(f"{path}: not an export of format {EXPORT_FORMAT}")
    return meta


def check_parts(folder: Path, meta: dict, tokenizers: dict[str, Tokenizer]) -> None:
    """ExportError (one line) unless the metadata, weights, vocabularies and tokenisers
    of `folder` belong together (module docstring)."""
    meta_path = folder / META_FILE
    _check_fingerprints(folder, meta)
    shapes = model_shapes(folder / WEIGHTS_FILE)
    positions = {side: _rows(shapes, name, folder) for side, name in POSITIONS.items()}
    _check_number(meta, "max_source_len", positions["src"] - 1, meta_path)  # leaves EOS a row
    _check_number(meta, "decoder_positions", positions["tgt"], meta_path)
    recorded = meta.get("vocabulary_sizes")
    for side, tokenizer in tokenizers.items():
        path, pieces = read_vocabulary(folder, side)
        rows = _rows(shapes, EMBEDDINGS[side], folder)
        if len(pieces) != rows:
            raise ExportError(
                f"{path}: {len(pieces)} entries, but {WEIGHTS_FILE} has {rows} "
                f"{SIDES[side]} embeddings; the files come from different exports"
            )
        if isinstance(recorded, dict) and recorded.get(side) != len(pieces):
            raise ExportError(
                f"{path}: {len(pieces)} entries, but {META_FILE} says "
                f"vocabulary_sizes.{side} = {recorded.get(side)!r}"
            )
        _check_pieces(path, pieces, tokenizer)


def _check_number(meta: dict, key: str, high: int, path: Path) -> int:
    try:
        return checked_size(meta.get(key), key=key, source=str(path), high=high)
    except StructuredFileError as error:
        raise ExportError(str(error)) from None


def _check_pieces(path: Path, pieces: list[str], tokenizer: Tokenizer) -> None:
    """The vocabulary must hold the tokeniser's pieces, id by id (CTranslate2 maps pieces
    back to ids by this list)."""
    if tokenizer.vocab_size != len(pieces):
        raise ExportError(
            f"{path}: {len(pieces)} entries, but its tokeniser has {tokenizer.vocab_size} "
            "pieces; the vocabulary and the tokeniser come from different exports"
        )
    for index, piece in enumerate(pieces):
        if tokenizer.id_to_piece(index) != piece:
            raise ExportError(
                f"{path}: entry {index} is {piece!r}, the tokeniser's piece "
                f"{tokenizer.id_to_piece(index)!r}; the vocabulary and the tokeniser come "
                "from different exports"
            )


def _check_fingerprints(folder: Path, meta: dict) -> None:
    recorded = meta.get("fingerprints")
    if recorded is None:
        return  # an export written before fingerprints were recorded
    if not isinstance(recorded, dict) or len(recorded) > 64:
        raise ExportError(f"{folder / META_FILE}: fingerprints: expected a mapping of files")
    for name, expected in recorded.items():
        path = folder / Path(str(name)).name  # a name beside the model, never a path elsewhere
        if not path.is_file():  # missing, a folder, or a FIFO that would block the read
            raise ExportError(f"{path}: missing or not a regular file; export again")
        try:
            found = file_fingerprint(path)
        except OSError as error:
            raise ExportError(f"{path}: cannot be read ({error.strerror or error})") from None
        if found != expected:
            raise ExportError(
                f"{path}: not the file this export wrote (its sha256 differs from the one "
                f"in {META_FILE}); export again"
            )


# ---------------------------------------------------------------- vocabularies


def vocabulary_path(folder: Path, side: str) -> Path:
    """CTranslate2's vocabulary of `side`: `<source|target>_vocabulary.json` (or `.txt`),
    or the `shared_vocabulary` both sides use when they are the same."""
    for stem in (f"{SIDES[side]}_vocabulary", "shared_vocabulary"):
        for suffix in (".json", ".txt"):
            if (folder / f"{stem}{suffix}").is_file():
                return folder / f"{stem}{suffix}"
    raise ExportError(f"{folder}: no {SIDES[side]} vocabulary; give a folder of seq2seq-export")


def read_vocabulary(folder: Path, side: str) -> tuple[Path, list[str]]:
    """(path, pieces) of `side`'s vocabulary, read within VOCABULARY_LIMIT bytes."""
    path = vocabulary_path(folder, side)
    try:
        if path.suffix == ".txt":
            text = read_text_bounded(path, limit=VOCABULARY_LIMIT)
            pieces = text.removesuffix("\n").split("\n")  # one piece a line
        else:
            pieces = read_json(path, limit=VOCABULARY_LIMIT)
    except StructuredFileError as error:
        raise ExportError(str(error)) from None
    if not isinstance(pieces, list) or not all(isinstance(piece, str) for piece in pieces):
        raise ExportError(f"{path}: expected a JSON list of pieces")
    return path, pieces


# ---------------------------------------------------------------- model.bin's index


def model_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """The shape of every variable of a CTranslate2 `model.bin` (aliases resolved), read
    from its index with each variable's bytes skipped; ExportError when the file is not
    a model.bin layout this reader knows (BINARY_VERSIONS) or is cut short."""
    if not path.is_file():  # missing, a folder, or a FIFO that would block the read
        raise ExportError(f"{path}: missing or not a regular file; export again")
    try:
        with open(path, "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            return _read_index(_BinaryReader(stream, size, path))
    except OSError as error:
        raise ExportError(f"{path}: cannot be read ({error.strerror or error})") from None
    except (struct.error, UnicodeDecodeError, ValueError) as error:
        raise ExportError(f"{path}: not a CTranslate2 model ({error})") from None


def _read_index(reader: _BinaryReader) -> dict[str, tuple[int, ...]]:
    version = reader.number("I")
    if version not in BINARY_VERSIONS:
        raise ExportError(
            f"{reader.path}: binary version {version}, which this seq2seq cannot check "
            f"(it reads {', '.join(map(str, BINARY_VERSIONS))}); export again"
        )
    reader.string()  # the spec's name
    reader.number("I")  # its revision
    shapes: dict[str, tuple[int, ...]] = {}
    for _ in range(reader.count()):
        name = reader.string()
        rank = reader.number("B")
        if rank > MAX_RANK:
            raise ValueError(f"{name}: rank {rank}")
        shapes[name] = tuple(reader.number("I") for _ in range(rank))
        reader.number("B")  # the dtype
        reader.skip(reader.number("I"))  # the bytes
    for _ in range(reader.count()):
        alias, name = reader.string(), reader.string()
        if name in shapes:
            shapes[alias] = shapes[name]
    return shapes


class _BinaryReader:
    """Little-endian numbers, strings and skips of a file whose size is known; reading
    or skipping past its end is a ValueError."""

    def __init__(self, stream: BinaryIO, size: int, path: Path):
        self.stream, self.size, self.path = stream, size, path

    def take(self, count: int) -> bytes:
        data = self.stream.read(count)
        if len(data) != count:
            raise ValueError("cut short")
        return data

    def number(self, code: str) -> int:
        return struct.unpack("<" + code, self.take(struct.calcsize(code)))[0]

    def count(self) -> int:
        count = self.number("I")
        if count > MAX_VARIABLES:
            raise ValueError(f"{count} variables")
        return count

    def string(self) -> str:
        return self.take(self.number("H")).rstrip(b"\0").decode("utf-8")

    def skip(self, count: int) -> None:
        if self.stream.tell() + count > self.size:
            raise ValueError("cut short")
        self.stream.seek(count, 1)


def _rows(shapes: dict[str, tuple[int, ...]], name: str, folder: Path) -> int:
    shape = shapes.get(name)
    if not shape:
        raise ExportError(f"{folder / WEIGHTS_FILE}: no {name}; not a seq2seq-export model")
    return shape[0]
