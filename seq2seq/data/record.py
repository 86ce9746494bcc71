"""The record of a finished preparation, so that the next start opens it in constant time.

Reading, cleaning and splitting a corpus, and hashing its training text for the subword
and encoding caches, each take a pass over the whole corpus: seconds per million pairs.
A run that finds `prepared_<key>.json` in the folder skips them all: the key covers the
corpus file's sha256 and every data setting that changes a written file (all of
DataConfig but the few in `NOT_IN_KEY`, in the layout before `data.source`, so that a
folder prepared then keeps its record: `seq2seq.data.settings.flat_settings`), and the
record names the files it produced, the split text files with their size and modification
time. Any of those missing or changed
(another setting rewrote `train.zh`, a file was edited) and the record is not used: the
preparation runs again and writes a new one. The record also keeps the corpus part of the
summary (lines read, duplicates removed, ...), which only the full pass can count.

Every file a preparation wrote (the split texts, the subword models, each file of the
encoded caches) is in the record's `files` with its size, a hash of sampled blocks and its
sha256. Opening the cache (`check_files`) compares each size and the sampled hash: a
file of up to SAMPLE_BLOCKS * SAMPLE_BLOCK_BYTES (4 MiB) is hashed whole, a larger one in
SAMPLE_BLOCKS blocks at positions fixed by its size (the first and the last included), so
the check reads at most 4 MiB a file however large the corpus. That catches a file cut
short or grown, and any change in a sampled block; a few changed bytes between the blocks
of a large file are caught by `seq2seq-data verify` (`verify_files`, the full sha256 of
every file) and, for ids out of the vocabulary or offsets out of order, by the range
checks of `seq2seq.data.arrays.open_ragged`, which run whenever a cache is opened. A
preparation without a record for its settings first checks, against every record in the
folder, the models and caches it would reuse by name (`check_reusable`).

Why sampled (measured on 2 shared cores of an AMD EPYC, medians of 3): at Tatoeba's 26k
pairs every file is under 4 MiB, so the check at opening is a full hash (4 ms for 5.2 MB).
At 5M pairs the cache holds 617 MB (960 MB under its names: the split texts and the caches'
text files are hard links, read once): a full sha256 takes 0.43 s from the page cache and
0.5 to 5.9 s when the files are read from disk, growing with the corpus, against 27 ms
(0.1 to 0.7 s from disk) for the sampled check, whatever the corpus size. The range checks
add 32 ms (0.17 s from disk).

A record of the older format (1: no `format` key, no `files`) cannot tell a damaged file:
it is not used (a warning names it) and the preparation runs again and writes a new one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from seq2seq.bounded_files import read_json
from seq2seq.data.corpus import CorpusError
from seq2seq.data.fetch import write_atomically
from seq2seq.data.settings import DataConfig, flat_settings

log = logging.getLogger(__name__)

FORMAT = 1  # of the key: kept, so that a record's name does not change with its layout
RECORD_FORMAT = 2  # of the record's content: 2 added `format` and `files`
# Settings that change no prepared file: where files go, batching, the drop / truncation
# done on loading, the number of encoding processes, the description of the licence, what
# to do with a damaged cache, the links file of guided alignment (its links have a cache of
# their own, `seq2seq.data.links`), where the given files of data.source.name=text_pair are (their
# content is in the key, as the corpus sha256).
NOT_IN_KEY = frozenset(
    {"name", "root", "licence", "max_tokens", "max_len", "encode_workers", "rebuild", "alignments",
     "train_prefix", "valid_prefix", "test_prefix"}
)  # fmt: skip
SAMPLE_BLOCKS = 64  # blocks hashed by the check at opening, per file larger than ...
SAMPLE_BLOCK_BYTES = 1 << 16  # ... SAMPLE_BLOCKS blocks of this size (4 MiB): smaller whole
READ_BYTES = 1 << 20


class OlderRecordError(ValueError):
    """A preparation record of an earlier format, without the sizes and hashes of its files."""


class DamagedCacheError(CorpusError):
    """Recorded files that are damaged: `damaged` holds (name relative to the folder,
    reason) pairs. A CorpusError, so that the command line reports it in one line."""

    def __init__(self, message: str, folder: Path, damaged: list[tuple[str, str]]) -> None:
        super().__init__(message)
        self.folder = folder
        self.damaged = damaged


@dataclass
class PreparationRecord:
    corpus_summary: dict[str, Any]  # lines read, skipped, duplicates, groups, ...
    texts: dict[str, list[int]]  # split text file name -> [size, mtime_ns]
    models: list[str]  # subword model file names: [src, tgt] (the same twice when joint)
    encoded: dict[str, str]  # split name -> cache folder name
    # every file written, by its name relative to the folder (`encoded_.../src_ids.npy`):
    # {"size": bytes, "sample": sha256 of the sampled blocks, "sha256": of the whole file}
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    format: int = RECORD_FORMAT


def record_key(cfg: DataConfig, corpus_sha256: str) -> str:
    """Short sha256 of the corpus content and the settings that shape the prepared files."""
    settings = {
        key: value
        for key, value in flat_settings(cfg).items()  # the layout before data.source
        if key not in NOT_IN_KEY and not key.startswith("toy_")
    }
    text = json.dumps({"format": FORMAT, "corpus": corpus_sha256, **settings}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def record_path(folder: Path, key: str) -> Path:
    return folder / f"prepared_{key}.json"


def text_state(path: Path) -> list[int]:
    """[size, mtime_ns] of a split text file."""
    status = path.stat()
    return [status.st_size, status.st_mtime_ns]


def read_record(path: Path) -> PreparationRecord:
    """The record in `path`; OlderRecordError for one of an earlier format, ValueError,
    TypeError or OSError for one that cannot be read."""
    values = read_json(path)
    if not isinstance(values, dict):
        raise ValueError(f"{path} holds no JSON object")
    if values.get("format") != RECORD_FORMAT:
        raise OlderRecordError(
            f"{path} is of an older format ({values.get('format', 1)!r}, not "
            f"{RECORD_FORMAT}) that records no sizes and hashes of its files"
        )
    return PreparationRecord(**values)


def load_record(folder: Path, key: str) -> PreparationRecord | None:
    """The record of `key` unless it is out of date (`stale_reasons`) or unreadable, else
    None; `check_files` then compares the content of its files."""
    path = record_path(folder, key)
    if not path.is_file():
        return None
    try:
        record = read_record(path)
    except (OSError, ValueError, TypeError) as error:
        log.warning("cannot use the preparation record %s (%s); preparing again", path, error)
        return None
    if stale := stale_reasons(folder, record):
        log.info("preparation record %s is stale (%s); preparing again", path.name, stale)
        return None
    return record


def stale_reasons(folder: Path, record: PreparationRecord) -> str | None:
    """Why the record is out of date, which is not damage, or None: a split text whose size
    or modification time changed (another setting under the same data.name rewrote it;
    preparing again rewrites it), a model or an encoding cache folder removed."""
    changed = [
        name
        for name, state in record.texts.items()
        if not (folder / name).is_file() or text_state(folder / name) != state
    ]
    missing = [name for name in record.models if not (folder / name).is_file()]
    missing += [name for name in record.encoded.values() if not (folder / name).is_dir()]
    if not changed and not missing:
        return None
    return f"changed: {', '.join(changed) or '-'}; missing: {', '.join(missing) or '-'}"


def save_record(folder: Path, key: str, record: PreparationRecord) -> None:
    text = json.dumps(asdict(record), indent=2) + "\n"  # the summary keeps its order
    write_atomically(record_path(folder, key), text.encode("utf-8"))


def recorded_files(folder: Path, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Size, sampled hash and sha256 of each file `names` gives (relative to `folder`); a
    file hard-linked under two names (a split text and its cache's copy) is read once."""
    hashed: dict[tuple[int, int], str] = {}
    files = {}
    for name in sorted(set(names)):
        path = folder / name
        size = path.stat().st_size
        files[name] = {"size": size, "sample": sampled_hash(path), "sha256": _sha256(path, hashed)}
    return files


def check_files(folder: Path, record: PreparationRecord) -> list[tuple[str, str]]:
    """The recorded files that differ from the record, as (name, reason): missing, another
    size, or another hash of the sampled blocks (module docstring). Empty: all intact."""
    damaged = []
    for name, state in record.files.items():
        reason = _size_differs(folder / name, state)
        if reason is None and sampled_hash(folder / name) != state["sample"]:
            reason = "its content differs from the record (a hash of sampled blocks)"
        if reason is not None:
            damaged.append((name, reason))
    return damaged


def check_reusable(folder: Path) -> list[tuple[str, str]]:
    """`check_files` over the models and encoding cache files of every record in `folder`
    that are there: what a new preparation reuses by name (a model's name hashes its
    training text and settings, a cache's its models and text, so any record's hash of a
    file holds for every record naming it). Split texts are left out: another setting
    rewrites them. Missing files are no damage here (they are made anew)."""
    damaged = {}
    for path in sorted(folder.glob("prepared_*.json")):
        try:
            record = read_record(path)
        except (OSError, ValueError, TypeError):
            continue  # unreadable or older: it vouches for nothing
        reusable = {
            name: state
            for name, state in record.files.items()
            if name not in record.texts and (folder / name).is_file()
        }
        for name, reason in check_files(folder, PreparationRecord({}, {}, [], {}, reusable)):
            damaged.setdefault(name, reason)
    return sorted(damaged.items())


def verify_files(folder: Path, record: PreparationRecord) -> list[tuple[str, str]]:
    """`check_files` with the sha256 of every byte of every file (`seq2seq-data verify`)."""
    hashed: dict[tuple[int, int], str] = {}
    damaged = []
    for name, state in record.files.items():
        reason = _size_differs(folder / name, state)
        if reason is None and _sha256(folder / name, hashed) != state["sha256"]:
            reason = "its sha256 differs from the record's"
        if reason is not None:
            damaged.append((name, reason))
    return damaged


def _size_differs(path: Path, state: dict[str, Any]) -> str | None:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return "missing"
    if size != state["size"]:
        return f"{size:,} bytes, the record says {state['size']:,}"
    return None


def sampled_hash(path: Path) -> str:
    """sha256 of the size and of SAMPLE_BLOCKS blocks of SAMPLE_BLOCK_BYTES at positions
    fixed by the size (evenly spaced, the first and the last included); of the whole file
    when it is no larger than those blocks."""
    with open(path, "rb") as stream:
        size = os.fstat(stream.fileno()).st_size
        digest = hashlib.sha256(size.to_bytes(8, "little"))
        if size <= SAMPLE_BLOCKS * SAMPLE_BLOCK_BYTES:
            for chunk in iter(lambda: stream.read(READ_BYTES), b""):
                digest.update(chunk)
            return digest.hexdigest()
        last = size - SAMPLE_BLOCK_BYTES
        for index in range(SAMPLE_BLOCKS):
            start = last * index // (SAMPLE_BLOCKS - 1)
            digest.update(os.pread(stream.fileno(), SAMPLE_BLOCK_BYTES, start))
    return digest.hexdigest()


def _sha256(path: Path, hashed: dict[tuple[int, int], str]) -> str:
    """The file's sha256, read once per file (device, inode) however many names it has."""
    status = path.stat()
    identity = (status.st_dev, status.st_ino)
    if identity not in hashed:
        digest = hashlib.sha256()
        with open(path, "rb") as stream:
            for chunk in iter(lambda: stream.read(READ_BYTES), b""):
                digest.update(chunk)
        hashed[identity] = digest.hexdigest()
    return hashed[identity]
