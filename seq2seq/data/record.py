"""The record of a finished preparation, so that the next start opens it in constant time.

Reading, cleaning and splitting a corpus, and hashing its training text for the subword
and encoding caches, each take a pass over the whole corpus: seconds per million pairs.
A run that finds `prepared_<key>.json` in the folder skips them all: the key covers the
corpus file's sha256 and every data setting that changes a written file (all of
DataConfig but the few in `NOT_IN_KEY`), and the record names the files it produced, the
split text files with their size and modification time. Any of those missing or changed
(another setting rewrote `train.zh`, a file was edited) and the record is not used: the
preparation runs again and writes a new one. The record also keeps the corpus part of the
summary (lines read, duplicates removed, ...), which only the full pass can count.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from seq2seq.data.config import DataConfig
from seq2seq.data.fetch import write_atomically

log = logging.getLogger(__name__)

FORMAT = 1
# Settings that change no prepared file: where files go, batching, the drop / truncation
# done on loading, the number of encoding processes, the description of the licence.
NOT_IN_KEY = frozenset({"name", "root", "licence", "max_tokens", "max_len", "encode_workers"})


@dataclass
class PreparationRecord:
    corpus_summary: dict[str, Any]  # lines read, skipped, duplicates, groups, ...
    texts: dict[str, list[int]]  # split text file name -> [size, mtime_ns]
    models: list[str]  # subword model file names: [src, tgt] (the same twice when joint)
    encoded: dict[str, str]  # split name -> cache folder name


def record_key(cfg: DataConfig, corpus_sha256: str) -> str:
    """Short sha256 of the corpus content and the settings that shape the prepared files."""
    settings = {
        field.name: getattr(cfg, field.name)
        for field in fields(cfg)
        if field.name not in NOT_IN_KEY and not field.name.startswith("toy_")
    }
    text = json.dumps({"format": FORMAT, "corpus": corpus_sha256, **settings}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def record_path(folder: Path, key: str) -> Path:
    return folder / f"prepared_{key}.json"


def text_state(path: Path) -> list[int]:
    """[size, mtime_ns] of a split text file."""
    status = path.stat()
    return [status.st_size, status.st_mtime_ns]


def load_record(folder: Path, key: str) -> PreparationRecord | None:
    """The record of `key` when every file it names is still there as it was, else None."""
    path = record_path(folder, key)
    if not path.is_file():
        return None
    try:
        record = PreparationRecord(**json.loads(path.read_text(encoding="utf-8")))
        changed = [
            name for name, state in record.texts.items() if text_state(folder / name) != state
        ]
    except (OSError, ValueError, TypeError) as error:
        log.warning("cannot use the preparation record %s (%s); preparing again", path, error)
        return None
    missing = [name for name in record.models if not (folder / name).is_file()]
    missing += [name for name in record.encoded.values() if not (folder / name).is_dir()]
    if changed or missing:
        log.info(
            "preparation record %s is stale (changed: %s; missing: %s); preparing again",
            path.name, ", ".join(changed) or "-", ", ".join(missing) or "-",
        )  # fmt: skip
        return None
    return record


def save_record(folder: Path, key: str, record: PreparationRecord) -> None:
    text = json.dumps(asdict(record), indent=2) + "\n"  # the summary keeps its order
    write_atomically(record_path(folder, key), text.encode("utf-8"))
