"""More attacks of round 3's classes (issue 46), on what the first attacks left open.

- structured: a checkpoint is a pickled dict, not a parsed file, so its config never went
  through the bounded readers: nested 5,000 deep it ended in a RecursionError traceback, a
  50 MB key was echoed whole into the error line after a minute of `difflib`. Every
  checkpoint is now checked as plain data within the bounds a parsed file gets
  (`seq2seq.bounded_files.check_plain_bounds`) the moment it is loaded, so translate,
  evaluate, export, serve and a resume all refuse it in one line.
- output: `data.root` naming a file, a place under a file or a read-only folder ended in a
  PermissionError / NotADirectoryError traceback of `seq2seq-data` and `seq2seq-train`; it is
  now one line before the corpus is read (`seq2seq.data.prepare.check_data_folder`), and a
  read-only prepared cache that must be prepared again is one line too.
- output (deletion): a run's checkpoint-temporary cleaning removed every `checkpoints/.*.tmp`
  (a user's `.notes.tmp` with it); now only the names `save_checkpoint` gives its
  temporaries, regular files only.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from helpers import TINY_TOY, compose_config, text_pair_overrides
from watched import within_time

from faults import test_output_places as places
from faults.test_checkpoint_attacks import train_tiny_checkpoint
from faults.test_text_encodings import CHINESE, ENGLISH, text_pair_config
from seq2seq import files
from seq2seq.align.pharaoh import read_links
from seq2seq.checkpoint import CheckpointError
from seq2seq.cli import align, translate
from seq2seq.data.prepare import DataPlaceError, prepare
from seq2seq.files import temporary_name
from seq2seq.runs.assemble import train_and_test
from seq2seq.runs.folder import remove_stale_temporaries

ROOT = Path(__file__).resolve().parents[2]
DEEP = 5_000  # well past Python's recursion limit of 1,000


@pytest.fixture(scope="module")
def payload(tmp_path_factory) -> dict:
    path = train_tiny_checkpoint(tmp_path_factory.mktemp("tiny"))
    return torch.load(path, weights_only=True)


def nested(depth: int, kind: str):
    """A dict (`{"a": {"a": ...}}`) or list (`[[[...]]]`) `depth` levels deep, built in a loop."""
    value: object = {} if kind == "dict" else []
    for _ in range(depth):
        value = {"a": value} if kind == "dict" else [value]
    return value


def saved(payload: dict, path: Path) -> Path:
    """`torch.save` of a payload nested deeper than the recursion limit: pickled in a
    thread with a large stack, as an attacker's own script would."""
    failures: list[BaseException] = []

    def save() -> None:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(4 * DEEP + 1000)
        try:
            torch.save(payload, path)
        except BaseException as error:  # noqa: BLE001 (re-raised in the test's thread)
            failures.append(error)
        finally:
            sys.setrecursionlimit(limit)

    size = threading.stack_size(256 * 1024 * 1024)
    try:
        thread = threading.Thread(target=save)
        thread.start()
        thread.join()
    finally:
        threading.stack_size(size)
    if failures:
        raise failures[0]
    return path


# Each attack: how it edits the config, and what the one error line must say.
CONFIG_ATTACKS = {
    "dict-nested-in-a-section": (
        lambda c: c["encoder"].update(x=nested(DEEP, "dict")), "nested deeper than 64"),
    "list-nested-as-the-name": (lambda c: c.update(name=nested(DEEP, "list")), "nested deeper"),
    "list-nested-as-plugins": (lambda c: c.update(plugins=nested(DEEP, "list")), "nested deeper"),
    "dict-nested-as-an-unknown-section": (
        lambda c: c.update(evil=nested(DEEP, "dict")), "nested deeper"),
    "a-2-MB-key": (lambda c: c["encoder"].update({"k" * 2_000_000: 1}), "a key of 2,000,000"),
    "a-2-MB-string": (lambda c: c["data"].update(name="n" * 2_000_000), "a string of 2,000,000"),
    "an-int-of-2000-bits": (lambda c: c["data"].update(max_len=2**2000), "an integer of 2,001"),
}  # fmt: skip


@pytest.mark.attack("structured")
@pytest.mark.parametrize("attack", list(CONFIG_ATTACKS))
def test_a_checkpoint_config_out_of_bounds_is_one_line(payload, tmp_path, capsys, attack):
    edit, words = CONFIG_ATTACKS[attack]
    hostile = copy.deepcopy(payload)
    edit(hostile["config"])
    path = saved(hostile, tmp_path / "hostile.pt")
    assert translate.main([str(path), "a b c"]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err[:2000]
    assert str(path) in lines[0] and words in lines[0], lines[0][:2000]
    assert len(lines[0]) < 600, f"{len(lines[0]):,} characters"


@pytest.mark.attack("structured")
def test_a_deep_progress_entry_is_refused_when_a_run_resumes(payload, tmp_path):
    """Not only the config: the whole payload is bounded before any of it is read (a
    resume reads `progress`, `architecture_differences` walks the config recursively)."""
    from seq2seq.checkpoint import load_resumable

    hostile = copy.deepcopy(payload)
    hostile["progress"] = {**hostile["progress"], "extra": nested(DEEP, "dict")}
    run = tmp_path / "run" / "checkpoints"
    run.mkdir(parents=True)
    saved(hostile, run / "last.pt")
    with pytest.raises(CheckpointError) as raised:
        load_resumable(run / "last.pt")
    assert "progress.extra" in str(raised.value) and "nested deeper" in str(raised.value)


@pytest.mark.attack("structured")
def test_a_huge_toy_tokeniser_record_is_refused_unscanned(payload, tmp_path, capsys):
    """The toy tokeniser's record (`{"num_symbols": 10}`) padded to 2 MB was scanned
    character by character and then parsed; it is refused from its length."""
    hostile = copy.deepcopy(payload)
    hostile["tokenizers"]["src"]["model"] = b'{"num_symbols": 10' + b" " * 2_000_000 + b"}"
    path = tmp_path / "hostile.pt"
    torch.save(hostile, path)
    assert translate.main([str(path), "a b c"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "tokenizers.src" in err, err
    assert "2,000,019 bytes" in err, err


@pytest.mark.attack("structured")
def test_a_good_checkpoint_still_translates(payload, tmp_path, capsys):
    path = tmp_path / "good.pt"
    torch.save(payload, path)
    assert translate.main([str(path), "a b c"]) == 0, capsys.readouterr().err


# ---------------------------------------------------------------- data.root


def write_corpus(tmp_path: Path) -> None:
    """The UTF-8 `text_pair` corpus that `text_pair_config(tmp_path)` names."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split, copies in (("train", 40), ("valid", 3), ("test", 3)):
        (corpus / f"{split}.en").write_text(ENGLISH * copies, encoding="utf-8")
        (corpus / f"{split}.zh").write_text(CHINESE * copies, encoding="utf-8")


read_only = places.read_only  # the fixture that makes a folder really read-only


@pytest.mark.attack("output")
@pytest.mark.parametrize("case", ["a-file", "under-a-file", "read-only", "under-read-only"])
def test_a_data_root_that_cannot_be_written_is_one_line_before_reading(tmp_path, read_only, case):
    write_corpus(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"keep")
    locked = tmp_path / "locked"
    locked.mkdir()
    root = {"a-file": victim, "under-a-file": victim / "data", "read-only": locked,
            "under-read-only": locked / "data"}[case]  # fmt: skip
    if case in ("read-only", "under-read-only"):
        read_only(locked)
    config = text_pair_config(tmp_path)
    config.root = str(root)
    with pytest.raises(DataPlaceError) as raised:
        prepare(config)
    message = str(raised.value)
    assert message.startswith("data.root: ") and len(message.splitlines()) == 1
    assert victim.read_bytes() == b"keep" and list(locked.iterdir()) == []


@pytest.mark.attack("output")
def test_a_read_only_prepared_cache_that_must_be_prepared_again_is_one_line(tmp_path, read_only):
    write_corpus(tmp_path)
    config = text_pair_config(tmp_path)
    config.src_vocab_size, config.tgt_vocab_size = 27, 19
    prepare(config)  # a complete cache for these settings
    folder = Path(config.root) / "prepared" / config.name
    before = sorted(path.name for path in folder.iterdir())
    read_only(folder)
    prepare(config)  # complete: read without a write
    config.src_vocab_size = 28  # another preparation: must write there
    with pytest.raises(DataPlaceError) as raised:
        prepare(config)
    assert str(folder) in str(raised.value)
    assert sorted(path.name for path in folder.iterdir()) == before


@pytest.mark.attack("output")
def test_a_damaged_cache_in_a_read_only_folder_is_one_line(tmp_path, read_only):
    """Preparing again removes the damaged file first: in a read-only folder that was a
    PermissionError traceback."""
    write_corpus(tmp_path)
    config = text_pair_config(tmp_path)
    config.src_vocab_size, config.tgt_vocab_size = 27, 19
    prepare(config)
    folder = Path(config.root) / "prepared" / config.name
    model = sorted(folder.glob("spm_en_*.model"))[0]
    model.write_bytes(b"garbage")
    before = places.snapshot(folder)
    read_only(folder)
    with pytest.raises(DataPlaceError) as raised:
        prepare(config)
    assert str(folder) in str(raised.value) and places.snapshot(folder) == before


@pytest.mark.attack("output")
@pytest.mark.parametrize(
    "program", ["seq2seq.cli.data", pytest.param("seq2seq.cli.train", marks=pytest.mark.faults)]
)
def test_the_commands_refuse_a_data_root_under_a_file_in_one_line(tmp_path, program):
    write_corpus(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"keep")
    corpus = tmp_path / "corpus"
    done = subprocess.run(
        [sys.executable, "-m", program, *text_pair_overrides(corpus),
         f"data.root={victim / 'data'}", f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    output = done.stderr + done.stdout
    assert done.returncode == 2, output
    assert "Traceback" not in output and "HYDRA_FULL_ERROR" not in output, output
    assert f"data.root: {victim / 'data'}" in output
    assert victim.read_bytes() == b"keep"


# ---------------------------------------------------------------- what a run cleans


@pytest.mark.attack("output")
def test_a_run_cleans_only_its_own_checkpoint_temporaries(tmp_path):
    checkpoints = tmp_path / "run" / "checkpoints"
    checkpoints.mkdir(parents=True)
    ours = temporary_name(checkpoints / "last.pt", hidden=True, suffix=".tmp")
    ours.write_bytes(b"half a checkpoint")
    users = {".notes.tmp": b"my notes", ".best.pt.tmp": b"a copy", ".x.pt.1.zzzzzzzz.tmp": b"x"}
    for name, data in users.items():
        (checkpoints / name).write_bytes(data)
    folder = checkpoints / ".last.pt.7.0123abcd.tmp"  # a folder with a temporary's name
    folder.mkdir()
    (folder / "inside.txt").write_bytes(b"kept")
    remove_stale_temporaries(tmp_path / "run")
    assert not ours.exists()
    for name, data in users.items():
        assert (checkpoints / name).read_bytes() == data
    assert (folder / "inside.txt").read_bytes() == b"kept"


def tiny_config(*overrides: str):
    return compose_config(
        TINY_TOY
        + ["trainer.max_steps=2", "trainer.valid_every=2", "trainer.test_search.beam_size=1",
           "logging.tensorboard=false", "data.source.train_size=64", "data.source.valid_size=8",
           "data.source.test_size=8", *overrides]
    )  # fmt: skip


@pytest.mark.attack("output")
def test_resuming_a_loose_checkpoint_writes_nothing_beside_it(payload, tmp_path):
    """`trainer.resume=~/Downloads/model.pt` went on in `~` (the folder two above the file,
    taken for its run folder): the user's `results.json` and `test.hyp` there were
    overwritten and `~/checkpoints/` made. The run now goes on in its own run folder."""
    home = tmp_path / "home"
    (home / "Downloads").mkdir(parents=True)
    loose = home / "Downloads" / "model.pt"
    torch.save(payload, loose)
    mine = {"results.json": b"my results", "test.hyp": b"my translations"}
    for name, data in mine.items():
        (home / name).write_bytes(data)
    before = places.snapshot(home)
    run = tmp_path / "run"
    train_and_test(tiny_config("trainer.max_steps=3", f"trainer.resume={loose}"), run)
    assert places.snapshot(home) == before
    assert sorted(path.name for path in home.iterdir()) == ["Downloads", *sorted(mine)]
    assert (run / "checkpoints" / "last.pt").is_file() and (run / "results.json").is_file()


@pytest.mark.attack("output")
def test_a_new_run_does_not_start_over_another_runs_checkpoints(payload, tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    for name in ("best.pt", "best.prev.pt", "last.pt"):
        torch.save(payload, run / "checkpoints" / name)
    before = places.snapshot(run)
    with pytest.raises(CheckpointError) as raised:
        train_and_test(tiny_config(), run)
    message = str(raised.value)
    assert str(run) in message and "trainer.resume=auto" in message
    assert len(message.splitlines()) == 1
    assert places.snapshot(run) == {**before, "train.lock": places.snapshot(run)["train.lock"]}


# ---------------------------------------------------------------- FIFOs and huge link files


@pytest.fixture
def fifo(tmp_path) -> Path:
    """A named pipe that nobody writes to."""
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def sparse(path: Path, size: int = 10 * 2**30) -> Path:
    with path.open("wb") as stream:
        stream.truncate(size)
    return path


@pytest.mark.attack("structured")
@pytest.mark.parametrize("kind", ["10-GB-sparse", "fifo"])
def test_a_pharaoh_file_is_read_within_bounds(tmp_path, fifo, kind):
    """`read_links` (data.alignments, the aligner's output) read the whole file: 10 GB of
    zeros into memory, or a FIFO for ever."""
    path = sparse(tmp_path / "links.txt") if kind == "10-GB-sparse" else fifo
    result: list[BaseException] = []
    worker = threading.Thread(target=lambda: _catch(lambda: read_links(path), result), daemon=True)
    worker.start()
    worker.join(5)
    assert not worker.is_alive(), "still reading after 5 s"
    assert isinstance(result[0], ValueError), result
    assert str(path) in str(result[0]) and len(str(result[0]).splitlines()) == 1


def _catch(call, into: list) -> None:
    try:
        call()
        into.append(AssertionError("read without an error"))
    except BaseException as error:  # noqa: BLE001 (looked at by the test)
        into.append(error)


@pytest.mark.attack("structured")
@pytest.mark.parametrize("option", ["--gold", "--score", "--src"])
def test_align_refuses_a_silent_fifo_in_one_line(payload, tmp_path, fifo, capsys, monkeypatch,
                                                 option):  # fmt: skip
    """`seq2seq-align --gold FIFO` (and --score, --src) hung for ever; a FIFO that stays
    silent is now one line (the wait shortened here from 10 s)."""
    monkeypatch.setattr(files, "FIFO_WAIT_S", 0.3)
    text = tmp_path / "text.txt"
    text.write_text("a b\nc d\n", encoding="utf-8")
    links = tmp_path / "links.txt"
    links.write_text("0-0\n1-1\n", encoding="utf-8")
    checkpoint = tmp_path / "best.pt"
    torch.save(payload, checkpoint)
    given = {"--src": text, "--tgt": text, "--gold": links, "--score": links, option: fifo}
    if option == "--score":
        argv = ["--score", str(given["--score"]), "--gold", str(given["--gold"])]
    else:
        argv = [str(checkpoint), *(f"{o}={given[o]}" for o in ("--src", "--tgt", "--gold"))]
    result: list = []

    def run() -> None:
        try:
            result.append(align.main(argv))
        except SystemExit as exit_:  # the parser's error
            result.append(exit_.code)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(5)
    assert not worker.is_alive(), "still waiting on the FIFO after 5 s"
    err = capsys.readouterr().err
    assert result == [2], err
    assert len(err.strip().splitlines()) == 1 and f"{option} {fifo}: a FIFO" in err, err


@pytest.mark.attack("structured")
def test_a_pipe_that_is_written_is_still_read(tmp_path, fifo):
    def write() -> None:
        with fifo.open("wb") as stream:
            stream.write(b"0-0 1-1\n")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    with files.opened_for_reading(fifo, wait_s=5) as stream:
        assert stream.read() == b"0-0 1-1\n"
    writer.join(5)


def translate_exit(argv: list[str]) -> int:
    """`seq2seq-translate ARGV`'s exit status (the parser's errors exit through SystemExit)."""
    try:
        return translate.main(argv)
    except SystemExit as exit_:
        return exit_.code


@pytest.mark.attack("structured")
def test_translate_refuses_a_silent_fifo_as_its_input(payload, tmp_path, fifo, capsys,
                                                      monkeypatch):  # fmt: skip
    monkeypatch.setattr(files, "FIFO_WAIT_S", 0.3)
    checkpoint = tmp_path / "best.pt"
    torch.save(payload, checkpoint)
    code = within_time(translate_exit, [str(checkpoint), "-i", str(fifo)], seconds=5)
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "a FIFO" in err, err


@pytest.mark.attack("output")
def test_a_new_run_does_not_write_over_a_users_folder(tmp_path):
    """`hydra.run.dir=.` in a folder holding the user's `results.json` and `test.hyp`: the
    run wrote its own over them (and appended to a `metrics.jsonl`)."""
    folder = tmp_path / "mine"
    folder.mkdir()
    for name in ("results.json", "test.hyp", "metrics.jsonl"):
        (folder / name).write_bytes(b"the user's " + name.encode())
    before = places.snapshot(folder)
    with pytest.raises(CheckpointError) as raised:
        train_and_test(tiny_config(), folder)
    assert str(folder) in str(raised.value) and "results.json" in str(raised.value)
    after = places.snapshot(folder)
    assert {name: after[name] for name in before} == before
    assert sorted(after) in (sorted(before), sorted([*before, "train.lock"]))


@pytest.mark.attack("structured")
@pytest.mark.parametrize("kind", ["10-GB-sparse", "3-MB-line"])
def test_translate_reads_its_input_one_bounded_line_at_a_time(payload, tmp_path, capsys, kind):
    """`seq2seq-translate -i` on 10 GB of zeros read one endless line (still reading at
    30 s); a 600 MB line took 34 s and 5.8 GB. A line over 1 MiB is one line now."""
    checkpoint = tmp_path / "best.pt"
    torch.save(payload, checkpoint)
    path = tmp_path / "input.txt"
    if kind == "10-GB-sparse":
        sparse(path)
    else:
        path.write_bytes(b"a " * 1_500_000 + b"\n")
    code = within_time(translate_exit, [str(checkpoint), "-i", str(path)], seconds=8)
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{path} line 1: longer than 1,048,576 bytes" in err, err
