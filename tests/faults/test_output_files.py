"""Attacks on the output files of every command, the run folders Hydra makes, and the
export's conversion (`seq2seq.output_folders.check_output_file`, `writing_file`,
`seq2seq.cli.hydra_places`).

Each output option (`seq2seq-translate --html/--plot`, `seq2seq-align --output`,
`seq2seq-align-baseline --out/--json`, `seq2seq-evaluate --output` and its default beside
the checkpoint, `seq2seq-data synth OUTPUT`) is pointed at a folder, a path under a regular
file, a read-only folder (chattr +i) and a FIFO: each is exit 2 with one line naming the
option and the path, before any checkpoint is read or any aligner or download starts (those
are made to fail the test if reached). A write that fails late (a full disk at the rename)
is one line and leaves the earlier file's bytes and no temporary. `hydra.run.dir`,
`hydra.sweep.dir` and the compare's `dir=` naming a file, a place under a file or a read-only
folder are one line before Hydra makes the folder. An error CTranslate2 raises while
converting, optimising or saving is one line naming the stage, the earlier export kept.
"""

from __future__ import annotations

import errno
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import run_main, single_thread_env
from omegaconf import OmegaConf

from faults import test_cli_arguments
from faults import test_output_places as places
from seq2seq import output_folders
from seq2seq.cli import align, align_baseline, data, evaluate, translate
from seq2seq.cli.hydra_places import OutputPlaceCheck
from seq2seq.output_folders import (
    OutputPlaceError,
    check_output_file,
    write_output_file,
    writing_file,
)
from seq2seq.search.translator import Translator
from tools.bench.entry import save_entry

checkpoint = test_cli_arguments.checkpoint  # the fixture: a tiny trained checkpoint
read_only = places.read_only  # the fixture that makes a folder really read-only
snapshot = places.snapshot
HAS_CTRANSLATE2 = importlib.util.find_spec("ctranslate2") is not None
if HAS_CTRANSLATE2:  # the fixtures of a Transformer checkpoint and its good export
    from faults import test_export_folder as exports

    built, copy_of, checkpoint_of = exports.built, exports.copy_of, exports.checkpoint_of

pytestmark = pytest.mark.attack("output")
EARLIER = b"an earlier good output\n"
DISK_FULL = OSError(errno.ENOSPC, "No space left on device")
KINDS = ["a-folder", "under-a-file", "read-only", "a-fifo"]


def one_line(code: int, stderr: str, *words: str) -> None:
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    for word in words:
        assert word in lines[0], stderr


def forbidden(*args, **kwargs):
    raise AssertionError("the work started before the output was checked")


def bad_place(tmp_path: Path, read_only, kind: str, name: str) -> Path:
    """An output file path of `kind` that cannot be written (KINDS)."""
    if kind == "a-folder":
        (tmp_path / name).mkdir()
        return tmp_path / name
    if kind == "under-a-file":
        (tmp_path / "victim.txt").write_bytes(EARLIER)
        return tmp_path / "victim.txt" / name
    if kind == "read-only":
        locked = tmp_path / "locked"
        locked.mkdir()
        read_only(locked)
        return locked / name
    os.mkfifo(tmp_path / name)
    return tmp_path / name


@pytest.fixture
def inputs(tmp_path) -> dict[str, Path]:
    """Small input files: a source, a target, and a prepared-corpus folder."""
    (tmp_path / "in.zh").write_text("a b\nc d\n", encoding="utf-8")
    (tmp_path / "in.en").write_text("x y\nz w\n", encoding="utf-8")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for side in ("zh", "en"):
        (corpus / f"train.{side}").write_text("a b\n", encoding="utf-8")
    return {"src": tmp_path / "in.zh", "tgt": tmp_path / "in.en", "corpus": corpus,
            "checkpoint": tmp_path / "never-read.pt"}  # fmt: skip


# (main, argv of (inputs, output), the option the line names, the output file's name)
COMMANDS: dict[str, tuple[Callable, Callable[[dict, Path], list], str, str]] = {
    "translate-html": (translate.main, lambda i, out: [i["checkpoint"], "a b", "--html", out],
                       "--html", "page.html"),
    "translate-plot": (translate.main, lambda i, out: [i["checkpoint"], "a b", "--plot", out],
                       "--plot", "plot.png"),
    "align-output": (align.main, lambda i, out: [i["checkpoint"], "--src", i["src"], "--tgt",
                                                 i["tgt"], "--output", out],
                     "--output", "links.align"),
    "align-baseline-out": (align_baseline.main, lambda i, out: ["--data-dir", i["corpus"],
                           "--src", "zh", "--tgt", "en", "--out", out], "--out", "test.align"),
    "align-baseline-json": (align_baseline.main, lambda i, out: ["--data-dir", i["corpus"],
                            "--src", "zh", "--tgt", "en", "--json", out], "--json", "s.json"),
    "evaluate-output": (evaluate.main, lambda i, out: [i["checkpoint"], "--src", i["src"],
                        "--ref", i["tgt"], "--output", out], "--output", "test.hyp"),
    "data-synth": (data.synth_main, lambda i, out: ["10", out, "--root", i["corpus"].parent /
                   "data"], "OUTPUT", "synth.tsv"),
}  # fmt: skip


@pytest.fixture
def no_work(monkeypatch):
    """Every start of the work (a checkpoint read, eflomal, a download) fails the test."""
    monkeypatch.setattr(Translator, "load", forbidden)
    monkeypatch.setattr(align_baseline, "gold_parts", forbidden)
    monkeypatch.setattr(align_baseline, "evaluate_baseline", forbidden)
    monkeypatch.setattr(data, "fetch", forbidden)


# ---------------------------------------------------------------- checked before the work


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", COMMANDS)
def test_an_output_file_that_cannot_be_written_is_one_line_before_the_work(
    tmp_path, read_only, inputs, no_work, capsys, command, kind
):
    main, argv, option, name = COMMANDS[command]
    out = bad_place(tmp_path, read_only, kind, name)
    started = time.monotonic()
    code, _, stderr = run_main(main, capsys, *argv(inputs, out))
    one_line(code, stderr, option, str(out))
    assert time.monotonic() - started < 5
    if kind == "under-a-file":
        assert (tmp_path / "victim.txt").read_bytes() == EARLIER
    if kind == "a-fifo":
        assert out.is_fifo()
    if kind == "a-folder":
        assert list(out.iterdir()) == []


def test_evaluates_default_output_beside_a_read_only_checkpoint_is_refused_first(
    tmp_path, read_only, inputs, no_work, capsys
):
    runs = tmp_path / "run"
    runs.mkdir()
    (runs / "best.pt").write_bytes(b"never read")
    read_only(runs)
    argv = [runs / "best.pt", "--src", inputs["src"], "--ref", inputs["tgt"]]
    code, _, stderr = run_main(evaluate.main, capsys, *argv)
    one_line(code, stderr, "--output", str(runs / "best.files.hyp"))


@pytest.mark.parametrize("kind", [*KINDS, "a-device", "a-dangling-link-under-a-file"])
def test_the_shared_check_refuses_in_one_line_naming_option_and_path(tmp_path, read_only, kind):
    if kind == "a-device":
        out = Path("/dev/null")
    elif kind == "a-dangling-link-under-a-file":
        (tmp_path / "victim.txt").write_bytes(EARLIER)
        out = tmp_path / "link"
        out.symlink_to(tmp_path / "victim.txt" / "out")
    else:
        out = bad_place(tmp_path, read_only, kind, "out.txt")
    with pytest.raises(OutputPlaceError) as refused:
        check_output_file(out, "--page")
    message = str(refused.value)
    assert message.startswith(f"--page {out}: ") and "\n" not in message


def test_the_shared_check_accepts_a_new_file_in_a_new_folder_and_creates_nothing(tmp_path):
    out = tmp_path / "new" / "deeper" / "page.html"
    assert check_output_file(out, "--html") == out
    assert list(tmp_path.iterdir()) == []
    assert write_output_file(out, "page\n", "--html") == out
    assert out.read_text() == "page\n"


# ---------------------------------------------------------------- a write that fails late


def test_a_late_failure_keeps_the_earlier_files_bytes_and_leaves_no_temporary(
    tmp_path, monkeypatch
):
    out = tmp_path / "page.html"
    out.write_bytes(EARLIER)
    monkeypatch.setattr(output_folders, "replace", failing(DISK_FULL))
    with pytest.raises(OutputPlaceError, match=r"^--html .*page\.html: cannot be written"):
        with writing_file(out, "--html") as temporary:
            temporary.write_text("half a page")
    assert out.read_bytes() == EARLIER
    assert sorted(path.name for path in tmp_path.iterdir()) == ["page.html"]


def failing(error: BaseException):
    def fail(*args, **kwargs):
        raise error

    return fail


# (main, argv of (checkpoint, inputs, output), the option, the output file's name)
LATE = {
    "translate-html": (translate.main, lambda c, i, out: [c, "a b", "--html", out], "--html",
                       "page.html"),
    "translate-plot": (translate.main, lambda c, i, out: [c, "a b", "--plot", out], "--plot",
                       "plot.png"),
    "align-output": (align.main, lambda c, i, out: [c, "--src", i["src"], "--tgt", i["tgt"],
                                                    "--output", out], "--output", "l.align"),
    "evaluate-output": (evaluate.main, lambda c, i, out: [c, "--src", i["src"], "--ref",
                        i["tgt"], "--output", out], "--output", "test.hyp"),
}  # fmt: skip


@pytest.mark.parametrize("command", LATE)
def test_a_disk_full_at_the_end_is_one_line_and_the_earlier_output_kept(
    checkpoint, inputs, tmp_path, monkeypatch, capsys, command
):
    main, argv, option, name = LATE[command]
    out = tmp_path / "outputs" / name
    out.parent.mkdir()
    out.write_bytes(EARLIER)
    monkeypatch.setattr(output_folders, "replace", failing(DISK_FULL))
    code, _, stderr = run_main(main, capsys, *argv(checkpoint, inputs, out))
    one_line(code, stderr, option, str(out), "No space left")
    assert out.read_bytes() == EARLIER
    assert [path.name for path in out.parent.iterdir()] == [name]


def test_a_synthetic_corpus_that_fails_at_the_end_is_one_line_and_the_earlier_kept(
    tmp_path, mirror, monkeypatch, capsys
):
    from seq2seq.data import synth
    from seq2seq.data.fetch import MIRROR_ENV

    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    preset = tmp_path / "toy.yaml"
    preset.write_text("name: toy\nsource:\n  name: tabular\n"
                      "  url: https://example.org/anki/toy-eng.zip\n  member: toy.txt\n"
                      "  sha256: null\n", encoding="utf-8")  # fmt: skip
    out = tmp_path / "out" / "synth.tsv"
    out.parent.mkdir()
    out.write_bytes(EARLIER)
    monkeypatch.setattr(synth, "replace", failing(DISK_FULL))
    argv = ["40", out, "--data", preset, "--root", tmp_path / "data"]
    code, _, stderr = run_main(data.synth_main, capsys, *argv)
    one_line(code, stderr, f"OUTPUT {out}", "No space left")
    assert out.read_bytes() == EARLIER
    assert [path.name for path in out.parent.iterdir()] == [out.name]


def test_a_benchmark_entry_that_cannot_be_saved_is_one_line_after_printing_it(
    tmp_path, monkeypatch, capsys
):
    page = tmp_path / "BENCHMARKS.md"
    page.write_bytes(EARLIER)
    monkeypatch.setattr(output_folders, "replace", failing(DISK_FULL))
    assert save_entry(page, ["## an entry", "- 42 tokens/s"], "bench.py") == 2
    captured = capsys.readouterr()
    assert "42 tokens/s" in captured.out
    one_line(2, captured.err, "--out", str(page), "No space left", "printed above")
    assert page.read_bytes() == EARLIER


# ---------------------------------------------------------------- Hydra's run folders


@pytest.mark.parametrize("kind", ["a-file", "under-a-file", "read-only", "a-fifo"])
@pytest.mark.parametrize("key", ["hydra.run.dir", "hydra.sweep.dir", "dir"])
def test_a_run_folder_that_cannot_be_written_is_one_line(tmp_path, read_only, capsys, kind, key):
    if kind == "a-file":
        place = tmp_path / "victim.txt"
        place.write_bytes(EARLIER)
    else:
        place = bad_place(tmp_path, read_only, kind, "run")
    check = OutputPlaceCheck("seq2seq-compare" if key == "dir" else "seq2seq-train",
                             **({"run_key": "dir"} if key == "dir" else {}))  # fmt: skip
    folder = "sweep" if key == "hydra.sweep.dir" else "run"
    config = OmegaConf.create({"hydra": {folder: {"dir": str(place)}}})
    with pytest.raises(SystemExit) as stop:
        if key == "hydra.sweep.dir":
            check.on_multirun_start(config)
        else:
            check.on_run_start(config)
    one_line(stop.value.code, capsys.readouterr().err, f" {key} {place}")
    if kind in ("a-file", "under-a-file"):
        assert (tmp_path / "victim.txt").read_bytes() == EARLIER


def test_a_writable_run_folder_passes_and_is_not_made(tmp_path):
    config = OmegaConf.create({"hydra": {"run": {"dir": str(tmp_path / "a" / "run")}}})
    OutputPlaceCheck("seq2seq-train").on_run_start(config)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [["seq2seq.cli.train", "hydra.run.dir={locked}/run"],
     ["seq2seq.cli.train", "-m", "hydra.sweep.dir={victim}/sweep"],
     ["seq2seq.cli.compare", "stages=[summary]", "dir={victim}"]],
    ids=["train-run-dir-read-only", "train-sweep-dir-under-a-file", "compare-dir-a-file"],
)  # fmt: skip
def test_the_commands_refuse_a_bad_run_folder_before_any_work(tmp_path, read_only, command):
    locked = tmp_path / "locked"
    locked.mkdir()
    read_only(locked)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(EARLIER)
    module, *overrides = command
    flags = [item for item in overrides if item.startswith("-")]
    overrides = [item.format(locked=locked, victim=victim) for item in overrides
                 if not item.startswith("-")]  # fmt: skip
    training = ["data=toy_copy", "trainer.max_steps=1", f"data.root={tmp_path / 'data'}"]
    argv = [sys.executable, "-m", module, *flags]
    argv += [*training, *overrides] if module.endswith("train") else overrides
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=60,
                          env=single_thread_env())  # fmt: skip
    key = overrides[-1].split("=")[0]
    one_line(done.returncode, done.stderr, key)
    assert victim.read_bytes() == EARLIER
    assert not (tmp_path / "data").exists() and not (tmp_path / "outputs").exists()


# ---------------------------------------------------------------- the export's conversion


@pytest.mark.skipif(not HAS_CTRANSLATE2, reason="ctranslate2 is not installed (export extra)")
@pytest.mark.parametrize(
    ("method", "error", "stage"),
    [("optimize", ValueError("unsupported quantization\nfor this spec"), "optimise"),
     ("save", RuntimeError("cannot serialise the variable"), "save"),
     ("validate", TypeError("bad spec attribute"), "convert")],
)  # fmt: skip
def test_a_conversion_error_is_one_line_naming_the_stage_and_the_export_kept(
    built, copy_of, capsys, monkeypatch, method, error, stage
):
    from ctranslate2 import specs

    from seq2seq.cli import export as export_cli

    run, _ = built
    folder = copy_of()
    before = snapshot(folder)
    monkeypatch.setattr(specs.TransformerSpec, method, failing(error))
    code, _, stderr = run_main(export_cli.main, capsys, checkpoint_of(run), folder,
                               "--format", "ctranslate2", "--force")  # fmt: skip
    one_line(code, stderr, f"CTranslate2 failed to {stage}", type(error).__name__)
    assert snapshot(folder) == before
    assert [path.name for path in folder.parent.iterdir()] == [folder.name]
