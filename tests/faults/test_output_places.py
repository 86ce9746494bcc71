"""Attacks on the places commands write to and the folders they clean (besides the export's,
`test_export_folder.py`).

Every output place is checked before the work (`seq2seq.output_folders.check_output_place`):
the compare report's `report.out_dir` and the compare folder, `seq2seq-lab --out` and
`--runs`, the benchmark's `--work` and `--out`, the docs-site build. A place in a read-only
folder, a file where a folder is wanted, or a dangling link is one line and exit 2 at start.
What a command cleans it must recognise as its own: a damaged encoding or links cache is
removed only when it holds nothing but a cache's files, a record naming a path outside the
prepared folder removes nothing there, and the data benchmark cleans only its own work
folder. Everything a refusal leaves is checked byte for byte.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import single_thread_env

from faults.test_data_faults import corpus_lines, data_config, zip_corpus
from seq2seq.cli import lab as lab_cli
from seq2seq.data.corpus import CorpusError
from seq2seq.data.fetch import MIRROR_ENV
from seq2seq.data.links import cached_links
from seq2seq.data.prepare import prepare
from seq2seq.output_folders import (
    OutputPlaceError,
    check_output_place,
    claim_output_folder,
    claim_work_folder,
)

ROOT = Path(__file__).resolve().parents[2]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (links not followed) and its bytes."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def immutable(folder: Path) -> bool:
    """Make `folder` read-only in a way root cannot write past (chattr +i; chmod for a
    user who is not root); False when neither stops a write here."""
    if shutil.which("chattr") is not None:
        subprocess.run(["chattr", "+i", str(folder)], capture_output=True)
    if os.geteuid() != 0:
        folder.chmod(0o555)
    probe = folder / ".probe"
    try:
        probe.touch()
    except OSError:
        return True
    probe.unlink()
    return False


@pytest.fixture
def read_only():
    """`read_only(folder)`: make it really unwritable (or skip), undone after the test."""
    made: list[Path] = []

    def make(folder: Path) -> Path:
        made.append(folder)
        if not immutable(folder):
            pytest.skip("cannot make a folder read-only here (root, and no chattr +i)")
        return folder

    yield make
    for folder in made:
        if shutil.which("chattr") is not None:
            subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
        folder.chmod(0o755)


def one_line(code: int, stderr: str, *words: str) -> None:
    assert code == 2, stderr
    lines = [line for line in stderr.strip().splitlines() if not line.startswith("usage:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    for word in words:
        assert word in stderr, stderr


# ---------------------------------------------------------------- the shared check


@pytest.mark.attack("output")
@pytest.mark.parametrize(
    "case", ["a-file", "under-a-file", "dangling-link", "read-only", "under-a-link-loop"]
)
def test_a_place_that_cannot_be_a_writable_folder_is_one_line(tmp_path, read_only, case):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    locked = tmp_path / "locked"
    locked.mkdir()
    place = {"a-file": victim, "under-a-file": victim / "out", "dangling-link": tmp_path / "l",
             "read-only": locked / "out", "under-a-link-loop": tmp_path / "loop" / "out",
             }[case]  # fmt: skip
    if case == "dangling-link":
        place.symlink_to(tmp_path / "missing")
    if case == "under-a-link-loop":
        (tmp_path / "loop").symlink_to("loop")
    if case == "read-only":
        read_only(locked)
    with pytest.raises(OutputPlaceError) as raised:
        check_output_place(place)
    assert len(str(raised.value).splitlines()) == 1 and str(place) in str(raised.value)
    assert victim.read_text() == "keep" and not (locked / "out").exists()


@pytest.mark.attack("output")
def test_a_link_to_a_writable_folder_is_the_folder(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert check_output_place(tmp_path / "link") == real.resolve()
    assert list(real.iterdir()) == []  # the probe file is gone


@pytest.mark.attack("output")
def test_root_is_never_a_folder_to_replace(tmp_path):
    with pytest.raises(OutputPlaceError, match="refusing to replace"):
        claim_output_folder("/", command="seq2seq-export", force=True)


# ---------------------------------------------------------------- seq2seq-compare


def compare(*overrides: str, cwd: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "seq2seq.cli.compare", *overrides,
               f"hydra.run.dir={cwd / 'hydra'}"]  # fmt: skip
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120,
                          env=single_thread_env())  # fmt: skip


@pytest.mark.attack("output")
def test_compare_report_in_a_read_only_folder_is_one_line_at_start(tmp_path, read_only):
    locked = tmp_path / "locked"
    locked.mkdir()
    read_only(locked)
    done = compare("stages=[summary]", f"sweeps=[{tmp_path / 'no_sweep'}]",
                   f"report.out_dir={locked / 'report'}", cwd=tmp_path)  # fmt: skip
    one_line(done.returncode, done.stdout + done.stderr, str(locked), "cannot write")


@pytest.mark.attack("output")
def test_compare_folder_that_is_a_file_is_one_line_before_training(tmp_path, monkeypatch):
    from test_compare_command import settings

    from seq2seq.study import comparison

    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    trained = []
    monkeypatch.setattr(comparison, "run_sweep", lambda *args, **kw: trained.append(args))
    found = settings("stages=[attention]", f"dir={victim}", "budget=small")
    with pytest.raises(OutputPlaceError, match="victim.txt: exists and is not a folder"):
        comparison.run_comparison(found, "seq2seq-compare")
    assert victim.read_text() == "keep" and trained == []


@pytest.mark.attack("output")
def test_compare_report_out_dir_naming_a_file_is_one_line(tmp_path):
    from test_compare_command import settings

    from seq2seq.study.comparison import run_comparison

    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    found = settings("stages=[summary]", f"sweeps=[{tmp_path / 'no_sweep'}]",
                     f"report.out_dir={victim}")  # fmt: skip
    with pytest.raises(OutputPlaceError, match="victim.txt: exists and is not a folder"):
        run_comparison(found, "seq2seq-compare")
    assert victim.read_text() == "keep"


@pytest.mark.attack("output")
def test_a_report_that_cannot_be_written_after_the_statistics_is_one_line(tmp_path, monkeypatch):
    """The folder checked, then the disk fills while the report is written: one
    OutputPlaceError line naming the file (the command prints it and exits 2)."""
    from sweep_fixtures import significance_sweep

    from seq2seq.study import report as report_module

    sweep, _ = significance_sweep(tmp_path / "cmp")

    def full_disk(rows, path):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(report_module, "write_csv", full_disk)
    settings = report_module.ReportSettings(out_dir=tmp_path / "out", image=False, aer=False,
                                            resamples=100)  # fmt: skip
    with pytest.raises(OutputPlaceError, match="comparison.csv.*No space left") as raised:
        report_module.write_report([sweep], settings)
    assert len(str(raised.value).splitlines()) == 1


# ---------------------------------------------------------------- seq2seq-lab


@pytest.mark.attack("output")
@pytest.mark.parametrize("option", ["--out", "--runs"])
@pytest.mark.parametrize("case", ["a-file", "read-only"])
def test_lab_output_places_are_one_line_before_any_experiment(
    tmp_path, capsys, monkeypatch, read_only, option, case
):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    locked = tmp_path / "locked"
    locked.mkdir()
    place = victim if case == "a-file" else locked / "lab"
    if case == "read-only":
        read_only(locked)
    started = []
    monkeypatch.setattr(lab_cli, "run_one", lambda *args: started.append(args) or True)
    with pytest.raises(SystemExit) as raised:
        lab_cli.main(["vanishing_gradients", "--quick", option, str(place)])
    one_line(raised.value.code, capsys.readouterr().err, str(place))
    assert started == [] and victim.read_text() == "keep"


@pytest.mark.attack("output")
def test_a_lab_page_that_cannot_be_written_after_the_experiment_is_one_line(
    tmp_path, capsys, monkeypatch
):
    from test_lab import FAKES, MACHINE

    monkeypatch.setattr(lab_cli, "experiments", lambda: FAKES)
    monkeypatch.setattr(lab_cli, "this_machine", lambda threads: MACHINE)

    def full_disk(out_root, run):
        raise OSError(28, "No space left on device", str(out_root / "drawn.md"))

    monkeypatch.setattr(lab_cli, "write_page", full_disk)
    with pytest.raises(SystemExit) as stopped:
        lab_cli.main(["drawn", "--out", str(tmp_path / "pages"), "--quick"])
    err = capsys.readouterr().err
    assert stopped.value.code == 1 and "Traceback" not in err
    assert err.strip().splitlines() == [
        f"seq2seq-lab: {tmp_path / 'pages' / 'drawn.md'}: cannot be written (No space left on "
        "device)"
    ]


# ---------------------------------------------------------------- prepared caches


@pytest.fixture
def prepared(tmp_path, monkeypatch):
    """(config, prepared folder) of a small corpus prepared once."""
    mirror = tmp_path / "mirror"
    zip_corpus(mirror / "toy-eng.zip", corpus_lines(300))
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    cfg = data_config(tmp_path / "data")
    prepare(cfg)
    return cfg, tmp_path / "data" / "prepared" / "synthetic"


def damage_train_cache(folder: Path) -> Path:
    (cache,) = folder.glob("encoded_train_*")
    path = cache / "src_offsets.npy"
    path.write_bytes(path.read_bytes()[:-8])  # cut short: the record's size differs
    return cache


@pytest.mark.attack("output")
def test_a_damaged_cache_holding_a_users_file_is_not_removed(prepared):
    cfg, folder = prepared
    cache = damage_train_cache(folder)
    (cache / "notes.txt").write_text("mine")
    before = snapshot(cache)
    with pytest.raises(CorpusError, match="notes.txt") as raised:
        prepare(cfg)
    assert len(str(raised.value).splitlines()) == 1
    assert snapshot(cache) == before


@pytest.mark.attack("output")
def test_a_damaged_cache_of_only_its_own_files_is_prepared_again(prepared):
    cfg, folder = prepared
    cache = damage_train_cache(folder)
    prepare(cfg)
    assert (cache / "src_offsets.npy").is_file() and (cache / "meta.json").is_file()


@pytest.mark.attack("output")
def test_a_record_naming_a_path_outside_the_folder_removes_nothing_there(prepared):
    """A forged record names `../victim/keep.txt` with another file's hash: main removed
    `prepared/` whole (every corpus's preparation and the victim beside them)."""
    cfg, folder = prepared
    victim = folder.parent / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("keep this")
    (record_path,) = folder.glob("prepared_*.json")
    record = json.loads(record_path.read_text())
    state = next(iter(record["files"].values()))  # another file's size and hash: "damaged"
    record["files"]["../victim/keep.txt"] = state
    (folder / "prepared_0000000000000000.json").write_text(json.dumps(record))
    prepare(data_config(Path(cfg.root), valid_size=21))  # new settings: reusable files checked
    assert (victim / "keep.txt").read_text() == "keep this"


@pytest.mark.attack("output")
def test_a_links_cache_holding_a_users_file_is_not_removed(tmp_path):
    cache = tmp_path / "links_k"
    cache.mkdir()
    (cache / "meta.json").write_text("{not json")
    (cache / "thesis.tex").write_text("mine")
    before = snapshot(cache)
    links = [np.array([[0, 0]], dtype=np.int32)]
    with pytest.raises(CorpusError, match="thesis.tex"):
        cached_links(tmp_path, "k", lambda: links, ([2], [2]))
    assert snapshot(cache) == before


@pytest.mark.attack("output")
def test_a_links_cache_that_is_a_link_to_a_users_folder_is_not_removed(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "meta.json").write_text("{not json")
    (tmp_path / "prepared").mkdir()
    (tmp_path / "prepared" / "links_k").symlink_to(mine)
    links = [np.array([[0, 0]], dtype=np.int32)]
    with pytest.raises(CorpusError, match="link"):
        cached_links(tmp_path / "prepared", "k", lambda: links, ([2], [2]))
    assert (mine / "meta.json").read_text() == "{not json"


# ---------------------------------------------------------------- the data benchmark's work folder


@pytest.mark.attack("output")
def test_the_benchmark_never_cleans_a_folder_it_did_not_make(tmp_path):
    from tools.bench.data_scale import measure_sizes

    work = tmp_path / "project"
    (work / "runs").mkdir(parents=True)
    (work / "runs" / "best.pt").write_bytes(b"weeks of training")
    (work / "paper.tex").write_text("mine")
    before = snapshot(work)
    with pytest.raises(OutputPlaceError, match="paper.tex"):
        measure_sizes([0], work, 1, ROOT)
    assert snapshot(work) == before


@pytest.mark.attack("output")
def test_the_benchmark_work_folder_is_marked_and_reused(tmp_path):
    work = claim_work_folder(tmp_path / "work", command="scripts/bench_data.py")
    (work / "runs").mkdir()
    assert claim_work_folder(work, command="scripts/bench_data.py") == work
    with pytest.raises(OutputPlaceError):
        claim_work_folder(work, command="another")


@pytest.mark.attack("output")
def test_the_benchmark_refuses_the_home_folder_in_one_line(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "runs").mkdir()  # a name the benchmark writes: still not its folder to clean
    env = {**os.environ, "HOME": str(home)}
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_data.py"), "--work",
                           str(home), "--sizes", "0"], capture_output=True, text=True,
                          env=env, timeout=60)  # fmt: skip
    one_line(done.returncode, done.stderr, "home folder")
    assert (home / "runs").is_dir()


# ---------------------------------------------------------------- the docs-site build


@pytest.mark.attack("output")
def test_the_site_build_checks_its_places_before_writing(tmp_path, capsys, monkeypatch, read_only):
    from tools.site import __main__ as site

    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    read_only(repo / "docs")
    monkeypatch.setattr(site, "REPO_ROOT", repo)
    code = site.main(["--no-outputs"])
    one_line(code, capsys.readouterr().err, "docs", "cannot write")
