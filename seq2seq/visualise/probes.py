"""Probe sentences with hand-labelled word links, and their mapping onto subword pieces.

File format (`probes/zh_en.tsv`, or any file given as `logging.probe_file`): UTF-8, one
probe per line, `#` starts a comment line, three tab-separated columns

    source <TAB> reference translation <TAB> links
    我爱中国。<TAB>I love China.<TAB>I=我 love=爱 China=中国 .=。

`links` is a space-separated list of `TARGET=SOURCE`, `TARGET=SOURCE+SOURCE...`: a piece of
the reference and the source text(s) it translates. A word may appear in several links
(`Good=晚安 night=晚安`: one source word, two target words). Words without a link (English
articles, Chinese particles such as 了 and 吗) are not scored.

Matching: both texts and link strings are NFKC-normalised (as sentencepiece does, so
"！" is "!"); whitespace is not counted; a match may not cut a Latin word (`I` does not
match inside `It`), Chinese text matches anywhere. A string found more than once must say
which occurrence it means, `word#2`; an ambiguous or missing string is an error.

From words to pieces (the corpus side is cut by sentencepiece, not by spaces): the pieces
of a text, with ▁ removed, spell the normalised text without its spaces, so every piece
covers a known range of characters. A target word is represented by the first piece that
overlaps it, and a link's source side by every piece that overlaps a linked character.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from pathlib import Path

from seq2seq.data.languages import base_language
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.metrics.alignment_accuracy import Link
from seq2seq.special_tokens import EOS_PIECE
from seq2seq.text_encoding import decoded_text
from seq2seq.visualise.text_matrix import WORD_BOUNDARY

PROBE_FOLDER = Path(__file__).with_name("probes")
LINK_MARK, SOURCE_SEPARATOR, OCCURRENCE_MARK = "=", "+", "#"


@dataclass(frozen=True)
class Probe:
    source: str
    reference: str
    links: tuple[tuple[str, tuple[str, ...]], ...]  # (target text, its source texts)


@dataclass
class EncodedProbe:
    """A probe as the model sees it; links refer to piece positions (EOS not linked)."""

    probe: Probe
    source_ids: list[int]
    target_ids: list[int]
    source_pieces: list[str]  # EOS included, like `Translation.source_pieces`
    target_pieces: list[str]  # EOS included
    links: list[Link]


# ---------------------------------------------------------------- reading


def load_probes(path: str | Path) -> list[Probe]:
    """Probes of a file in the format of the module docstring."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"probe file {path} does not exist (logging.probe_file)")
    probes = []
    text = decoded_text(path.read_bytes(), str(path))  # UTF-16/32: a ValueError naming it
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("#"):
            probes.append(parse_probe_line(line, f"{path}:{number}"))
    return probes


def parse_probe_line(line: str, where: str) -> Probe:
    """`source<TAB>reference<TAB>links` → Probe; `where` names the line in errors."""
    columns = line.rstrip("\n").split("\t")
    if len(columns) != 3 or not all(column.strip() for column in columns):
        raise ValueError(
            f"{where}: expected 3 non-empty tab-separated columns "
            f"(source, reference, links), got {len(columns)}"
        )
    source, reference, links = (column.strip() for column in columns)
    return Probe(source, reference, tuple(_parse_link(text, where) for text in links.split()))


def _parse_link(text: str, where: str) -> tuple[str, tuple[str, ...]]:
    target, mark, sources = text.partition(LINK_MARK)
    parts = tuple(sources.split(SOURCE_SEPARATOR))
    if not mark or not target or not all(parts):
        raise ValueError(f"{where}: link {text!r} is not TARGET=SOURCE[+SOURCE...]")
    return target, parts


def swap_probe(probe: Probe) -> Probe:
    """The probe for the opposite direction: reference becomes source, links reversed."""
    reversed_links: dict[str, list[str]] = {}
    for target, sources in probe.links:
        for source in sources:
            reversed_links.setdefault(source, []).append(target)
    links = tuple((source, tuple(targets)) for source, targets in reversed_links.items())
    return Probe(probe.reference, probe.source, links)


def probes_for(src_lang: str, tgt_lang: str, probe_file: str | Path | None = None) -> list[Probe]:
    """`probe_file` when given; else the built-in list for the pair (either direction)
    from `probes/<src>_<tgt>.tsv`; [] when there is none."""
    if probe_file:
        return load_probes(probe_file)
    src, tgt = base_language(src_lang), base_language(tgt_lang)  # files use ISO 639-1 codes
    if (PROBE_FOLDER / f"{src}_{tgt}.tsv").is_file():
        return load_probes(PROBE_FOLDER / f"{src}_{tgt}.tsv")
    if (PROBE_FOLDER / f"{tgt}_{src}.tsv").is_file():
        return [swap_probe(probe) for probe in load_probes(PROBE_FOLDER / f"{tgt}_{src}.tsv")]
    return []


# ---------------------------------------------------------------- from text to pieces


def encode_probe(probe: Probe, src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer) -> EncodedProbe:
    """Ids, pieces and piece-level links of a probe; ValueError names the probe on failure."""
    try:
        source_ranges = piece_ranges(probe.source, src_tokenizer.pieces(probe.source))
        target_ranges = piece_ranges(probe.reference, tgt_tokenizer.pieces(probe.reference))
        links: dict[int, set[int]] = {}
        for target, sources in probe.links:
            span = find_text(probe.reference, target)
            first_piece = min(_overlapping(target_ranges, span))
            for source in sources:
                links.setdefault(first_piece, set()).update(
                    _overlapping(source_ranges, find_text(probe.source, source))
                )
    except ValueError as error:
        raise ValueError(f"probe {probe.source!r} / {probe.reference!r}: {error}") from error
    return EncodedProbe(
        probe,
        src_tokenizer.encode(probe.source),
        tgt_tokenizer.encode(probe.reference),
        src_tokenizer.pieces(probe.source) + [EOS_PIECE],
        tgt_tokenizer.pieces(probe.reference) + [EOS_PIECE],
        [Link(target, frozenset(sources)) for target, sources in sorted(links.items())],
    )


def normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def piece_ranges(text: str, pieces: list[str]) -> list[range]:
    """The characters of `text` (normalised, whitespace not counted) each piece covers."""
    surfaces = [piece.replace(WORD_BOUNDARY, "") for piece in pieces]
    expected = "".join(normalise(text).split())
    if "".join(surfaces) != expected:
        raise ValueError(f"the pieces {pieces} do not spell the text {expected!r}")
    ranges, start = [], 0
    for surface in surfaces:
        ranges.append(range(start, start + len(surface)))
        start += len(surface)
    return ranges


def find_text(text: str, wanted: str) -> range:
    """Characters of `text` (normalised, whitespace not counted) that `wanted` matches.

    `wanted` may end in `#k` to pick its k-th occurrence; see the module docstring.
    """
    needle, occurrence = _split_occurrence(wanted)
    text, needle = normalise(text), normalise(needle)
    starts = [
        start
        for start in range(len(text) - len(needle) + 1)
        if text.startswith(needle, start) and not _cuts_word(text, start, start + len(needle))
    ]
    if not starts or (occurrence or 1) > len(starts):
        raise ValueError(f"{wanted!r} does not occur in {text!r}")
    if occurrence is None and len(starts) > 1:
        raise ValueError(
            f"{needle!r} occurs {len(starts)} times in {text!r}; write {needle}#1, {needle}#2..."
        )
    start = starts[(occurrence or 1) - 1]
    before = sum(not ch.isspace() for ch in text[:start])
    return range(before, before + sum(not ch.isspace() for ch in needle))


def _split_occurrence(wanted: str) -> tuple[str, int | None]:
    """`word#2` → ("word", 2); `word` → ("word", None)."""
    needle, mark, number = wanted.rpartition(OCCURRENCE_MARK)
    if mark and needle and number.isdigit() and int(number) >= 1:
        return needle, int(number)
    return wanted, None


def _is_latin_alnum(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


def _cuts_word(text: str, start: int, end: int) -> bool:
    """True when text[start:end] begins or ends inside a Latin word."""
    cuts_start = start > 0 and _is_latin_alnum(text[start - 1]) and _is_latin_alnum(text[start])
    cuts_end = end < len(text) and _is_latin_alnum(text[end - 1]) and _is_latin_alnum(text[end])
    return cuts_start or cuts_end


def _overlapping(ranges: list[range], span: range) -> set[int]:
    """Indices of the ranges that share a character with `span`."""
    return {index for index, piece in enumerate(ranges) if set(piece) & set(span)}
