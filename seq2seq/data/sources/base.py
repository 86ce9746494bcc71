"""What a data source is: the checks of its keys and the three splits it prepares.

    @dataclass(frozen=True)
    class TextPairOptions:                                 # the keys of data.source
        train_prefix: str | None = None
        ...

    @registry.register("source", "text_pair", options=TextPairOptions)
    class TextPairSource(CorpusSource):
        def validate(self, cfg): ...                       # its keys, ValueError naming one
        def locate(self, cfg) -> LocatedCorpus: ...        # the files read, their content hash
        def write_splits(self, cfg, corpus, folder): ...   # train.<lang>, valid.<lang>, ...

A `DataSource` is built with no arguments and reads everything from the run's
`DataConfig`: its own options, checked and completed, as `cfg.source_options` (an instance
of its options dataclass), the pipeline's keys as `cfg.<key>`. `prepare(cfg)` returns the
`PreparedData` (tokenisers and splits). A source that knows which source position each
target position copies (the toy tasks) says so with `known_alignment` and `alignment`: the
alignment hook then scores attention against it.

A `CorpusSource` leaves subwords, encoding and caching to the shared pipeline, its
`prepare` (the steps and the cache: `seq2seq.data.prepare`): it only says where its corpus
is, with a sha256 of its content (`LocatedCorpus`; the prepared files are cached under a
key of that hash and the settings, `seq2seq.data.record`), and writes the six split text
files of cleaned pairs into the prepared folder, returning the counts the summary shows.
With `data.documents` set, the pipeline then joins each split's pairs into documents
(`seq2seq.data.documents`) before the subwords are trained, so every corpus source has them;
a source whose corpus marks its own documents (`marks_documents`) writes, with
`data.documents.boundaries=corpus`, one more file per split, `<split>-documents.txt`: the number of
the document of each pair, line for line (`seq2seq.data.documents.DOCUMENT_NUMBERS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seq2seq.data.corpus import traditional_to_simplified
from seq2seq.data.documents import build_documents
from seq2seq.data.fetch import folder_lock
from seq2seq.data.prepare import (
    PreparedData,
    check_data_folder,
    encode_splits,
    finish,
    open_cached,
    open_prepared,
    remove_damaged_reusable,
    remove_stale_temporaries,
    warn_if_capped,
)
from seq2seq.data.record import PreparationRecord, record_key, save_record
from seq2seq.data.settings import DataConfig, data_source

__all__ = ["CorpusSource", "DataSource", "LocatedCorpus", "data_source", "sentence_converters"]


class DataSource:
    """Base class of the registered sources (module docstring)."""

    known_alignment = False  # True: `alignment` gives each target position's source
    takes_documents = False  # True: data.documents may join its pairs (a CorpusSource)

    def validate(self, cfg: DataConfig) -> None:
        """Raise ValueError naming the first invalid key this source reads."""

    def marks_documents(self, cfg: DataConfig) -> bool:
        """Whether this source, so configured, says where its corpus's documents begin:
        then `write_splits` also writes `<split>-documents.txt` (`seq2seq.data.documents`) when
        `data.documents.boundaries=corpus` asks for them."""
        return False

    def prepare(self, cfg: DataConfig) -> PreparedData:
        raise NotImplementedError

    def alignment(self, cfg: Any, src_len: int) -> list[int]:
        """The source position each target position copies, for a source sentence of
        `src_len` tokens (EOS excluded); only where `known_alignment`."""
        raise NotImplementedError(f"{type(self).__name__} has no known alignment")


@dataclass(frozen=True)
class LocatedCorpus:
    """A corpus found on disk: the files it is read from and a sha256 of their content."""

    digest: str  # keys the prepared files: other content, other files
    paths: tuple[Path, ...]


class CorpusSource(DataSource):
    """A source prepared on disk by the shared pipeline (module docstring)."""

    takes_documents = True

    def validate(self, cfg: DataConfig) -> None:
        cfg.check_corpus_settings()

    def prepare(self, cfg: DataConfig) -> PreparedData:
        """The shared pipeline (`seq2seq.data.prepare`'s docstring): the prepared files of
        `<root>/prepared/<data.name>/`, made or found by their record."""
        folder = Path(cfg.root) / "prepared" / cfg.name
        check_data_folder(folder)
        corpus = self.locate(cfg)
        key = record_key(cfg, corpus.digest)
        with folder_lock(folder):
            remove_stale_temporaries(folder)
            cached = open_cached(cfg, folder, key)
            if cached is None:
                check_data_folder(folder, writing=True)
                record = self._write_files(cfg, corpus, folder)
                save_record(folder, key, record)
                cached = record, open_prepared(cfg, folder, record)
        record, (src_tokenizer, tgt_tokenizer, encoded) = cached
        warn_if_capped(cfg, src_tokenizer, tgt_tokenizer)
        return finish(cfg, encoded, src_tokenizer, tgt_tokenizer, folder, record.corpus_summary)

    def _write_files(
        self, cfg: DataConfig, corpus: LocatedCorpus, folder: Path
    ) -> PreparationRecord:
        """This source's split texts, then the subword models and the encoded splits: every
        file written, and their record."""
        remove_damaged_reusable(cfg, folder)
        folder.mkdir(parents=True, exist_ok=True)
        corpus_summary = self.write_splits(cfg, corpus, folder)
        if cfg.documents is not None:
            corpus_summary |= build_documents(cfg, folder)
        return encode_splits(cfg, folder, corpus_summary)

    def locate(self, cfg: DataConfig) -> LocatedCorpus:
        """Find (or fetch) the corpus; CorpusError or FetchError when it cannot be had."""
        raise NotImplementedError

    def write_splits(self, cfg: DataConfig, corpus: LocatedCorpus, folder: Path) -> dict[str, Any]:
        """Write `<split>.<src_lang>` and `<split>.<tgt_lang>` for train, valid and test
        into `folder`, one cleaned sentence a line; return the corpus counts (lines read,
        skipped, ...) for the summary."""
        raise NotImplementedError


def sentence_converters(cfg: DataConfig) -> dict[str, Any]:
    """`convert_src` / `convert_tgt` for the readers of `seq2seq.data.corpus`: OpenCC t2s
    on the Chinese side with data.traditional_to_simplified, else none."""
    if not cfg.traditional_to_simplified:
        return {}
    return {f"convert_{cfg.chinese_side()}": traditional_to_simplified()}
