"""The hand-aligned gold sets shipped in `seq2seq/align/gold/`, read for a language pair.

A gold set holds, per part (`valid` for use during training, `test` for reporting), one
line per sentence pair in three files: the source words, the target words (each side's
words are its space-separated tokens; the Chinese side is segmented into words by spaces)
and the links in the Pharaoh format (sure `i-j`, possible `i-j-P`; Och & Ney 2003). A set is
stored for one direction; the other direction reads the same files with the sides and the
links swapped (`i-j` → `j-i`).

The model reads a sentence as the corpus has it: `as_in_corpus` deletes the spaces of a
side written without them (Chinese, Japanese), which gives back the split's sentence.
"""

from __future__ import annotations

from importlib.resources import files
from typing import NamedTuple

from seq2seq.align.pharaoh import Links, check_links_fit, parse_lines
from seq2seq.align.words import words
from seq2seq.data.languages import base_language, is_unspaced_cjk
from seq2seq.text_encoding import decoded_text

GOLD_SETS = {("zh", "en"): "tatoeba_zh_en"}  # (source, target) as stored → folder
PARTS = ("valid", "test")


class GoldPair(NamedTuple):
    """One hand-aligned pair: each side's words separated by spaces, and the links."""

    source: str
    target: str
    links: Links


def stored_pair(src_lang: str, tgt_lang: str) -> tuple[tuple[str, str], bool] | None:
    """(the pair as `GOLD_SETS` stores it, whether that is the other way round) for
    src_lang→tgt_lang, codes such as `cmn` or `zh-Hans` read as their base language; None
    when there is no gold set."""
    pair = (base_language(src_lang), base_language(tgt_lang))
    if pair in GOLD_SETS:
        return pair, False
    return (pair[::-1], True) if pair[::-1] in GOLD_SETS else None


def has_gold_set(src_lang: str, tgt_lang: str) -> bool:
    """Whether `gold_set` has pairs for src_lang→tgt_lang, without reading them."""
    return stored_pair(src_lang, tgt_lang) is not None


def gold_set(src_lang: str, tgt_lang: str, part: str) -> list[GoldPair] | None:
    """The gold pairs of `part` for src_lang→tgt_lang (either stored direction; codes such
    as `cmn` or `zh-Hans` count as their base language); None when there is no gold set."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    found = stored_pair(src_lang, tgt_lang)
    if found is None:
        return None
    pair, swapped = found
    pairs = _read(GOLD_SETS[pair], pair, part)
    return [swap(gold) for gold in pairs] if swapped else pairs


def swap(gold: GoldPair) -> GoldPair:
    """The same pair read in the other direction: sides and link indices exchanged."""
    sure = frozenset((target, source) for source, target in gold.links.sure)
    possible = frozenset((target, source) for source, target in gold.links.possible)
    return GoldPair(gold.target, gold.source, Links(sure, possible))


def as_in_corpus(text: str, lang: str) -> str:
    """A gold side as the corpus writes it: without spaces for Chinese and Japanese."""
    return "".join(text.split()) if is_unspaced_cjk(lang) else text


def _read(folder: str, pair: tuple[str, str], part: str) -> list[GoldPair]:
    """The pairs of one stored gold set; ValueError when its files disagree."""
    where = files("seq2seq.align") / "gold" / folder
    sources, targets = (_lines(where / f"{part}.{lang}") for lang in pair)
    name = f"{folder}/{part}.align"
    links = parse_lines(_lines(where / f"{part}.align"), name)
    if not len(sources) == len(targets) == len(links):
        raise ValueError(f"{folder}/{part}: {len(sources)}, {len(targets)} and {len(links)} lines")
    for number, (source, target, link) in enumerate(zip(sources, targets, links), 1):
        _check_words(source, f"{folder}/{part}.{pair[0]} line {number}")
        _check_words(target, f"{folder}/{part}.{pair[1]} line {number}")
        check_links_fit(link, len(words(source)), len(words(target)), f"{name} line {number}")
    return [GoldPair(*fields) for fields in zip(sources, targets, links)]


def _lines(resource) -> list[str]:
    """The lines of a gold file: UTF-8 (a byte-order mark dropped); UTF-16 or UTF-32 is a
    ValueError naming the file and its encoding (`seq2seq.text_encoding`)."""
    return decoded_text(resource.read_bytes(), str(resource)).splitlines()


def _check_words(text: str, where: str) -> None:
    """The words `seq2seq.align.words` finds must be the gold's space-separated ones (a
    one-word Chinese line without a space would be cut into characters)."""
    if words(text) != text.split():
        raise ValueError(f"{where}: the words of {text!r} are not its space-separated tokens")
