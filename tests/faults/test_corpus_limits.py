"""Attacks on the corpus limits: a single huge line, and a corpus that changed under a run.

A line longer than `data.source.max_line_bytes` is counted as malformed while it streams by, never
held whole; a corpus whose content changed since its manifest was written is accepted when
`data.source.sha256` is null (as documented) but said so in one warning with both hashes.
"""

from __future__ import annotations

import hashlib
import logging
import tracemalloc
import zipfile
from pathlib import Path
from urllib.request import urlopen

import pytest

from seq2seq.data import fetch as fetch_module
from seq2seq.data import prepare as prepare_module
from seq2seq.data.corpus import read_pairs
from seq2seq.data.fetch import MIRROR_ENV, fetch, manifest_path
from seq2seq.data.settings import DEFAULT_MAX_LINE_BYTES, DataConfig
from seq2seq.data.sources import tabular

GOOD_LINES = [
    b"Hi.\t\xe4\xbd\xa0\xe5\xa5\xbd\xe3\x80\x82\tCC-BY #1",
    b"Run!\t\xe8\xb7\x91\tCC-BY #2",
]
GOOD_PAIRS = [("你好。", "Hi."), ("跑", "Run!")]
HUGE_LINE_BYTES = 100_000_000
MiB = 1 << 20


@pytest.fixture(autouse=True)
def local_only(monkeypatch):
    """No mirror leaks in from the environment (the Makefile sets one); file:// URLs only."""
    monkeypatch.delenv(MIRROR_ENV, raising=False)

    def urlopen_file(request, *args, **kwargs):
        url = request.full_url if hasattr(request, "full_url") else str(request)
        assert url.startswith("file://"), f"would contact {url}"
        return urlopen(request, *args, **kwargs)

    monkeypatch.setattr(fetch_module, "urlopen", urlopen_file)


def read(path: Path, **options):
    settings = {"src_column": 1, "tgt_column": 0, "num_columns": 3, **options}
    return read_pairs(path, **settings)


def write_huge_line(stream, size: int, chunk: bytes = b"a" * MiB) -> None:
    """`size` bytes of one line (no b"\\n"), written by chunks so the test holds little."""
    for _ in range(size // len(chunk)):
        stream.write(chunk)
    stream.write(chunk[: size % len(chunk)])


def corpus_with_huge_line(stream, size: int) -> None:
    """Good line 1, good line 2, the huge line 3, good line 4 (line 1 again)."""
    stream.write(b"\n".join(GOOD_LINES) + b"\n")
    write_huge_line(stream, size)
    stream.write(b"\n" + GOOD_LINES[0] + b"\n")


def peak_while(function):
    """`function()`'s result and the peak bytes traced (tracemalloc) while it ran."""
    tracemalloc.start()
    try:
        result = function()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


# --- item 5: one huge line -------------------------------------------------------------------


@pytest.mark.attack("corpus")
def test_huge_line_in_a_zip_is_malformed_without_being_held(tmp_path, caplog):
    """A ~100 KB zip expanding to one 100 MB line: refused as it streams, at the cap's memory."""
    path = tmp_path / "huge.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("huge.txt", "w", force_zip64=True) as member:
            corpus_with_huge_line(member, HUGE_LINE_BYTES)
    assert path.stat().st_size < 1_000_000
    with caplog.at_level(logging.WARNING):
        (pairs, stats), peak = peak_while(lambda: read(path, member="huge.txt"))
    assert pairs == GOOD_PAIRS + GOOD_PAIRS[:1]
    assert stats.lines_read == 4 and stats.malformed_lines == [3] and stats.long_lines == [3]
    assert peak < 10_000_000, f"peak {peak:,} bytes reading a 100 MB line (cap 1 MiB)"
    assert f"data.source.max_line_bytes={DEFAULT_MAX_LINE_BYTES:,}" in caplog.text
    assert "at line(s) 3" in caplog.text


@pytest.mark.attack("corpus")
def test_huge_line_in_a_plain_file_is_malformed_without_being_held(tmp_path):
    """The cap holds for a plain .txt corpus too, even for a line of well-formed columns."""
    path = tmp_path / "huge.txt"
    with open(path, "wb") as stream:
        stream.write(b"\n".join(GOOD_LINES) + b"\n")
        stream.write(b"long\t")
        write_huge_line(stream, 20_000_000)
        stream.write(b"\tattribution\n" + GOOD_LINES[1] + b"\n")
    (pairs, stats), peak = peak_while(lambda: read(path))
    assert pairs == GOOD_PAIRS + GOOD_PAIRS[1:]
    assert stats.malformed_lines == [3] and stats.long_lines == [3]
    assert peak < 10_000_000, f"peak {peak:,} bytes reading a 20 MB line (cap 1 MiB)"


@pytest.mark.attack("corpus")
@pytest.mark.parametrize("ending", [b"\n", b"\r\n"])
@pytest.mark.parametrize("final_ending", [True, False])
def test_line_at_the_cap_is_kept_one_byte_more_is_not(tmp_path, ending, final_ending):
    """The cap counts the bytes of a line before its b"\\n" (the b"\\r" of a CRLF counts)."""
    lines = [b"x" * 100 + b"\tlong\tline", b"ab\tcd\tefg", b"ab\tcd\tef"]  # 110, 9, 8 bytes
    path = tmp_path / "corpus.txt"
    path.write_bytes(ending.join(lines) + (ending if final_ending else b""))
    cap = 8 + len(ending) - 1  # the third line, with its \r in a CRLF file
    pairs, stats = read(path, max_line_bytes=cap, max_malformed_share=0.9)
    assert pairs == [("cd", "ab")] and stats.long_lines == stats.malformed_lines == [1, 2]
    pairs, stats = read(path, max_line_bytes=cap + 1, max_malformed_share=0.9)
    assert pairs == [("cd", "ab")] * 2 and stats.long_lines == [1] and stats.lines_read == 3


@pytest.mark.attack("corpus")
def test_max_line_bytes_is_a_validated_data_setting(tmp_path):
    assert DataConfig().source_options.max_line_bytes == DEFAULT_MAX_LINE_BYTES == 1_048_576
    for bad in (0, -1):
        with pytest.raises(ValueError, match="data.source.max_line_bytes must be > 0"):
            DataConfig(source={"name": "tabular", "max_line_bytes": bad}, root=str(tmp_path))


@pytest.mark.attack("corpus")
def test_prepare_reads_the_corpus_with_data_max_line_bytes(tmp_path, monkeypatch):
    """prepare passes data.source.max_line_bytes to the corpus reader."""
    passed = {}

    class Stop(Exception):
        pass

    def iter_pairs_spy(*args, **options):
        passed.update(options)
        raise Stop

    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "toy.txt").write_bytes(b"\n".join(GOOD_LINES) + b"\n")
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    monkeypatch.setattr(tabular, "iter_pairs", iter_pairs_spy)
    cfg = DataConfig(
        source={"name": "tabular", "url": "https://example.org/toy.txt", "member": "",
                "max_line_bytes": 4321},
        root=str(tmp_path / "data"),
    )  # fmt: skip
    with pytest.raises(Stop):
        prepare_module.prepare(cfg)
    assert passed["max_line_bytes"] == 4321


# --- item 6: a changed corpus with data.source.sha256 = null ----------------------------------------


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def changed_warnings(caplog) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno == logging.WARNING and "data.source.sha256" in record.getMessage()
    ]


@pytest.mark.attack("fetch")
def test_changed_mirror_copy_is_accepted_with_one_warning(tmp_path, caplog):
    old, new = b"\n".join(GOOD_LINES) + b"\n", GOOD_LINES[0] + b"\n"
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "corpus.txt").write_bytes(old)
    url = "https://example.org/corpus.txt"
    with caplog.at_level(logging.INFO):
        target = fetch(url, root=tmp_path / "data", mirror=mirror)
        assert changed_warnings(caplog) == []  # the first copy changes nothing
        fetch(url, root=tmp_path / "data", mirror=mirror)
        assert changed_warnings(caplog) == []  # the same content again
        (mirror / "corpus.txt").write_bytes(new)
        target = fetch(url, root=tmp_path / "data", mirror=mirror)
    assert target.read_bytes() == new  # accepted: data.source.sha256 is null
    assert f'"sha256": "{sha256_hex(new)}"' in manifest_path(target).read_text()
    (message,) = changed_warnings(caplog)
    assert str(target) in message and sha256_hex(old) in message and sha256_hex(new) in message
    assert "data.source.sha256 pins" in message


@pytest.mark.attack("fetch")
def test_changed_download_beside_an_old_manifest_is_accepted_with_one_warning(tmp_path, caplog):
    """The corpus file was deleted (its manifest kept) and the source now serves other bytes."""
    source = tmp_path / "web" / "corpus.txt"
    source.parent.mkdir()
    source.write_bytes(b"\n".join(GOOD_LINES) + b"\n")
    url = source.as_uri()
    target = fetch(url, root=tmp_path / "data")
    target.unlink()
    source.write_bytes(GOOD_LINES[1] + b"\n")
    with caplog.at_level(logging.WARNING):
        fetch(url, root=tmp_path / "data")
    (message,) = changed_warnings(caplog)
    old, new = sha256_hex(b"\n".join(GOOD_LINES) + b"\n"), sha256_hex(GOOD_LINES[1] + b"\n")
    assert str(target) in message and old in message and new in message


@pytest.mark.attack("fetch")
def test_corpus_copied_again_with_its_recorded_content_warns_nothing(tmp_path, caplog):
    """A mirror copy made again over a damaged target, with the content its manifest
    records: nothing changed for the runs, so no warning."""
    data = b"\n".join(GOOD_LINES) + b"\n"
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "corpus.txt").write_bytes(data)
    url = "https://example.org/corpus.txt"
    target = fetch(url, root=tmp_path / "data", mirror=mirror, sha256=sha256_hex(data))
    target.write_bytes(b"damaged")
    with caplog.at_level(logging.WARNING):
        fetch(url, root=tmp_path / "data", mirror=mirror)
    assert target.read_bytes() == data and changed_warnings(caplog) == []
