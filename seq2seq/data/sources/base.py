"""What a data source is: the checks of its keys and the three splits it prepares.

    @registry.register("source", "text_pair")
    class TextPairSource(CorpusSource):
        def validate(self, cfg): ...                       # its keys, ValueError naming one
        def locate(self, cfg) -> LocatedCorpus: ...        # the files read, their content hash
        def write_splits(self, cfg, corpus, folder): ...   # train.<lang>, valid.<lang>, ...

A `DataSource` is built with no arguments and reads everything from the run's
`DataConfig`. `prepare(cfg)` returns the `PreparedData` (tokenisers and splits). A source
that knows which source position each target position copies (the toy tasks) says so with
`known_alignment` and `alignment`: the alignment hook then scores attention against it.

A `CorpusSource` leaves subwords, encoding and caching to the shared pipeline
(`seq2seq.data.prepare.prepare_corpus`): it only says where its corpus is, with a sha256
of its content (`LocatedCorpus`; the prepared files are cached under a key of that hash
and the settings, `seq2seq.data.record`), and writes the six split text files of cleaned
pairs into the prepared folder, returning the counts the summary shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seq2seq.data.corpus import traditional_to_simplified
from seq2seq.data.prepare import PreparedData, prepare_corpus
from seq2seq.data.settings import DataConfig, data_source

__all__ = ["CorpusSource", "DataSource", "LocatedCorpus", "data_source", "sentence_converters"]


class DataSource:
    """Base class of the registered sources (module docstring)."""

    known_alignment = False  # True: `alignment` gives each target position's source

    def validate(self, cfg: DataConfig) -> None:
        """Raise ValueError naming the first invalid key this source reads."""

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

    def validate(self, cfg: DataConfig) -> None:
        cfg.check_corpus_settings()

    def prepare(self, cfg: DataConfig) -> PreparedData:
        return prepare_corpus(cfg, self)

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
