"""Attacks on `seq2seq-export`'s output folder and on export folders handed to the engines.

The export replaces only what it wrote (`seq2seq.output_folders`): OUT the run folder that
holds the checkpoint, the current folder, the home folder, a folder with files it did not
write or with a checkpoint are refused in one line with every file's bytes unchanged; a
`--force` over a good export that fails part-way (a full disk, Ctrl-C, a conversion error,
a failed rename) leaves the earlier export as it was, working, and no temporary behind; an
output place that cannot be written is one line before the model is converted.

An export folder's parts are checked against each other at load (`seq2seq.export.parts`):
exchanged vocabularies or tokenisers, weights from another export, and numbers in
`seq2seq_export.json` beyond what the weights fix are each one line from
`seq2seq-translate --engine ctranslate2` and from `seq2seq-serve --engine ctranslate2`'s
start-up.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
import torch
from helpers import compose_config, letters, run_main

from faults import test_output_places as places
from seq2seq.checkpoint import FORMAT_VERSION, save_checkpoint
from seq2seq.config.build import build_model
from seq2seq.data.tokenizer import SubwordTokenizer

pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (the export extra)")

from test_export_ctranslate2 import TRANSFORMER  # noqa: E402

from seq2seq.cli import export as export_cli  # noqa: E402
from seq2seq.cli import serve as serve_cli  # noqa: E402
from seq2seq.cli import translate as translate_cli  # noqa: E402
from seq2seq.export import ctranslate2 as export_module  # noqa: E402
from seq2seq.output_folders import MANIFEST  # noqa: E402

read_only = places.read_only  # the fixture that makes a folder really read-only
snapshot = places.snapshot
SMALL = [*TRANSFORMER, "encoder.num_layers=1", "decoder.num_layers=1"]
TARGET_LETTERS = "mnopqr"  # fewer letters than the source's: a smaller target vocabulary


# ---------------------------------------------------------------- fixtures and helpers


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(run folder holding checkpoints/best.pt, a good export of it). The two sides have
    different tokenisers and vocabulary sizes, so their vocabularies are two files."""
    root = tmp_path_factory.mktemp("export_attacks")
    source_texts = letters(random.Random(0), 1000)
    target_texts = [line.translate(str.maketrans("abcdefghijkl", "mnopqrmnopqr"))
                    for line in source_texts]  # fmt: skip
    src = SubwordTokenizer.train(source_texts, lang="zh", vocab_size=40, folder=root / "s",
                                 vocab_cap=True)  # fmt: skip
    tgt = SubwordTokenizer.train(target_texts, lang="en", vocab_size=40, folder=root / "t",
                                 vocab_cap=True)  # fmt: skip
    assert src.vocab_size != tgt.vocab_size
    cfg = compose_config([*SMALL, "data.max_len=30"])
    torch.manual_seed(0)
    model = build_model(cfg, src.vocab_size, tgt.vocab_size)
    run = root / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "train.log").write_text("hours of training\n")
    checkpoint = run / "checkpoints" / "best.pt"
    save_checkpoint(checkpoint, checkpoint_payload(model, cfg, src, tgt))
    good = root / "good"
    assert export_cli.main([str(checkpoint), str(good), "--format", "ctranslate2"]) == 0
    return run, good


def checkpoint_payload(model, cfg, src, tgt) -> dict:
    from omegaconf import OmegaConf

    sides = {name: {"lang": tok.lang, "kind": tok.kind, "model": tok.to_bytes()}
             for name, tok in (("src", src), ("tgt", tgt))}  # fmt: skip
    return {
        "format": FORMAT_VERSION,
        "model": model.state_dict(),
        "config": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True),
        "tokenizers": sides,
        "progress": {"step": 0},
    }


def checkpoint_of(run: Path) -> Path:
    return run / "checkpoints" / "best.pt"


def export(capsys, checkpoint: Path, out, *options: str) -> tuple[int, str]:
    code, _, stderr = run_main(export_cli.main, capsys, checkpoint, out, "--format",
                               "ctranslate2", *options)  # fmt: skip
    return code, stderr


def one_line(code: int, stderr: str, *words: str) -> None:
    assert code == 2, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert "Traceback" not in stderr
    for word in words:
        assert word in stderr, stderr


def translate(capsys, folder: Path, *lines: str) -> tuple[int, str, str]:
    return run_main(translate_cli.main, capsys, "--engine", "ctranslate2", folder, *lines)


def temporaries(parent: Path) -> list[str]:
    return [path.name for path in parent.iterdir() if path.name.endswith((".new", ".old"))]


@pytest.fixture
def conversions(monkeypatch) -> list:
    """Records each time the export loads the checkpoint (the start of the conversion)."""
    calls: list = []
    real = export_module.Translator.load

    def load(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(export_module.Translator, "load", load)
    return calls


@pytest.fixture
def copy_of(built, tmp_path):
    """`copy_of(name)`: a fresh copy of the good export under tmp_path."""

    def make(name: str = "copy") -> Path:
        return shutil.copytree(built[1], tmp_path / name, symlinks=True)

    return make


# ---------------------------------------------------------------- never removing what is not ours


@pytest.mark.attack("export")
@pytest.mark.parametrize("where", ["run", "checkpoints"])
def test_out_holding_the_checkpoint_is_refused_and_nothing_removed(built, capsys, where):
    run, _ = built
    out = run if where == "run" else run / "checkpoints"
    before = snapshot(run)
    code, stderr = export(capsys, checkpoint_of(run), out, "--force")
    one_line(code, stderr, "refusing", "best.pt")
    assert snapshot(run) == before


@pytest.mark.attack("export")
def test_force_dot_is_refused_even_over_an_earlier_export(built, copy_of, capsys, monkeypatch):
    run, _ = built
    folder = copy_of()
    before = snapshot(folder)
    monkeypatch.chdir(folder)
    code, stderr = export(capsys, checkpoint_of(run), ".", "--force")
    one_line(code, stderr, "current folder")
    assert snapshot(folder) == before


@pytest.mark.attack("export")
def test_the_home_folder_is_refused(built, copy_of, capsys, monkeypatch):
    run, _ = built
    home = copy_of("home")
    monkeypatch.setenv("HOME", str(home))
    before = snapshot(home)
    code, stderr = export(capsys, checkpoint_of(run), home, "--force")
    one_line(code, stderr, "home folder")
    code, stderr = export(capsys, checkpoint_of(run), home.parent, "--force")
    one_line(code, stderr, "home folder")
    assert snapshot(home) == before


@pytest.mark.attack("export")
@pytest.mark.parametrize("extra", ["notes.txt", "sub/data.bin"])
def test_an_export_with_a_file_it_did_not_write_is_not_replaced(built, copy_of, capsys, extra):
    run, _ = built
    folder = copy_of()
    (folder / extra).parent.mkdir(exist_ok=True)
    (folder / extra).write_text("mine")
    before = snapshot(folder)
    code, stderr = export(capsys, checkpoint_of(run), folder, "--force")
    one_line(code, stderr, "did not write", extra.split("/")[0])
    assert snapshot(folder) == before


@pytest.mark.attack("export")
def test_a_folder_without_the_manifest_is_not_replaced(built, tmp_path, capsys):
    run, _ = built
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "model.bin").write_text("my own model")
    code, stderr = export(capsys, checkpoint_of(run), folder, "--force")
    one_line(code, stderr, "did not write", "model.bin")
    assert (folder / "model.bin").read_text() == "my own model"


@pytest.mark.attack("export")
def test_a_checkpoint_listed_in_a_forged_manifest_is_still_refused(built, copy_of, capsys):
    run, _ = built
    folder = copy_of()
    shutil.copy(checkpoint_of(run), folder / "best.pt")
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["files"].append("best.pt")
    (folder / MANIFEST).write_text(json.dumps(manifest))
    before = snapshot(folder)
    code, stderr = export(capsys, checkpoint_of(run), folder, "--force")
    one_line(code, stderr, "checkpoint", "best.pt")
    assert snapshot(folder) == before


@pytest.mark.attack("export")
def test_another_commands_output_is_not_replaced(built, copy_of, capsys):
    run, _ = built
    folder = copy_of()
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["command"] = "seq2seq-lab"
    (folder / MANIFEST).write_text(json.dumps(manifest))
    code, stderr = export(capsys, checkpoint_of(run), folder, "--force")
    one_line(code, stderr, "did not write")


# ---------------------------------------------------------------- a --force that fails keeps the old export


def failing(error: BaseException):
    def fail(*args, **kwargs):
        raise error

    return fail


@pytest.mark.attack("export")
@pytest.mark.parametrize(
    "error",
    [OSError(errno.ENOSPC, "No space left on device"), RuntimeError("conversion failed")],
    ids=["disk-full", "conversion-error"],
)
def test_a_force_that_fails_part_way_leaves_the_earlier_export_working(
    built, copy_of, capsys, monkeypatch, error
):
    run, _ = built
    folder = copy_of()
    before = snapshot(folder)
    monkeypatch.setattr(export_module, "_write_side_files", failing(error))
    if isinstance(error, OSError):
        code, stderr = export(capsys, checkpoint_of(run), folder, "--force")
        one_line(code, stderr, "No space left")
    else:
        with pytest.raises(RuntimeError):
            export_cli.main([str(checkpoint_of(run)), str(folder), "--format", "ctranslate2",
                             "--force"])  # fmt: skip
    assert snapshot(folder) == before
    assert temporaries(folder.parent) == []
    code, stdout, stderr = translate(capsys, folder, "a b c")
    assert code == 0, stderr


@pytest.mark.attack("export")
def test_ctrl_c_during_a_force_leaves_the_earlier_export(built, copy_of, capsys, monkeypatch):
    run, _ = built
    folder = copy_of()
    before = snapshot(folder)
    monkeypatch.setattr(export_module, "_write_side_files", failing(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        export_cli.main([str(checkpoint_of(run)), str(folder), "--format", "ctranslate2",
                         "--force"])  # fmt: skip
    assert snapshot(folder) == before and temporaries(folder.parent) == []


@pytest.mark.attack("export")
def test_a_failed_swap_puts_the_earlier_export_back(built, copy_of, capsys, monkeypatch):
    """The rename of the new folder into place fails (after the old one was moved aside):
    the old one is renamed back."""
    run, _ = built
    folder = copy_of()
    before = snapshot(folder)
    real_rename = os.rename

    def rename(source, target):
        if str(source).endswith(".new"):
            raise OSError(errno.EIO, "Input/output error", str(target))
        return real_rename(source, target)

    monkeypatch.setattr(os, "rename", rename)
    code, stderr = export(capsys, checkpoint_of(run), folder, "--force")
    one_line(code, stderr, "Input/output error")
    assert snapshot(folder) == before and temporaries(folder.parent) == []


@pytest.mark.attack("export")
def test_a_force_over_an_earlier_export_replaces_it_whole(built, copy_of, capsys):
    run, _ = built
    folder = copy_of()
    (folder / "model.bin").write_bytes(b"an older model")  # listed in its manifest: ours
    code, stderr = export(capsys, checkpoint_of(run), folder, "--force")
    assert code == 0, stderr
    assert snapshot(folder)["model.bin"] == (built[1] / "model.bin").read_bytes()
    assert temporaries(folder.parent) == []
    assert translate(capsys, folder, "a b")[0] == 0


@pytest.mark.attack("export")
def test_a_killed_exports_temporary_is_removed_by_the_next_and_a_live_ones_kept(
    built, tmp_path, capsys
):
    run, _ = built
    out = tmp_path / "out"
    dead = tmp_path / f".out.{_finished_pid()}.0123abcd.new"
    live = tmp_path / f".out.{os.getpid()}.0123abcd.new"
    for folder in (dead, live):
        folder.mkdir()
        (folder / "model.bin").write_bytes(b"half")
    code, stderr = export(capsys, checkpoint_of(run), out)
    assert code == 0, stderr
    assert not dead.exists() and (live / "model.bin").read_bytes() == b"half"


def _finished_pid() -> int:
    """The pid of a process that has ended."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


@pytest.mark.attack("export")
def test_out_in_folders_not_yet_made_is_made(built, tmp_path, capsys):
    run, _ = built
    out = tmp_path / "new" / "deeper" / "out"
    code, stderr = export(capsys, checkpoint_of(run), out)
    assert code == 0, stderr
    assert (out / MANIFEST).is_file() and temporaries(out.parent) == []


# ---------------------------------------------------------------- output places


@pytest.mark.attack("export")
def test_out_a_link_to_an_empty_folder_is_written_through_the_link(built, tmp_path, capsys):
    run, _ = built
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    code, stderr = export(capsys, checkpoint_of(run), link)
    assert code == 0, stderr
    assert link.is_symlink() and (real / "model.bin").is_file() and (real / MANIFEST).is_file()


@pytest.mark.attack("export")
@pytest.mark.parametrize("case", ["inside-read-only", "read-only-empty", "link-to-read-only"])
def test_an_unwritable_out_is_one_line_before_the_conversion(
    built, tmp_path, capsys, conversions, read_only, case
):
    run, _ = built
    locked = tmp_path / "locked"
    locked.mkdir()
    out = {"inside-read-only": locked / "out", "read-only-empty": locked,
           "link-to-read-only": tmp_path / "link"}[case]  # fmt: skip
    if case == "link-to-read-only":
        out.symlink_to(locked)
    read_only(locked)
    code, stderr = export(capsys, checkpoint_of(run), out)
    one_line(code, stderr, "cannot write")
    assert conversions == []
    assert list(locked.iterdir()) == []


@pytest.mark.attack("export")
def test_an_earlier_export_in_a_read_only_folder_is_one_line_before_the_conversion(
    built, copy_of, tmp_path, capsys, conversions, read_only
):
    """The export itself is writable, but the folder it is in is not: the new export could
    not be written beside it nor swapped in."""
    run, _ = built
    locked = tmp_path / "locked"
    locked.mkdir()
    folder = shutil.move(copy_of(), locked / "export")
    before = snapshot(Path(folder))
    read_only(locked)
    code, stderr = export(capsys, checkpoint_of(run), folder, "--force")
    one_line(code, stderr, "cannot write")
    assert conversions == [] and snapshot(Path(folder)) == before


@pytest.mark.attack("export")
def test_an_unwritable_out_injected_is_one_line_before_the_conversion(
    built, tmp_path, capsys, conversions, monkeypatch
):
    """The same as a process sees a read-only file system (EROFS) on every new file."""
    run, _ = built
    real_open = os.open

    def read_only_open(path, flags, *args, **kwargs):
        if flags & os.O_CREAT:
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only_open)
    code, stderr = export(capsys, checkpoint_of(run), tmp_path / "out")
    one_line(code, stderr, "Read-only file system")
    assert conversions == [] and not (tmp_path / "out").exists()


@pytest.mark.attack("export")
@pytest.mark.parametrize("case", ["a-file", "under-a-file", "dangling-link"])
def test_an_out_that_is_no_folder_is_one_line_before_the_conversion(
    built, tmp_path, capsys, conversions, case
):
    run, _ = built
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = {"a-file": victim, "under-a-file": victim / "out", "dangling-link": tmp_path / "l"}[case]
    if case == "dangling-link":
        out.symlink_to(tmp_path / "missing")
    code, stderr = export(capsys, checkpoint_of(run), out, "--force")
    one_line(code, stderr, str(out.name))
    assert conversions == [] and victim.read_text() == "keep me"


# ---------------------------------------------------------------- parts that do not belong together


def swap(first: Path, second: Path) -> None:
    temporary = first.with_name("swap.tmp")
    first.rename(temporary)
    second.rename(first)
    temporary.rename(second)


def without_fingerprints(folder: Path) -> None:
    """Make `folder` look like an export written before fingerprints were recorded."""
    meta = json.loads((folder / "seq2seq_export.json").read_text())
    meta.pop("fingerprints"), meta.pop("vocabulary_sizes")
    (folder / "seq2seq_export.json").write_text(json.dumps(meta))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.attack("export")
@pytest.mark.parametrize("older", [False, True], ids=["fingerprinted", "older-export"])
def test_exchanged_vocabularies_are_one_line_from_translate_and_serve(copy_of, capsys, older):
    folder = copy_of()
    swap(folder / "source_vocabulary.json", folder / "target_vocabulary.json")
    if older:
        without_fingerprints(folder)
    code, _, stderr = translate(capsys, folder, "a b c")
    one_line(code, stderr, "vocabulary")
    code, _, stderr = run_main(serve_cli.main, capsys, "--engine", "ctranslate2", folder,
                               "--port", free_port())  # fmt: skip
    one_line(code, stderr, "vocabulary")


@pytest.mark.attack("export")
def test_exchanged_tokenisers_are_one_line(copy_of, capsys):
    folder = copy_of()
    swap(folder / "source.model", folder / "target.model")
    code, _, stderr = translate(capsys, folder, "a b c")
    one_line(code, stderr, "source.model", "sha256")


@pytest.mark.attack("export")
def test_a_reordered_vocabulary_of_an_older_export_is_one_line(copy_of, capsys):
    """Same size, two pieces exchanged, no fingerprint to compare: the pieces differ from
    the tokeniser's, id by id."""
    folder = copy_of()
    without_fingerprints(folder)
    path = folder / "target_vocabulary.json"
    pieces = json.loads(path.read_text())
    pieces[5], pieces[6] = pieces[6], pieces[5]
    path.write_text(json.dumps(pieces))
    code, _, stderr = translate(capsys, folder, "a b c")
    one_line(code, stderr, "target_vocabulary.json", "entry 5")


@pytest.mark.attack("export")
def test_weights_from_another_export_are_one_line(built, copy_of, tmp_path, capsys):
    """model.bin of a model with the same vocabulary on both sides (other table sizes)."""
    folder = copy_of()
    other = tmp_path / "other"
    tokenizer = SubwordTokenizer.train(letters(random.Random(3), 500), lang="x", vocab_size=40,
                                       folder=tmp_path / "t", vocab_cap=True)  # fmt: skip
    cfg = compose_config(SMALL)
    model = build_model(cfg, tokenizer.vocab_size, tokenizer.vocab_size)
    save_checkpoint(tmp_path / "o.pt", checkpoint_payload(model, cfg, tokenizer, tokenizer))
    assert export_cli.main([str(tmp_path / "o.pt"), str(other), "--format", "ctranslate2"]) == 0
    shutil.copy(other / "model.bin", folder / "model.bin")
    capsys.readouterr()
    code, _, stderr = translate(capsys, folder, "a b c")
    one_line(code, stderr, "model.bin")


# ---------------------------------------------------------------- seq2seq_export.json's numbers


def edit_meta(folder: Path, **values) -> Path:
    path = folder / "seq2seq_export.json"
    meta = json.loads(path.read_text())
    meta.update(values)
    path.write_text(json.dumps(meta))
    return path


@pytest.mark.attack("export")
@pytest.mark.parametrize(
    ("key", "value"),
    [("max_source_len", 2**62), ("max_source_len", 64), ("decoder_positions", 2**40),
     ("max_source_len", "100"), ("decoder_positions", True), ("max_source_len", 0)],
)  # fmt: skip
def test_a_number_beyond_what_the_weights_fix_is_one_line(copy_of, capsys, key, value):
    folder = copy_of()
    edit_meta(folder, **{key: value})
    code, _, stderr = translate(capsys, folder, "a " * 5000)
    one_line(code, stderr, "seq2seq_export.json", key)


@pytest.mark.attack("export")
def test_an_oversized_metadata_file_is_one_line(copy_of, capsys):
    folder = copy_of()
    path = folder / "seq2seq_export.json"
    path.write_text(path.read_text().rstrip() + " " * (2 * 1024 * 1024) + "\n")
    code, _, stderr = translate(capsys, folder, "a")
    one_line(code, stderr, "seq2seq_export.json", "over")


@pytest.mark.attack("export")
def test_deeply_nested_metadata_is_one_line(copy_of, capsys):
    folder = copy_of()
    (folder / "seq2seq_export.json").write_text("[" * 100_000 + "]" * 100_000)
    code, _, stderr = translate(capsys, folder, "a")
    one_line(code, stderr, "seq2seq_export.json")


@pytest.mark.attack("export")
@pytest.mark.parametrize("damage", ["cut-short", "a-fifo"])
def test_a_damaged_model_index_is_one_line(copy_of, capsys, damage):
    folder = copy_of()
    path = folder / "model.bin"
    if damage == "cut-short":
        path.write_bytes(path.read_bytes()[:200])
    else:  # reading it would block for ever
        path.unlink()
        os.mkfifo(path)
    code, _, stderr = translate(capsys, folder, "a")
    one_line(code, stderr, "model.bin")


@pytest.mark.attack("export")
def test_a_fingerprinted_file_replaced_by_a_fifo_is_one_line(copy_of, capsys):
    folder = copy_of()
    (folder / "config.json").unlink()
    os.mkfifo(folder / "config.json")
    code, _, stderr = translate(capsys, folder, "a")
    one_line(code, stderr, "config.json")
