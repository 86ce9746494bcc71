"""Attacks on the prepared cache: damaged files under `data/prepared/...`, killed preparations.

After a preparation, one file of its cache is damaged as a user, a full disk or a bad
sector could (ids out of the vocabulary, ids changed to other valid ids, offsets out of
order, a piece renamed in a subword model, random bytes in one, a file cut short). The next
preparation must notice it from the record's sizes and hashes (and the range checks of the
arrays): with `data.rebuild=true` (the default) a warning names the file and the cache is
prepared again, the same as a fresh preparation's; with `data.rebuild=false` it stops with
one line naming the file. A preparation killed with SIGKILL leaves temporaries; the next
one removes them.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm

from faults.test_data_faults import corpus_lines, data_config, zip_corpus
from seq2seq.data import record as record_module
from seq2seq.data.arrays import ArrayFileError, open_ragged
from seq2seq.data.corpus import CorpusError
from seq2seq.data.fetch import MIRROR_ENV
from seq2seq.data.prepare import prepare, remove_stale_temporaries

ROOT = Path(__file__).resolve().parents[2]
NAME = "synthetic"


# --- helpers -------------------------------------------------------------------------------


@pytest.fixture
def mirror(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "mirror"
    zip_corpus(folder / "toy-eng.zip", corpus_lines(400))
    monkeypatch.setenv(MIRROR_ENV, str(folder))
    return folder


def prepared_folder(root: Path) -> Path:
    return root / "prepared" / NAME


def cache_files(folder: Path) -> dict[str, bytes]:
    """Every prepared file's bytes by relative name; the record by its `files` (its
    `texts` hold modification times, which differ between two preparations)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        name = str(path.relative_to(folder))
        if name.startswith("prepared_") and name.endswith(".json"):
            found[name] = json.dumps(json.loads(path.read_text())["files"], sort_keys=True).encode()
        else:
            found[name] = path.read_bytes()
    return found


def encoded(folder: Path, split: str) -> Path:
    (cache,) = folder.glob(f"encoded_{split}_*")
    return cache


def model(folder: Path, lang: str) -> Path:
    (path,) = folder.glob(f"spm_{lang}_*.model")
    return path


def relative(folder: Path, path: Path) -> str:
    return str(path.relative_to(folder))


def _writable(path: Path) -> np.ndarray:
    return np.load(path, mmap_mode="r+", allow_pickle=False)


def target_id_above_vocabulary(folder: Path) -> str:
    path = encoded(folder, "train") / "tgt_ids.npy"
    ids = _writable(path)
    ids[len(ids) // 2] = 30 + 7  # the vocabulary has 30 pieces
    ids.flush()
    return relative(folder, path)


def source_ids_changed_to_other_valid_ids(folder: Path) -> str:
    """Only a hash can tell: every id stays in the vocabulary, the offsets are untouched."""
    path = encoded(folder, "train") / "src_ids.npy"
    ids = _writable(path)
    picked = np.arange(0, len(ids), 7)
    ids[picked] = 4 + (ids[picked] - 4 + 1) % (30 - 4)  # another piece, never a special id
    ids.flush()
    return relative(folder, path)


def offsets_swapped(folder: Path) -> str:
    path = encoded(folder, "train") / "src_offsets.npy"
    offsets = _writable(path)
    i = int(np.flatnonzero(np.diff(offsets) > 0)[3])
    offsets[i], offsets[i + 1] = int(offsets[i + 1]), int(offsets[i])  # no longer monotone
    offsets.flush()
    return relative(folder, path)


def piece_renamed_in_the_english_model(folder: Path) -> str:
    """A valid model that cuts the text otherwise: one piece's text replaced, same length."""
    path = model(folder, "en")
    data = path.read_bytes()
    processor = spm.SentencePieceProcessor(model_proto=data)
    for index in range(4, processor.get_piece_size()):
        piece = processor.id_to_piece(index).encode("utf-8")
        if len(piece) >= 3 and data.count(piece) == 1:
            renamed = piece[:-1] + (b"q" if piece[-1:] != b"q" else b"z")
            path.write_bytes(data.replace(piece, renamed))
            assert spm.SentencePieceProcessor(model_proto=path.read_bytes()).get_piece_size()
            return relative(folder, path)
    raise AssertionError("no piece to rename")


def random_bytes_in_the_chinese_model(folder: Path) -> str:
    path = model(folder, "zh")
    data = bytearray(path.read_bytes())
    start = len(data) // 3
    data[start : start + 256] = random.Random(0).randbytes(256)
    path.write_bytes(bytes(data))
    return relative(folder, path)


def truncated_array_file(folder: Path) -> str:
    path = encoded(folder, "valid") / "tgt_ids.npy"
    path.write_bytes(path.read_bytes()[:-10])  # cut short, as by a full disk
    return relative(folder, path)


ATTACKS = [
    target_id_above_vocabulary,
    source_ids_changed_to_other_valid_ids,
    offsets_swapped,
    piece_renamed_in_the_english_model,
    random_bytes_in_the_chinese_model,
    truncated_array_file,
]


def same_data(first, second) -> None:
    for split in ("train", "valid", "test"):
        assert list(first.split(split).examples) == list(second.split(split).examples)
        assert list(first.split(split).tgt_lines) == list(second.split(split).tgt_lines)
    assert first.src_tokenizer.to_bytes() == second.src_tokenizer.to_bytes()
    assert first.tgt_tokenizer.to_bytes() == second.tgt_tokenizer.to_bytes()


# --- damaged caches ------------------------------------------------------------------------


@pytest.mark.attack("prepare")
@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.__name__ for attack in ATTACKS])
def test_damaged_cache_is_prepared_again_with_a_warning_naming_the_file(
    tmp_path, mirror, caplog, attack
):
    fresh = prepare(data_config(tmp_path / "fresh"))
    expected = cache_files(prepared_folder(tmp_path / "fresh"))
    cfg = data_config(tmp_path / "data")
    prepare(cfg)
    folder = prepared_folder(tmp_path / "data")
    assert cache_files(folder) == expected
    damaged = attack(folder)
    assert cache_files(folder) != expected
    with caplog.at_level("WARNING"):
        again = prepare(cfg)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(damaged in message for message in warnings), warnings
    assert cache_files(folder) == expected  # the same files as a fresh preparation
    same_data(again, fresh)


@pytest.mark.attack("prepare")
@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.__name__ for attack in ATTACKS])
def test_damaged_cache_with_rebuild_false_stops_with_one_line_naming_the_file(
    tmp_path, mirror, attack
):
    prepare(data_config(tmp_path / "data"))
    folder = prepared_folder(tmp_path / "data")
    damaged = attack(folder)
    before = cache_files(folder)
    with pytest.raises(CorpusError) as stopped:
        prepare(data_config(tmp_path / "data", rebuild=False))
    message = str(stopped.value)
    assert damaged in message and "data.rebuild" in message and "\n" not in message
    assert cache_files(folder) == before  # left as it was: nothing trained on, nothing removed


@pytest.mark.attack("prepare")
@pytest.mark.parametrize("rebuild", [True, False])
def test_damaged_model_is_not_reused_by_a_preparation_of_other_settings(
    tmp_path, mirror, caplog, rebuild
):
    """The record of the new settings does not exist yet (a changed setting, a new key), but
    the one that wrote the model vouches for its content: the model is not reused."""
    other = {"vocab_cap": True}  # another key, the same models and caches (30 pieces fit)
    fresh = prepare(data_config(tmp_path / "fresh", **other))
    prepare(data_config(tmp_path / "data"))
    folder = prepared_folder(tmp_path / "data")
    damaged = piece_renamed_in_the_english_model(folder)
    if not rebuild:
        with pytest.raises(CorpusError, match="data.rebuild=false") as stopped:
            prepare(data_config(tmp_path / "data", rebuild=False, **other))
        assert damaged in str(stopped.value)
        return
    with caplog.at_level("WARNING"):
        again = prepare(data_config(tmp_path / "data", **other))
    assert any(damaged in r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    same_data(again, fresh)


def run_data_cli(
    tmp_path: Path, *arguments: str, timeout: float = 120
) -> subprocess.CompletedProcess:
    """`seq2seq-data ARGUMENTS...` as its own process in tmp_path."""
    return subprocess.run(
        [sys.executable, "-m", "seq2seq.cli.data", *arguments],
        cwd=tmp_path, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def cli_overrides(root: Path, corpus: Path, **extra) -> list[str]:
    settings = {
        "source.url": corpus.as_uri(), "source.member": "''", "source.sha256": "null", "name": NAME,
        "root": str(root), "valid_size": 20, "test_size": 20, "src_vocab_size": 30,
        "tgt_vocab_size": 30, "max_len": 15, "max_tokens": 200, **extra,
    }  # fmt: skip
    return [f"data.{key}={value}" for key, value in settings.items()]


def plain_corpus(path: Path, count: int, seed: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(corpus_lines(count, seed)) + "\n", encoding="utf-8")
    return path


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.startswith("seq2seq-data:")]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.attack("prepare")
def test_cli_with_rebuild_false_stops_with_one_line_and_verify_names_the_file(tmp_path):
    corpus = plain_corpus(tmp_path / "corpus.txt", 400)
    overrides = cli_overrides(tmp_path / "data", corpus)
    assert run_data_cli(tmp_path, "prepare", *overrides).returncode == 0
    verified = run_data_cli(tmp_path, "verify", *overrides)
    assert verified.returncode == 0, verified.stderr
    assert "intact" in verified.stdout
    damaged = random_bytes_in_the_chinese_model(prepared_folder(tmp_path / "data"))
    stopped = run_data_cli(tmp_path, "prepare", *overrides, "data.rebuild=false")
    assert stopped.returncode == 2
    assert damaged in one_line(stopped.stderr)
    verified = run_data_cli(tmp_path, "verify", *overrides)
    assert verified.returncode == 2
    assert damaged in one_line(verified.stderr)


@pytest.mark.attack("prepare")
def test_verify_hashes_what_the_sampled_check_at_opening_does_not_read(
    tmp_path, mirror, monkeypatch, capsys
):
    """With blocks smaller than the file, a change between the sampled blocks passes the
    check at opening (the cost of a cheap check) but not `seq2seq-data verify`."""
    monkeypatch.setattr(record_module, "SAMPLE_BLOCK_BYTES", 16)
    monkeypatch.setattr(record_module, "SAMPLE_BLOCKS", 2)
    cfg = data_config(tmp_path / "data")
    prepare(cfg)
    folder = prepared_folder(tmp_path / "data")
    path = encoded(folder, "train") / "src_ids.npy"
    ids = _writable(path)
    middle = len(ids) // 2
    ids[middle] = 4 + (int(ids[middle]) - 4 + 1) % (30 - 4)
    ids.flush()
    prepare(cfg)  # not noticed: the sampled blocks are the first and the last 16 bytes
    (record_file,) = folder.glob("prepared_*.json")
    damaged = record_module.verify_files(folder, record_module.read_record(record_file))
    assert [name for name, _ in damaged] == [relative(folder, path)]


@pytest.mark.attack("prepare")
def test_record_of_the_older_format_is_prepared_again_with_a_warning(tmp_path, mirror, caplog):
    cfg = data_config(tmp_path / "data")
    first = prepare(cfg)
    folder = prepared_folder(tmp_path / "data")
    (path,) = folder.glob("prepared_*.json")
    old = json.loads(path.read_text())
    for key in ("format", "files"):
        old.pop(key, None)
    path.write_text(json.dumps(old))
    with caplog.at_level("WARNING"):
        again = prepare(cfg)
    assert any(path.name in r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    assert json.loads(path.read_text())["format"] == record_module.RECORD_FORMAT
    same_data(again, first)


@pytest.mark.attack("prepare")
def test_toy_data_is_unaffected(tmp_path):
    from seq2seq.data.settings import DataConfig

    data = prepare(DataConfig(source="toy", root=str(tmp_path), rebuild=False))
    assert len(data.train) == 10000 and not (tmp_path / "prepared").exists()


# --- range checks when the arrays are opened -----------------------------------------------


def _ragged(folder: Path, ids: list[int], offsets: list[int]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "src_ids.npy", np.asarray(ids, dtype=np.int16))
    np.save(folder / "src_offsets.npy", np.asarray(offsets, dtype=np.int64))
    return folder


@pytest.mark.attack("prepare")
@pytest.mark.parametrize(
    ("ids", "offsets", "message", "damaged"),
    [
        ([4, 5, 30], [0, 1, 3], r"id 30 .*vocabulary of 30", "src_ids.npy"),
        ([4, -1, 5], [0, 1, 3], r"id -1 ", "src_ids.npy"),
        ([4, 5, 6], [0, 2, 1, 3], r"not in order", "src_offsets.npy"),
        ([4, 5, 6], [1, 2, 3], r"run from 1 to 3", "src_offsets.npy"),
        ([4, 5, 6], [0, 1, 2], r"run from 0 to 2", "src_offsets.npy"),
    ],
)
def test_arrays_are_range_checked_when_opened(tmp_path, ids, offsets, message, damaged):
    folder = _ragged(tmp_path / "cache", ids, offsets)
    with pytest.raises(ArrayFileError, match=message) as error:
        open_ragged(folder, "src", vocab_size=30)
    assert error.value.path == folder / damaged and damaged in str(error.value)


def test_intact_arrays_pass_the_range_checks(tmp_path):
    folder = _ragged(tmp_path / "cache", [4, 29, 5, 6], [0, 2, 2, 4])
    assert list(open_ragged(folder, "src", vocab_size=30)) == [[4, 29], [], [5, 6]]


# --- killed preparations -------------------------------------------------------------------


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def leave_temporaries(folder: Path, pid: int) -> list[Path]:
    """What a preparation killed at various moments leaves, named as the code names them."""
    folder.mkdir(parents=True, exist_ok=True)
    files = [
        folder / f"clean_pairs.tsv.{pid}.0badf00d.part",  # fetch.temporary_beside
        folder / f"train.zh.{pid}.1badf00d.part",  # split.write_split_stream
        folder / f"spm_en_0123456789abcdef.model.{pid}.part",  # tokenizer._write_atomically
        folder / f"prepared_0123456789abcdef.json.{pid}.2badf00d.part",  # record.save_record
    ]
    for path in files:
        path.write_bytes(b"partial")
    part = folder / f"encoded_train_0123456789abcdef.{pid}.3badf00d.part"  # encode.encode_split
    part.mkdir()
    (part / "src_ids.raw").write_bytes(b"\0" * 64)  # arrays.RaggedWriter
    return [*files, part]


def temporaries(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if ".part" in p.name)


@pytest.mark.attack("prepare")
@pytest.mark.parametrize("recorded", [False, True], ids=["first run", "recorded cache"])
def test_rerun_removes_what_a_killed_preparation_left(tmp_path, mirror, recorded):
    cfg = data_config(tmp_path / "data")
    folder = prepared_folder(tmp_path / "data")
    if recorded:
        prepare(cfg)
    expected = cache_files(prepared_folder(tmp_path / "data")) if recorded else None
    leave_temporaries(folder, dead_pid())
    prepare(cfg)
    assert temporaries(folder) == []
    if expected is not None:
        assert cache_files(folder) == expected


@pytest.mark.attack("prepare")
def test_temporaries_of_a_live_writer_are_kept(tmp_path):
    folder = tmp_path / "prepared" / NAME
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        kept = leave_temporaries(folder, live.pid)
        stale = leave_temporaries(folder / "other", dead_pid())  # not in the folder: untouched
        removed = leave_temporaries(folder, dead_pid())
        remove_stale_temporaries(folder)
        assert all(path.exists() for path in kept + stale)
        assert not any(path.exists() for path in removed)
    finally:
        live.kill()
        live.wait()


def _clean_preparation(tmp_path: Path, corpus: Path) -> tuple[dict[str, bytes], float]:
    """The files of a preparation of `corpus` left to finish, and its seconds."""
    started = time.perf_counter()
    done = run_data_cli(tmp_path, "prepare", *cli_overrides(tmp_path / "clean", corpus))
    assert done.returncode == 0, done.stderr
    return cache_files(prepared_folder(tmp_path / "clean")), time.perf_counter() - started


def _start_prepare(tmp_path: Path, root: Path, corpus: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "seq2seq.cli.data", "prepare", *cli_overrides(root, corpus)],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def _rerun_is_clean(tmp_path: Path, root: Path, corpus: Path, expected: dict) -> None:
    """A rerun after a kill: no temporary left, the same files as a clean preparation."""
    rerun = run_data_cli(tmp_path, "prepare", *cli_overrides(root, corpus))
    assert rerun.returncode == 0, rerun.stderr
    assert temporaries(prepared_folder(root)) == []
    assert temporaries(root / "raw") == []
    assert cache_files(prepared_folder(root)) == expected


@pytest.mark.attack("prepare")
def test_kill_9_during_prepare_then_rerun_leaves_no_temporary(tmp_path):
    """One real SIGKILL, while the clean pairs' temporary file is being written."""
    corpus = plain_corpus(tmp_path / "corpus.txt", 5_000)
    expected, _ = _clean_preparation(tmp_path, corpus)
    root = tmp_path / "killed"
    child = _start_prepare(tmp_path, root, corpus)
    deadline = time.monotonic() + 60
    while not list(prepared_folder(root).glob("clean_pairs.tsv.*.part")):
        assert child.poll() is None and time.monotonic() < deadline, "no temporary seen"
        time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert temporaries(prepared_folder(root))  # what item 4 is about: the kill left some
    _rerun_is_clean(tmp_path, root, corpus, expected)


@pytest.mark.faults
@pytest.mark.attack("prepare")
def test_kill_9_at_five_random_moments_of_prepare(tmp_path, fault_figures):
    corpus = plain_corpus(tmp_path / "corpus.txt", 20_000)
    expected, seconds = _clean_preparation(tmp_path, corpus)
    rng = random.Random()
    left = []
    for trial in range(5):
        root = tmp_path / f"trial{trial}"
        child = _start_prepare(tmp_path, root, corpus)
        time.sleep(rng.uniform(0.1, 1.0) * seconds)
        child.send_signal(signal.SIGKILL)
        child.wait()
        left.append(temporaries(prepared_folder(root)) + temporaries(root / "raw"))
        _rerun_is_clean(tmp_path, root, corpus, expected)
        shutil.rmtree(root)
    fault_figures.add("prepare_kill_trials", len(left))
    fault_figures.add("prepare_kills_leaving_temporaries", sum(bool(names) for names in left))
