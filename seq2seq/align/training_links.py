"""The word links of the training split, moved onto its subword pieces, for guided alignment.

Where the links come from (`training_links`), the first that applies:

1. `data.alignments=PATH`: a Pharaoh file (`seq2seq.align.pharaoh`), one line per line of the
   training split as prepared (`train.<src_lang>`, `train.<tgt_lang>` of the prepared folder,
   before `data.max_len` drops long pairs), counting on each line the words of
   `seq2seq.align.words` of the text as the corpus writes it: unsegmented Chinese one word
   per character, other text its whitespace tokens (the tokens `seq2seq-align-baseline`
   reads). Sure and possible links alike.
2. A toy task: its known alignment, target symbol j to source symbol j (copy) or n − 1 − j
   (reverse).
3. The statistical aligner, eflomal (the `align` extra; `seq2seq.align.statistical`), on the
   kept training pairs in those same words, both directions, symmetrised with
   grow-diag-final-and, as `seq2seq-align-baseline` aligns them.

Word links → piece links, exactly: the word link (i, j) links every piece of target word j
to every piece of source word i (`piece_words`: the word each piece of the ids the model
reads belongs to), so

    piece links = {(t, s) : word(t) = j, word(s) = i, (i, j) a word link}

and EOS, which belongs to no word, is never linked. A corpus's links are cached in its
prepared folder (`seq2seq.data.links`) under a hash of their inputs: both subword models,
the kept training pairs, and the links file's content and rows, or the aligner's version
and settings. A toy task's are made in memory at each start, as its data is.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from seq2seq.align.pharaoh import Link, check_links_fit, read_links
from seq2seq.align.statistical import (
    BaselineError,
    EflomalSettings,
    eflomal_version,
    run_eflomal,
    symmetrise,
)
from seq2seq.align.words import piece_words, words
from seq2seq.config.build import ConfigError
from seq2seq.config.schema import needs_training_links
from seq2seq.data.batching import ParallelData
from seq2seq.data.links import GuidedSplit, PieceLinks, cached_links, stored_rows
from seq2seq.data.settings import source_name
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.data.toy_tasks import gold_alignment

log = logging.getLogger(__name__)

FORMAT = 1  # of the cache key
SYMMETRISATION = "grow-diag-final-and"
NO_LINKS = (
    "alignment=guided needs word links of the training split, and there is no way to make "
    "them: install the statistical aligner (pip install 'seq2seq-attention[align]', which "
    "brings eflomal) or give data.alignments=PATH (a Pharaoh file, one line per line of the "
    "prepared train.<src_lang>)"
)


# ---------------------------------------------------------------- words to pieces


def piece_links(
    word_links: Iterable[Link],
    source_words: Sequence[int | None],
    target_words: Sequence[int | None],
) -> np.ndarray:
    """(k, 2) int64 piece links [t, s], sorted, of the word links (i, j) (source word,
    target word), given the word of each source and target piece (None: no word)."""
    source_pieces, target_pieces = _pieces_of(source_words), _pieces_of(target_words)
    pairs = {
        (t, s)
        for i, j in word_links
        for t in target_pieces.get(j, ())
        for s in source_pieces.get(i, ())
    }
    return np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)


def _pieces_of(owners: Sequence[int | None]) -> dict[int, list[int]]:
    """Word index → the positions of its pieces."""
    pieces: dict[int, list[int]] = defaultdict(list)
    for position, word in enumerate(owners):
        if word is not None:
            pieces[word].append(position)
    return pieces


def piece_owners(text: str, ids: Sequence[int], tokenizer: Tokenizer) -> list[int | None]:
    """The word of `text` (`seq2seq.align.words`) each of its pieces `ids` belongs to."""
    return piece_words(text, [tokenizer.id_to_piece(index) for index in ids])


# ---------------------------------------------------------------- the sources of links


def file_word_links(path: Path, split: ParallelData) -> list[frozenset[Link]]:
    """The links of each kept example, read from its line of a Pharaoh file of the stored
    split; ConfigError naming `data.alignments` when the file does not fit the split."""
    rows, total = stored_rows(split)
    try:
        lines = read_links(path)
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ConfigError(f"data.alignments={path}: {error}") from error
    if len(lines) != total:
        raise ConfigError(
            f"data.alignments={path} has {len(lines)} lines, the training split {total} "
            "(one line of links per line of the prepared train.<src_lang>)"
        )
    chosen = []
    for index, row in enumerate(rows.tolist()):
        links = lines[row]
        source, target = split.src_lines[index], split.tgt_lines[index]
        try:
            check_links_fit(links, len(words(source)), len(words(target)), f"{path} line {row + 1}")
        except ValueError as error:
            raise ConfigError(f"data.alignments: {error}") from error
        chosen.append(links.possible)
    return chosen


def aligner_word_links(
    sources: Sequence[str], targets: Sequence[str], settings: EflomalSettings
) -> list[frozenset[Link]]:
    """eflomal's links of each pair in the words of `seq2seq.align.words`, both directions
    symmetrised with grow-diag-final-and."""
    try:
        found = run_eflomal(
            [words(text) for text in sources], [words(text) for text in targets], settings
        )
    except BaselineError as error:  # the aligner failed: one line, as a config problem
        raise ConfigError(f"alignment.guided: the statistical aligner failed: {error}") from error
    return [
        symmetrise(forward, reverse, SYMMETRISATION)
        for forward, reverse in zip(found.forward, found.reverse, strict=True)
    ]


def toy_piece_links(task: str, split: ParallelData) -> Iterator[np.ndarray]:
    """The known links of each toy example: target j to source `gold_alignment(task, n)[j]`."""
    for src, _ in split.examples:
        sources = gold_alignment(task, len(src))  # source position per target position
        yield np.array(list(enumerate(sources)), dtype=np.int64).reshape(-1, 2)


def moved_onto_pieces(
    word_links: Sequence[Iterable[Link]],
    split: ParallelData,
    tokenizers: tuple[Tokenizer, Tokenizer],
) -> Iterator[np.ndarray]:
    """`piece_links` of each example of `split`, its word links given in order."""
    src_tokenizer, tgt_tokenizer = tokenizers
    for index, links in enumerate(word_links):
        src_ids, tgt_ids = split.examples[index]
        yield piece_links(
            links,
            piece_owners(split.src_lines[index], src_ids, src_tokenizer),
            piece_owners(split.tgt_lines[index], tgt_ids, tgt_tokenizer),
        )


# ---------------------------------------------------------------- the training split


def with_training_links(data_cfg: Mapping[str, Any], data: Any) -> Any:
    """`data` (a PreparedData) whose training split carries its piece links (a
    `GuidedSplit`), from the first source of the module docstring that applies."""
    links = training_links(data_cfg, data)
    log.info(
        "guided alignment: %s piece links of %s training pairs, from %s",
        f"{links.count():,}", f"{len(links):,}", links_origin(data_cfg),
    )  # fmt: skip
    return replace(data, train=GuidedSplit.of(data.train, links))


def links_origin(data_cfg: Mapping[str, Any]) -> str:
    """Where the links come from, in words, for the log."""
    if data_cfg.get("alignments") is not None:
        return f"data.alignments={data_cfg['alignments']}"
    if source_name(data_cfg) == "toy":
        return f"the toy task {data_cfg['source']['task']}'s known alignment"
    return f"eflomal {eflomal_version()} ({SYMMETRISATION})"


def training_links(data_cfg: Mapping[str, Any], data: Any) -> PieceLinks:
    """The piece links of each example of `data.train`, cached in the prepared folder."""
    split = data.train
    if data_cfg.get("alignments") is None and source_name(data_cfg) == "toy":
        return PieceLinks.from_lists(toy_piece_links(str(data_cfg["source"]["task"]), split))
    source, make = links_source(data_cfg, data)
    if data.folder is None:  # data in memory: nothing is written
        return PieceLinks.from_lists(make())
    key = links_key(source, split, (data.src_tokenizer, data.tgt_tokenizer))
    return cached_links(data.folder, key, make, (split.src_lengths, split.tgt_lengths))


def links_source(
    data_cfg: Mapping[str, Any], data: Any
) -> tuple[dict[str, Any], Callable[[], Iterator[np.ndarray]]]:
    """What the links of the training split are made from besides the pairs (the links
    file and its rows, or the aligner), for the cache key, and what makes them."""
    split, tokenizers = data.train, (data.src_tokenizer, data.tgt_tokenizer)
    if data_cfg.get("alignments") is not None:
        path = Path(data_cfg["alignments"])
        source = {"file": _file_sha256(path), "rows": _rows_sha256(split)}
        return source, lambda: moved_onto_pieces(file_word_links(path, split), split, tokenizers)
    settings = EflomalSettings()
    source = {"aligner": "eflomal", "version": eflomal_version(), **asdict(settings)}

    def make() -> Iterator[np.ndarray]:
        word_links = aligner_word_links(list(split.src_lines), list(split.tgt_lines), settings)
        return moved_onto_pieces(word_links, split, tokenizers)

    return source, make


def links_key(
    source: Mapping[str, Any], split: ParallelData, tokenizers: tuple[Tokenizer, Tokenizer]
) -> str:
    """Short sha256 of what the links are made from (module docstring)."""
    digest = hashlib.sha256(json.dumps({"format": FORMAT, **source}, sort_keys=True).encode())
    for tokenizer in tokenizers:
        digest.update(hashlib.sha256(tokenizer.to_bytes()).digest())
    for src, tgt in zip(split.src_lines, split.tgt_lines, strict=True):
        digest.update(f"{src}\t{tgt}\n".encode())
    return digest.hexdigest()[:16]


def _file_sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as error:
        raise ConfigError(f"data.alignments={path}: {error.strerror or error}") from error


def _rows_sha256(split: ParallelData) -> str:
    rows, total = stored_rows(split)
    return hashlib.sha256(rows.tobytes() + str(total).encode()).hexdigest()


# ---------------------------------------------------------------- at start-up


def check_links_source(cfg: Mapping[str, Any]) -> None:
    """Before any data is prepared: a guided run must have a way to get its links (the
    module docstring's three), else one ConfigError saying how to get them."""
    alignment, data = cfg.get("alignment"), cfg.get("data")
    if not isinstance(alignment, Mapping) or not needs_training_links(cfg):
        return
    path = data.get("alignments")
    if path is not None:
        if not Path(path).is_file():
            raise ConfigError(f"data.alignments={path}: no such file (a Pharaoh file of links)")
        return
    if source_name(data) != "toy" and eflomal_version() is None:
        raise ConfigError(NO_LINKS)
