"""Text files in an encoding other than UTF-8, given to every reader of a user's text:
corpora (a tab-separated file, a zip member, the two files of `data.source.name=text_pair`),
`seq2seq-translate --input` and standard input, `seq2seq-evaluate --src/--ref`,
`seq2seq-align --src/--tgt/--gold/--score`, `seq2seq-align-baseline`'s training files,
Pharaoh alignment files, gold files and probe files, and the JSON and YAML files of a run
folder (`seq2seq.bounded_files`).

UTF-16 (Windows Notepad's "Unicode", PowerShell's `>`) used to come out as unequal line
counts (its b"\\n" bytes read as line ends) or as text with a NUL after every letter. Each
is now one line naming the file, the encoding found and how to convert it
(`seq2seq.text_encoding`), exit code 2 for a command, before a line is read or counted;
the file keeps its bytes. A UTF-8 file with a byte-order mark still reads correctly.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import run_main, text_pair_overrides

from seq2seq.align.gold import _lines as gold_lines
from seq2seq.align.pharaoh import read_links
from seq2seq.cli import align, align_baseline, evaluate, translate
from seq2seq.cli.translate import read_text_lines
from seq2seq.data.corpus import CorpusError, read_pairs
from seq2seq.data.prepare import prepare
from seq2seq.data.settings import DataConfig
from seq2seq.study.reading import read_overrides, read_results
from seq2seq.text_encoding import (
    SAMPLE_BYTES,
    TextEncodingError,
    check_text_file,
    check_text_start,
)
from seq2seq.visualise.probes import load_probes

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.attack("encoding")

CHINESE = "我爱中国。\n你好。\n一二三。\n他们在学校。\n"
ENGLISH = "I love China.\nHello.\nOne two three.\nThey are at school.\n"


def utf16_bom(text: str) -> bytes:
    return text.encode("utf-16")  # the machine's order (LE here) with its mark, as Notepad


# encoding: (how the bytes are made, what the error line must name)
ENCODINGS: dict[str, tuple[Callable[[str], bytes], str]] = {
    "utf16_le_bom": (lambda text: b"\xff\xfe" + text.encode("utf-16-le"), "UTF-16 LE"),
    "utf16_be_bom": (lambda text: b"\xfe\xff" + text.encode("utf-16-be"), "UTF-16 BE"),
    "utf32_le_bom": (lambda text: b"\xff\xfe\x00\x00" + text.encode("utf-32-le"), "UTF-32 LE"),
    "utf32_be_bom": (lambda text: b"\x00\x00\xfe\xff" + text.encode("utf-32-be"), "UTF-32 BE"),
    "utf16_le_no_bom": (lambda text: text.encode("utf-16-le"), "UTF-16 LE"),
    "utf16_be_no_bom": (lambda text: text.encode("utf-16-be"), "UTF-16 BE"),
    "utf32_le_no_bom": (lambda text: text.encode("utf-32-le"), "UTF-32 LE"),
}


def write(path: Path, encoding: str, text: str) -> Path:
    path.write_bytes(ENCODINGS[encoding][0](text))
    return path


def assert_names_encoding(message: str, path: Path, encoding: str) -> None:
    """One line naming the file and the encoding, with the iconv command to convert it."""
    assert "\n" not in message.strip(), message
    assert str(path) in message and ENCODINGS[encoding][1] in message, message
    assert "iconv -f UTF-" in message and "-t UTF-8" in message, message


def assert_refused(result: tuple[int, str, str], path: Path, encoding: str) -> None:
    code, out, err = result
    assert code == 2, err
    assert out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert_names_encoding(err, path, encoding)


@pytest.fixture
def victim_bytes():
    """Checks afterwards that every file registered keeps its bytes."""
    kept: dict[Path, bytes] = {}

    def register(path: Path) -> Path:
        kept[path] = path.read_bytes()
        return path

    yield register
    for path, data in kept.items():
        assert path.read_bytes() == data


# ---------------------------------------------------------------- the detection


@pytest.mark.parametrize("encoding", list(ENCODINGS))
@pytest.mark.parametrize("text", [CHINESE * 20, ENGLISH * 20], ids=["chinese", "english"])
def test_each_encoding_is_named_from_the_first_bytes(encoding, text, tmp_path):
    path = write(tmp_path / "train.zh", encoding, text)
    with pytest.raises(TextEncodingError) as error:
        check_text_file(path)
    assert_names_encoding(str(error.value), path, encoding)


@pytest.mark.parametrize(
    "data",
    [CHINESE.encode(), ENGLISH.encode(), b"", b"a", "caf\xe9\n".encode("latin-1"),
     bytes(range(256)) * 16, (CHINESE * 300).encode()],
    ids=["chinese", "english", "empty", "one_byte", "latin1", "binary", "long_chinese"],
)  # fmt: skip
def test_utf8_and_other_bytes_are_not_taken_for_utf16(data):
    assert check_text_start(data[:SAMPLE_BYTES], "f") == 0


def test_a_utf8_byte_order_mark_is_accepted_and_skipped(tmp_path):
    path = tmp_path / "train.zh"
    path.write_bytes(b"\xef\xbb\xbf" + CHINESE.encode())
    assert check_text_file(path) == 3


def test_a_huge_file_is_judged_by_its_first_bytes_only(tmp_path):
    """An 8 GiB sparse file: the check reads SAMPLE_BYTES of it, not the whole."""
    path = tmp_path / "huge.zh"
    with path.open("wb") as stream:
        stream.write(b"\xff\xfe" + ENGLISH.encode("utf-16-le"))
        stream.truncate(8 * 2**30)
    started = time.perf_counter()
    with pytest.raises(TextEncodingError, match="UTF-16 LE"):
        check_text_file(path)
    assert time.perf_counter() - started < 1.0


# ---------------------------------------------------------------- corpora


def tsv() -> str:
    return "".join(f"{en}\t{zh}\n" for en, zh in zip(ENGLISH.split("\n"), CHINESE.split("\n")))


COLUMNS = {"src_column": 0, "tgt_column": 1, "num_columns": 2}


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_a_tab_separated_corpus_is_refused_naming_its_encoding(encoding, tmp_path, victim_bytes):
    path = write(tmp_path / "corpus.tsv", encoding, tsv() * 10)
    victim_bytes(path)
    with pytest.raises(CorpusError) as error:
        read_pairs(path, **COLUMNS)
    assert_names_encoding(str(error.value), path, encoding)


@pytest.mark.parametrize("encoding", ["utf16_le_bom", "utf16_le_no_bom"])
def test_a_zip_member_is_refused_naming_the_member(encoding, tmp_path):
    archive = tmp_path / "corpus.zip"
    with zipfile.ZipFile(archive, "w") as stream:
        stream.writestr("pairs.tsv", ENCODINGS[encoding][0](tsv() * 10))
    with pytest.raises(CorpusError) as error:
        read_pairs(archive, **COLUMNS)
    assert_names_encoding(str(error.value), Path(f"{archive}!pairs.tsv"), encoding)


def test_a_corpus_with_a_utf8_byte_order_mark_reads_as_without(tmp_path):
    plain, marked = tmp_path / "plain.tsv", tmp_path / "marked.tsv"
    plain.write_text(tsv(), encoding="utf-8")
    marked.write_bytes(b"\xef\xbb\xbf" + tsv().encode())
    assert read_pairs(marked, **COLUMNS)[0] == read_pairs(plain, **COLUMNS)[0]


def text_pair_config(tmp_path: Path) -> DataConfig:
    corpus = tmp_path / "corpus"
    return DataConfig(
        name="given", src_lang="en", tgt_lang="zh", root=str(tmp_path / "data"),
        source={"name": "text_pair", "train_prefix": str(corpus / "train"),
                "valid_prefix": str(corpus / "valid"), "test_prefix": str(corpus / "test")},
        src_vocab_size=30, tgt_vocab_size=30, max_len=200, max_tokens=2000,
    )  # fmt: skip


def write_text_pair(tmp_path: Path, encoding: str, side: str = "zh") -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split, copies in (("train", 40), ("valid", 3), ("test", 3)):
        (corpus / f"{split}.en").write_text(ENGLISH * copies, encoding="utf-8")
        (corpus / f"{split}.zh").write_text(CHINESE * copies, encoding="utf-8")
    texts = {"en": ENGLISH * 40, "zh": CHINESE * 40}
    return write(corpus / f"train.{side}", encoding, texts[side])


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_a_utf16_text_pair_file_is_named_not_counted(encoding, tmp_path, victim_bytes):
    victim = victim_bytes(write_text_pair(tmp_path, encoding))
    with pytest.raises(CorpusError) as error:
        prepare(text_pair_config(tmp_path))
    message = str(error.value)
    assert_names_encoding(message, tmp_path / "corpus" / "train.zh", encoding)
    assert "ends after" not in message and "no partner" not in message
    assert victim.is_file()


def test_seq2seq_data_on_a_utf16_train_file_is_one_line(tmp_path):
    """The issue's case, through the real command: Notepad's UTF-16 train.en."""
    path = write_text_pair(tmp_path, "utf16_le_bom", side="en")
    corpus = tmp_path / "corpus"
    done = subprocess.run(
        [sys.executable, "-m", "seq2seq.cli.data", *text_pair_overrides(corpus),
         f"data.root={tmp_path / 'data'}", f"hydra.run.dir={tmp_path / 'hydra'}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("seq2seq-data: ")
    assert_names_encoding(line, path, "utf16_le_bom")


# ---------------------------------------------------------------- the commands' input files


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_translate_input_is_refused_before_loading(encoding, tmp_path, capsys, victim_bytes):
    source = victim_bytes(write(tmp_path / "in.zh", encoding, CHINESE))
    argv = [tmp_path / "absent.pt", "-i", source]
    assert_refused(run_main(translate.main, capsys, *argv), source, encoding)


def test_translate_standard_input_in_utf16_is_one_line(tmp_path, capsys, monkeypatch):
    stdin = io.TextIOWrapper(io.BufferedReader(io.BytesIO(utf16_bom(CHINESE))), "utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    code, out, err = run_main(translate.main, capsys, tmp_path / "absent.pt")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "standard input is UTF-16 LE text" in err


@pytest.mark.parametrize("side", ["--src", "--ref"])
@pytest.mark.parametrize("encoding", ["utf16_le_bom", "utf16_be_no_bom", "utf32_le_bom"])
def test_evaluate_files_are_refused_before_loading(side, encoding, tmp_path, capsys):
    files = {"--src": tmp_path / "src.zh", "--ref": tmp_path / "ref.en"}
    files["--src"].write_text(CHINESE, encoding="utf-8")
    files["--ref"].write_text(ENGLISH, encoding="utf-8")
    write(files[side], encoding, CHINESE if side == "--src" else ENGLISH)
    argv = [tmp_path / "absent.pt", "--src", files["--src"], "--ref", files["--ref"],
            "-o", tmp_path / "out.hyp"]  # fmt: skip
    assert_refused(run_main(evaluate.main, capsys, *argv), files[side], encoding)
    assert not (tmp_path / "out.hyp").exists()


@pytest.mark.parametrize("option", ["--src", "--tgt", "--gold"])
@pytest.mark.parametrize("encoding", ["utf16_le_bom", "utf16_le_no_bom"])
def test_align_input_files_are_refused(option, encoding, tmp_path, capsys):
    files = {"--src": tmp_path / "s.zh", "--tgt": tmp_path / "t.en", "--gold": tmp_path / "g"}
    files["--src"].write_text(CHINESE, encoding="utf-8")
    files["--tgt"].write_text(ENGLISH, encoding="utf-8")
    files["--gold"].write_text("0-0\n0-0\n0-0\n0-0\n", encoding="utf-8")
    write(files[option], encoding, files[option].read_text(encoding="utf-8") * 20)
    argv = [tmp_path / "absent.pt", *(str(item) for pair in files.items() for item in pair)]
    assert_refused(run_main(align.main, capsys, *argv), files[option], encoding)


@pytest.mark.parametrize("option", ["--score", "--gold"])
def test_align_score_files_are_refused(option, tmp_path, capsys):
    files = {"--score": tmp_path / "hyp.align", "--gold": tmp_path / "gold.align"}
    for path in files.values():
        path.write_text("0-0 1-1\n" * 20, encoding="utf-8")
    write(files[option], "utf16_le_bom", "0-0 1-1\n" * 20)
    argv = [str(item) for pair in files.items() for item in pair]
    assert_refused(run_main(align.main, capsys, *argv), files[option], "utf16_le_bom")


@pytest.mark.parametrize("side", ["zh", "en"])
def test_align_baseline_training_files_are_refused(side, tmp_path, capsys):
    (tmp_path / "train.zh").write_text(CHINESE * 20, encoding="utf-8")
    (tmp_path / "train.en").write_text(ENGLISH * 20, encoding="utf-8")
    path = write(tmp_path / f"train.{side}", "utf16_le_bom", CHINESE * 20)
    argv = ["--data-dir", tmp_path, "--src", "zh", "--tgt", "en"]
    assert_refused(run_main(align_baseline.main, capsys, *argv), path, "utf16_le_bom")


def test_an_input_file_with_a_utf8_byte_order_mark_reads_as_without(tmp_path):
    path = tmp_path / "in.zh"
    path.write_bytes(b"\xef\xbb\xbf" + CHINESE.encode())
    assert read_text_lines(path, "--input") == CHINESE.splitlines()


# ---------------------------------------------------------------- alignments, gold, probes


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_a_pharaoh_file_is_refused_naming_its_encoding(encoding, tmp_path, victim_bytes):
    path = victim_bytes(write(tmp_path / "train.align", encoding, "0-0 1-1 2-2\n" * 30))
    with pytest.raises(ValueError) as error:
        read_links(path)
    assert_names_encoding(str(error.value), path, encoding)


def test_a_pharaoh_file_with_a_utf8_byte_order_mark_reads_as_without(tmp_path):
    marked, plain = tmp_path / "marked.align", tmp_path / "plain.align"
    marked.write_bytes(b"\xef\xbb\xbf0-0 1-1\n2-2\n")
    plain.write_bytes(b"0-0 1-1\n2-2\n")
    assert read_links(marked) == read_links(plain)


@pytest.mark.parametrize("encoding", ["utf16_le_bom", "utf16_le_no_bom", "utf32_be_bom"])
def test_a_gold_file_is_refused_naming_its_encoding(encoding, tmp_path):
    path = write(tmp_path / "test.zh", encoding, "我 爱 中国 。\n" * 20)
    with pytest.raises(ValueError) as error:
        gold_lines(path)
    assert_names_encoding(str(error.value), path, encoding)


@pytest.mark.parametrize("encoding", ["utf16_le_bom", "utf16_be_no_bom"])
def test_a_probe_file_is_refused_naming_its_encoding(encoding, tmp_path):
    path = write(tmp_path / "probes.tsv", encoding, "我爱中国。\tI love China.\t0-0\n" * 20)
    with pytest.raises(ValueError) as error:
        load_probes(path)
    assert_names_encoding(str(error.value), path, encoding)


# ---------------------------------------------------------------- structured files


@pytest.mark.parametrize("encoding", ["utf16_le_bom", "utf16_be_no_bom", "utf32_le_bom"])
@pytest.mark.parametrize(
    "name, text, read",
    [
        ("results.json", '{"steps": 10, "test": {"bleu": 1.0}}\n', read_results),
        (".hydra/overrides.yaml", "- encoder=gru\n- attention=additive\n", read_overrides),
    ],
    ids=["results_json", "overrides_yaml"],
)
def test_a_run_file_in_utf16_is_refused_naming_its_encoding(
    name, text, read, encoding, tmp_path, victim_bytes
):
    """A run folder's JSON and YAML files are read through `seq2seq.bounded_files`, which
    checks the encoding before decoding: the line names UTF-16/32, not "not valid JSON"."""
    path = tmp_path / "run" / name
    path.parent.mkdir(parents=True)
    victim_bytes(write(path, encoding, text))
    with pytest.raises(ValueError) as error:
        read(tmp_path / "run")
    assert_names_encoding(str(error.value), path, encoding)
