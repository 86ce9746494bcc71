"""Is a sentence written in its language's script? A cheap hint that it is another language.

A model translates whatever it is given: a zh→en model given "Hello world." answers with
fluent nonsense, and nothing tells the reader why. The hint, from the characters alone:

* the sentence's letters are its characters of a Unicode letter category (L*). Digits,
  punctuation, symbols and spaces are not letters, so a sentence of only those ("2024",
  "!!!") is never flagged;
* a letter is in a script when its Unicode name says so: `CJK UNIFIED IDEOGRAPH-6211` (我)
  is Han, `LATIN SMALL LETTER H` Latin, `HIRAGANA LETTER A` kana; full- and half-width
  forms count as their script (`FULLWIDTH LATIN CAPITAL LETTER A` is Latin);
* each language has the scripts it is written in (`SCRIPTS`): Chinese Han; Japanese Han
  and kana; Korean Hangul and Han; English, German, French and the other Latin-script
  languages Latin; Russian Cyrillic; ...;
* a sentence is flagged when fewer than a fifth (`MOST_FOREIGN`) of its letters are in its
  language's scripts. So "Hello world." is flagged for Chinese (0 of 10 letters are Han),
  "我用Python写代码。" is not (5 of 11), nor is "I love 中国." for English (5 of 7 Latin).

A language not in `SCRIPTS` (and the toy tasks, whose symbols are no language) is never
flagged. The check warns; the sentence is translated all the same.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from fractions import Fraction

from seq2seq.data.languages import base_language

# A sentence is flagged when less than this share of its letters is in its language's scripts.
MOST_FOREIGN = Fraction(1, 5)

HAN = ("CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEOGRAPH", "IDEOGRAPHIC ")
KANA = ("HIRAGANA", "KATAKANA")
LATIN_LANGUAGES = (
    "en de fr es it pt nl sv da no nb nn is fi et lv lt pl cs sk sl hr bs sq ro hu tr az uz "
    "id ms tl vi ca eu gl ga cy mt af sw eo la"
).split()


@dataclass(frozen=True)
class Script:
    """How a language is written: the name prefixes of its letters, in words for people."""

    prefixes: tuple[str, ...]
    words: str


LATIN = Script(("LATIN",), "Latin letters")
SCRIPTS: dict[str, Script] = {
    "zh": Script(HAN, "Chinese characters"),
    "ja": Script(HAN + KANA, "Japanese kana or kanji"),
    "ko": Script(("HANGUL",) + HAN, "Hangul or hanja"),
    **{code: LATIN for code in LATIN_LANGUAGES},
    **{code: Script(("CYRILLIC",), "Cyrillic letters") for code in ("ru", "uk", "be", "bg", "mk")},
    "el": Script(("GREEK",), "Greek letters"),
    "he": Script(("HEBREW",), "Hebrew letters"),
    **{code: Script(("ARABIC",), "Arabic letters") for code in ("ar", "fa", "ur")},
    **{code: Script(("DEVANAGARI",), "Devanagari letters") for code in ("hi", "mr", "ne")},
    "th": Script(("THAI",), "Thai letters"),
}
WIDTH_PREFIXES = ("FULLWIDTH ", "HALFWIDTH ")


def language_script(lang: str) -> Script | None:
    """The script a language code is written in (`seq2seq.data.languages`: "zh-Hans" and
    "cmn" are Chinese); None for a language this module does not know."""
    return SCRIPTS.get(base_language(lang))


def in_script(character: str, script: Script) -> bool:
    """True when the character's Unicode name puts it in `script`."""
    name = unicodedata.name(character, "")
    for prefix in WIDTH_PREFIXES:
        name = name.removeprefix(prefix)
    return name.startswith(script.prefixes)


def script_counts(text: str, script: Script) -> tuple[int, int]:
    """(letters of `text` in `script`, all its letters)."""
    letters = [character for character in text if unicodedata.category(character)[0] == "L"]
    return sum(in_script(letter, script) for letter in letters), len(letters)


def script_problem(text: str, lang: str) -> str | None:
    """Why `text` looks like another language than `lang` (module docstring), in words
    that follow `line 3: `; None when it does not, or when `lang`'s script is unknown."""
    script = language_script(lang)
    if script is None:
        return None
    found, letters = script_counts(text, script)
    if letters == 0 or found >= MOST_FOREIGN * letters:
        return None
    return (
        f"{found} of its {letters} letters are {script.words}, the script of the "
        f"model's source language {lang}: is it in another language? Translated anyway"
    )
