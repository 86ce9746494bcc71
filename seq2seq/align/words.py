"""Words of a text, and which word each subword piece of it belongs to.

Alignments link words, the model attends over subword pieces. A *word* is:

* a whitespace-separated token of the text as given, so that English `That's wet.` has
  three words (punctuation stays with its word) and pre-segmented Chinese `那 是 湿 的 。`
  five;
* except in a text that holds no whitespace at all and some Chinese or Japanese
  characters (Han ideographs, kana), such as unsegmented Chinese `那是湿的。`: there every
  such character is a word, a run of other letters or digits (`Python3`, `１２`) is one
  word, and every other character (punctuation) is a word of its own. So unsegmented
  Chinese aligns character by character; Korean, which is written with spaces, does not.

Pieces are matched to the text by their characters: the word-boundary mark `▁` is dropped
and each piece is found where the previous one ended. sentencepiece normalises the text
with NFKC before cutting it (full-width `Ｃｈｉｎａ！１２` becomes `China!12`), so the text is
NFKC-normalised word by word before matching; a character that normalises to several
(`㍿` → `株式会社`) stays in its word. Specials (`</s>`, `<s>`, `<pad>`) belong to no word.
A piece that spans several words (sentencepiece keeps a run of unknown characters such as
`（星期一）` together) belongs to the first of them.

Word-segmented text that splits punctuation off (`He is busy .`, as many gold sets write
English) is read by the model as the corpus writes it (`attach_punctuation`: `He is busy.`),
while its words stay those given: `busy` and `.` are two words, matched by characters.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from seq2seq.special_tokens import BOS_PIECE, EOS_PIECE, PAD_PIECE, UNK_PIECE

WORD_BOUNDARY = "▁"  # sentencepiece's mark of a word start (a space in the text)
UNKNOWN_SURFACE = "⁇"  # how sentencepiece decodes <unk> into text
NOT_IN_A_WORD = frozenset((EOS_PIECE, BOS_PIECE, PAD_PIECE))

CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff"  # kana, Han
CJK_CHARACTER = re.compile(f"[{CJK}]")
CHARACTER_WORD = re.compile(f"[{CJK}]|(?:(?![{CJK}])\\w)+|\\S")  # see the module docstring
WHITESPACE_WORD = re.compile(r"\S+")
CLOSING_MARKS = re.escape(".,!?;:…)]}”’")  # written against the word before them
OPENING_MARKS = re.escape("([{“‘¿¡")  # written against the word after them
SPACED_CLOSING = re.compile(rf"(?<=\S)\s+([{CLOSING_MARKS}]+)(?!\S)")  # `busy .`
SPACED_OPENING = re.compile(rf"(?<!\S)([{OPENING_MARKS}]+)\s+(?=\S)")  # `( yes`


def is_character_segmented(text: str) -> bool:
    """True for a text without whitespace that holds Chinese or Japanese characters."""
    return not any(ch.isspace() for ch in text) and CJK_CHARACTER.search(text) is not None


def word_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of each word of `text` (module docstring)."""
    pattern = CHARACTER_WORD if is_character_segmented(text) else WHITESPACE_WORD
    return [match.span() for match in pattern.finditer(text)]


def words(text: str) -> list[str]:
    """The words of `text`, in order (module docstring)."""
    return [text[start:end] for start, end in word_spans(text)]


def attach_punctuation(text: str) -> str:
    """`text` with each word made only of closing marks (`.`, `?!`, `)`) written against the
    word before it and each word made only of opening marks (`(`, `¿`) against the word
    after it: `He is busy .` → `He is busy.`, `( yes )` → `(yes)`. All other characters,
    spaces included, stay as they are: a text that splits nothing off comes back unchanged."""
    return SPACED_OPENING.sub(r"\1", SPACED_CLOSING.sub(r"\1", text))


def piece_words(text: str, pieces: Sequence[str]) -> list[int | None]:
    """For each piece of `text` (sentencepiece's or the toy symbols), the index of the word
    it belongs to; None for specials. A piece made of `▁` alone belongs to the next word.

    A piece that cannot be found where the previous one ended (a character sentencepiece
    drops or normalises otherwise) is looked for further on; failing that it is given the
    word at the current position, so a sentence is never refused.
    """
    characters, owners = normalised_characters(text)
    cursor, found = 0, []
    for piece in pieces:
        word, cursor = _place(piece, characters, owners, cursor)
        found.append(word)
    return found


def normalised_characters(text: str) -> tuple[str, list[int]]:
    """The NFKC-normalised non-space characters of `text` and the word each comes from."""
    characters: list[str] = []
    owners: list[int] = []
    for index, (start, end) in enumerate(word_spans(text)):
        for character in unicodedata.normalize("NFKC", text[start:end]):
            if not character.isspace():
                characters.append(character)
                owners.append(index)
    return "".join(characters), owners


def _place(piece: str, characters: str, owners: list[int], cursor: int) -> tuple[int | None, int]:
    """(word of `piece`, cursor after it) with the piece matched from `cursor` on."""
    if piece in NOT_IN_A_WORD:
        return None, cursor
    if piece == UNK_PIECE:  # decoded as ⁇, or one unknown character of the source
        width = len(UNKNOWN_SURFACE) if characters.startswith(UNKNOWN_SURFACE, cursor) else 1
        return _owner(owners, cursor), cursor + width
    body = "".join(
        ch
        for ch in unicodedata.normalize("NFKC", piece.replace(WORD_BOUNDARY, ""))
        if not ch.isspace()
    )
    if not body:  # a lone ▁ starts the next word
        return _owner(owners, cursor), cursor
    start = characters.find(body, cursor)
    if start < 0:
        return _owner(owners, cursor), cursor + len(body)
    return owners[start], start + len(body)


def _owner(owners: list[int], cursor: int) -> int | None:
    """The word at `cursor`, the last word past the end, None in an empty text."""
    if not owners:
        return None
    return owners[min(cursor, len(owners) - 1)]
