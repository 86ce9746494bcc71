"""read_pairs(): per-line decoding, malformed lines skipped and counted, normalisation."""

from __future__ import annotations

import logging
import zipfile

import pytest

from seq2seq.data.corpus import CorpusError, normalise, read_pairs, traditional_to_simplified

COLUMNS = {"src_column": 1, "tgt_column": 0, "num_columns": 3}


def write_lines(path, lines: list[bytes]):
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def test_malformed_lines_are_skipped_counted_and_reported(tmp_path, caplog):
    path = write_lines(
        tmp_path / "pairs.txt",
        [
            "Hi.\t你好。\tcc".encode(),
            b"no tabs at all",  # 2: wrong number of columns
            "Run.\t跑。\tcc".encode(),
            "  \t空的\tcc".encode(),  # 4: empty English (target) side after stripping
            b"Bad \xff\xfe bytes\t\xe5\x9d\x8f\tcc",  # 5: not UTF-8
            "Wait!\t等等！\tcc\textra".encode(),  # 6: four columns
            "Go.\t走。\tcc".encode(),
        ],
    )
    with caplog.at_level(logging.WARNING):
        pairs, stats = read_pairs(path, **COLUMNS, max_malformed_share=0.6)
    assert pairs == [("你好。", "Hi."), ("跑。", "Run."), ("走。", "Go.")]
    assert stats.lines_read == 7
    assert stats.malformed_lines == [2, 4, 5, 6]
    warning = caplog.records[-1].getMessage()
    assert "pairs.txt" in warning and "2, 4, 5, 6" in warning and "4 malformed" in warning


def test_mostly_malformed_file_is_rejected(tmp_path):
    lines = [b"one\ttwo\tthree"] + [b"just one column"] * 3
    path = write_lines(tmp_path / "wrong.txt", lines)
    with pytest.raises(CorpusError, match="wrong.txt.*3 of 4.*wrong file"):
        read_pairs(path, **COLUMNS, max_malformed_share=0.5)
    pairs, stats = read_pairs(path, **COLUMNS, max_malformed_share=0.8)
    assert len(pairs) == 1 and stats.malformed == 3


def test_zip_member_reads_like_the_plain_file(tmp_path):
    lines = ["Hi.\t你好。\tcc".encode(), "Go.\t走。\tcc".encode()]
    plain = write_lines(tmp_path / "pairs.txt", lines)
    archive_path = tmp_path / "pairs.zip"
    with zipfile.ZipFile(archive_path, "w") as archive:
        archive.writestr("inner.txt", plain.read_bytes())
    from_zip, stats = read_pairs(archive_path, member="inner.txt", **COLUMNS)
    assert from_zip == read_pairs(plain, **COLUMNS)[0]
    assert stats.source.endswith("pairs.zip!inner.txt")
    with pytest.raises(CorpusError, match="missing.txt"):
        read_pairs(archive_path, member="missing.txt", **COLUMNS)


def test_normalise_nfkc_and_whitespace():
    assert normalise("  Ｔｏｍ\u3000 is\u00a0\u00a0here！ ") == "Tom is here!"
    assert normalise("ﬁne\u2003 \n") == "fine"


def test_crlf_line_endings_are_not_part_of_the_text(tmp_path):
    path = tmp_path / "pairs.txt"
    path.write_bytes("Hi.\t你好。\tcc\r\n".encode())
    assert read_pairs(path, **COLUMNS)[0] == [("你好。", "Hi.")]


def test_traditional_to_simplified_only_on_the_chinese_side(tmp_path):
    path = write_lines(tmp_path / "pairs.txt", ["I speak 漢語.\t我說漢語。\tcc".encode()])
    pairs, stats = read_pairs(path, **COLUMNS, convert_src=traditional_to_simplified())
    assert pairs == [("我说汉语。", "I speak 漢語.")]
    assert stats.converted_to_simplified == 1


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(CorpusError, match="does not exist"):
        read_pairs(tmp_path / "absent.txt", **COLUMNS)
