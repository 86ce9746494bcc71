"""The encoding of a text file a user hands the project, told from its first bytes.

Every reader of a user's text (corpora, translate and evaluate inputs, alignment and gold
files, probe files) expects UTF-8. A file saved as UTF-16 (Windows Notepad's "Unicode",
PowerShell's `>`) or UTF-32 does not fail to read as bytes: its b"\\n" bytes still split it
into lines, so two UTF-16 corpus files come out with unequal line counts, or ASCII text
with a NUL after every letter. So the first `SAMPLE_BYTES` of the file are looked at
before any line is read or counted:

- a UTF-8 byte-order mark is accepted (`check_text_start` returns its length to skip);
- a UTF-16 or UTF-32 byte-order mark (either byte order), or NUL bytes in the pattern of
  UTF-16/32 text without one (`found_encoding`), raise `TextEncodingError`: one line
  naming the file, the encoding found and how to convert it:

      train.zh is UTF-16 LE text (it starts with a UTF-16 LE byte-order mark); the project
      reads UTF-8: convert it, e.g. `iconv -f UTF-16 -t UTF-8 train.zh > train.zh.utf8`
      (PowerShell: `Get-Content train.zh | Set-Content -Encoding utf8 train.zh.utf8`)

Only the sample is read, never the whole file. A stream is checked without consuming it
through its `peek` (`check_stream`).
"""

from __future__ import annotations

import codecs
import re
from pathlib import Path

SAMPLE_BYTES = 4096  # looked at: enough for a BOM and a few lines' worth of NUL pattern
UTF8_BOM = codecs.BOM_UTF8
# Longest first: a UTF-32 LE mark starts with the UTF-16 LE one.
BYTE_ORDER_MARKS = (
    (codecs.BOM_UTF32_LE, "UTF-32 LE"),
    (codecs.BOM_UTF32_BE, "UTF-32 BE"),
    (codecs.BOM_UTF16_LE, "UTF-16 LE"),
    (codecs.BOM_UTF16_BE, "UTF-16 BE"),
)
NUL_SHARE = 0.10  # NUL bytes in the sample above this share: UTF-16/32, not UTF-8 text
# What text holds none of: the C0 controls but tab, line feed and carriage return.
CONTROL_CHARACTERS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class TextEncodingError(ValueError):
    """A text file in an encoding other than UTF-8; the message names the file, the
    encoding and how to convert it."""


def check_text_file(path: str | Path, name: str | None = None) -> int:
    """Check the start of the file at `path` (its first SAMPLE_BYTES only); the number of
    bytes of a UTF-8 byte-order mark to skip (0 or 3). TextEncodingError naming `name`
    (default: the path) for UTF-16 or UTF-32 text. OSError as `open` raises it."""
    with open(path, "rb") as stream:
        return check_text_start(stream.read(SAMPLE_BYTES), name or str(path))


def check_stream(stream, name: str) -> int:
    """`check_text_start` on the first bytes of a buffered binary stream, left unread
    (`peek`); a stream without `peek` is not checked (0)."""
    peek = getattr(stream, "peek", None)
    if peek is None:
        return 0
    return check_text_start(peek(SAMPLE_BYTES)[:SAMPLE_BYTES], name)


def check_text_start(head: bytes, name: str) -> int:
    """The length of the UTF-8 byte-order mark `head` starts with (0 or 3), or
    TextEncodingError when `head`, the first bytes of `name`, is UTF-16 or UTF-32."""
    if head.startswith(UTF8_BOM):
        return len(UTF8_BOM)
    found = found_encoding(head)
    if found is not None:
        raise TextEncodingError(conversion_hint(name, *found))
    return 0


def decoded_text(data: bytes, name: str) -> str:
    """`data`, the whole of a small file, as text: a UTF-8 byte-order mark dropped,
    TextEncodingError for UTF-16/32, UnicodeDecodeError for other bytes that are not UTF-8."""
    skip = check_text_start(data[:SAMPLE_BYTES], name)
    return data[skip:].decode("utf-8")


def found_encoding(head: bytes) -> tuple[str, str, str] | None:
    """(encoding, what shows it, iconv's name of it) when the bytes start UTF-16 or UTF-32
    text; else None. With a mark, iconv is given the encoding without a byte order
    (`UTF-16`), so that it reads the mark and drops it."""
    for mark, encoding in BYTE_ORDER_MARKS:
        if head.startswith(mark):
            return encoding, f"it starts with a {encoding} byte-order mark", encoding[:6]
    encoding = _utf32_without_mark(head) or _utf16_without_mark(head)
    if encoding is None:
        return None
    share = head.count(0) / len(head)
    evidence = (
        f"no byte-order mark, but its first bytes read as {encoding}, {share:.0%} of them NUL"
    )
    return encoding, evidence, encoding.replace(" ", "")


def _utf32_without_mark(head: bytes) -> str | None:
    """UTF-32 without a mark: every code unit's highest byte NUL, the next at most 0x10
    (no code point is above U+10FFFF), and not all NUL."""
    units = [head[start : start + 4] for start in range(0, len(head) - len(head) % 4, 4)]
    if len(units) < 2 or not any(head[: 4 * len(units)]):
        return None
    if all(unit[3] == 0 and unit[2] <= 0x10 for unit in units):
        return "UTF-32 LE"
    if all(unit[0] == 0 and unit[1] <= 0x10 for unit in units):
        return "UTF-32 BE"
    return None


def _utf16_without_mark(head: bytes) -> str | None:
    """UTF-16 without a mark: bytes holding NULs that decode, in one byte order, to text
    without control characters and with more ASCII (line ends, spaces, digits) than in
    the other order; and either many NULs (ASCII text: valid UTF-8 too, but a NUL after
    every letter) or bytes that are not UTF-8 (CJK text, whose NULs are only those of its
    ASCII characters, its line ends and a few characters such as 一, U+4E00)."""
    if 0 not in head:
        return None
    if head.count(0) <= NUL_SHARE * len(head) and _decoded(head, "utf-8") is not None:
        return None
    best, most = None, 0
    for encoding, codec in (("UTF-16 LE", "utf-16-le"), ("UTF-16 BE", "utf-16-be")):
        text = _decoded(head, codec)
        if text is None or CONTROL_CHARACTERS.search(text):
            continue
        ascii_count = sum(character < "\x80" for character in text)
        if ascii_count > most:
            best, most = encoding, ascii_count
    return best


def _decoded(head: bytes, codec: str) -> str | None:
    """`head` decoded, a character cut at its end allowed; None when it is not `codec`."""
    try:
        return codecs.getincrementaldecoder(codec)().decode(head, final=False)
    except UnicodeDecodeError:
        return None


def conversion_hint(name: str, encoding: str, evidence: str, source: str) -> str:
    """The one line of a TextEncodingError: the file, the encoding, how to convert it
    (`source`: the encoding as iconv names it)."""
    return (
        f"{name} is {encoding} text ({evidence}); the project reads UTF-8: convert it, e.g. "
        f"`iconv -f {source} -t UTF-8 {name} > {name}.utf8` (PowerShell: "
        f"`Get-Content {name} | Set-Content -Encoding utf8 {name}.utf8`)"
    )
