"""Fuzzing `read_pairs` with arbitrary corpus files (hypothesis).

Whatever the bytes, reading either refuses the file with a CorpusError (no pair left,
or bytes that read as UTF-16/32 text) or returns pairs such that every line read is accounted for (kept, malformed or skipped for a control
character) and no kept sentence holds a control character, a tab or a byte-order mark.
"""

from __future__ import annotations

import codecs
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seq2seq.data.corpus import CONTROL_CHARACTERS, CorpusError, read_pairs
from seq2seq.text_encoding import SAMPLE_BYTES

BOM = "\ufeff"
CONTROL_TEXT = st.sampled_from(["\x00", "\x01", "\x1b", "\x7f", "\x85", "\x9f", "\r", "\x0b"])
TEXT_LINE = st.lists(
    st.one_of(
        st.text(max_size=12),  # any code point, surrogates excluded
        st.sampled_from(["\t", "\t", BOM, " ", "\u3000", "Hi.", "你好。"]),
        CONTROL_TEXT,
    ),
    max_size=12,
).map("".join)
BYTE_LINE = st.one_of(
    TEXT_LINE.map(lambda text: text.encode("utf-8", "surrogatepass")),
    st.binary(max_size=40),
    st.builds(lambda n: b"long " * n + b"\t" + "长".encode() * n, st.integers(1000, 5000)),
)
CORPUS = st.tuples(
    st.lists(BYTE_LINE, max_size=25),
    st.booleans(),  # a BOM first
    st.sampled_from([b"\n", b"\r\n"]),  # line ending
    st.booleans(),  # a final line ending
)


def corpus_bytes(lines: list[bytes], bom: bool, ending: bytes, final_ending: bool) -> bytes:
    data = ending.join(line.replace(b"\n", b" ") for line in lines)
    if final_ending and lines:
        data += ending
    return (b"\xef\xbb\xbf" if bom else b"") + data


def expected_line_count(data: bytes) -> int:
    """Lines a reader splitting at b"\\n" sees (a last line without an ending counts)."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def check_one_corpus(folder: Path, corpus: tuple) -> bool:
    """Read one generated corpus; assert the invariants. True when the file was refused."""
    data = corpus_bytes(*corpus)
    path = folder / "corpus.txt"
    path.write_bytes(data)
    try:
        pairs, stats = read_pairs(
            path, src_column=0, tgt_column=1, num_columns=2, max_malformed_share=1.0
        )
    except CorpusError as error:
        if "the project reads UTF-8" in str(error):
            # bytes that read as UTF-16/32 text (seq2seq.text_encoding): a UTF-16/32
            # byte-order mark, or NUL bytes in the part looked at
            marked = data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
            assert marked or 0 in data[:SAMPLE_BYTES], str(error)
            return True
        assert "no sentence pair" in str(error)  # with share 1.0, only an empty result
        return True
    assert stats.lines_read == expected_line_count(data)
    assert len(pairs) + stats.malformed + stats.control_chars == stats.lines_read
    for src, tgt in pairs:
        for text in (src, tgt):
            assert text and text == text.strip()
            assert not CONTROL_CHARACTERS.search(text), repr(text)
            assert "\t" not in text and BOM not in text
    return False


def run_fuzz(max_examples: int) -> tuple[int, int]:
    """Run the property `max_examples` times; return (inputs generated, files refused)."""
    counts = {"inputs": 0, "refused": 0}
    with tempfile.TemporaryDirectory() as folder:

        @settings(
            max_examples=max_examples,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(CORPUS)
        def property_holds(corpus: tuple) -> None:
            counts["inputs"] += 1
            counts["refused"] += check_one_corpus(Path(folder), corpus)

        property_holds()
    return counts["inputs"], counts["refused"]


@pytest.mark.attack("corpus")
def test_fuzz_corpus_quick():
    inputs, _ = run_fuzz(max_examples=100)
    assert inputs >= 100


@pytest.mark.faults
@pytest.mark.attack("corpus")
def test_fuzz_corpus(fault_figures):
    try:
        inputs, refused = run_fuzz(max_examples=3000)
    except Exception:
        fault_figures.add("corpus_fuzz_crashes", 1)
        raise
    fault_figures.add("corpus_fuzz_inputs", inputs)
    fault_figures.add("corpus_fuzz_refused", refused)
    fault_figures.add("corpus_fuzz_crashes", 0)
    assert inputs >= 3000
