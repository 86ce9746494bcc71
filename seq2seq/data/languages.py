"""Language codes: which language a code names, and how that language is written.

The one place that reads a language code (`data.src_lang`, `data.tgt_lang`, a tokeniser's
`lang`): the BLEU tokeniser, the sentencepiece settings, the traditional-to-simplified
conversion and the probe files all ask here. A code is a BCP 47 tag or an ISO 639 code:
only its primary subtag counts, without case, so "zh", "ZH", "zh-Hans" and "zh_TW" all name
Chinese; ISO 639-3 codes that have an ISO 639-1 twin are read as the twin ("cmn", Mandarin,
is "zh", as in the Tatoeba file names).
"""

from __future__ import annotations

ALIASES = {"cmn": "zh"}  # ISO 639-3 → ISO 639-1
CHINESE = "zh"
UNSPACED_CJK = frozenset({"zh", "ja"})  # thousands of characters, no spaces between words


def base_language(code: str) -> str:
    """The language of a code, lower-case, without region or script: "zh-Hans" → "zh",
    "cmn" → "zh", "en_GB" → "en"."""
    primary = code.replace("_", "-").split("-")[0].lower()
    return ALIASES.get(primary, primary)


def is_chinese(code: str) -> bool:
    """True for "zh", "cmn" and their regional and script forms ("zh-Hans", "zh_TW", ...)."""
    return base_language(code) == CHINESE


def is_unspaced_cjk(code: str) -> bool:
    """True for Chinese and Japanese in any form: written without spaces between words,
    with thousands of distinct characters. (Korean is written with spaces: False.)"""
    return base_language(code) in UNSPACED_CJK
