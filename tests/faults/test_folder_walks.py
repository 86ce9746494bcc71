"""Runaway walks: a folder a user hands the project holds links that loop or lead out of it
(`ln -s / root`, `ln -s . again`, a link to the parent), folders nested without end, links
that point at themselves. Every walk goes through `seq2seq.folder_walk.walk_folders`: each
real folder visited once, links followed inside the tree or to another run folder only,
depth bounded, and what was skipped said in one line. The comparison's run finder, the
checkpoint finder and plugin folders and packages are attacked; each attack runs under a
time limit (a thread, or a watched subprocess with a memory bound) so that a runaway walk
fails its test instead of hanging the suite.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from sweep_fixtures import fake_run, results
from watched import run_watched, within_time

from seq2seq.folder_walk import MAX_DEPTH, walk_folders
from seq2seq.plugins import import_plugins, unload
from seq2seq.study.reading import find_checkpoints, find_runs
from seq2seq.testing.component_presets import check_user_presets

pytestmark = pytest.mark.attack("walk")
RUNS = ("0_attention=dot", "1_attention=additive")


@pytest.fixture
def sweep(tmp_path) -> Path:
    folder = tmp_path / "cmp" / "attention"
    fake_run(folder / RUNS[0], "dot", results(3_892_384, 12.0), {})
    fake_run(folder / RUNS[1], "additive", results(4_023_968, 14.5), {})
    return folder


def warnings_of(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]


def assert_runs_found_once(sweep: Path, caplog, *skips: str) -> None:
    """find_runs ends, finds each run once, and one warning line names every skip."""
    with caplog.at_level(logging.WARNING):
        runs = within_time(find_runs, sweep)
    assert [run.name for run in runs] == list(RUNS)
    lines = warnings_of(caplog)
    assert len(lines) == 1, lines
    assert lines[0].count("(") >= len(skips) and all(skip in lines[0] for skip in skips), lines


# ---------------------------------------------------------------- the run finder


def test_a_link_to_the_root_folder_is_not_walked(sweep, caplog):
    os.symlink("/", sweep / RUNS[1] / "root")
    assert_runs_found_once(sweep, caplog, "root -> / (outside the tree)")


def test_two_links_to_their_own_folder_are_walked_once(sweep, caplog):
    for name in ("a", "b"):
        os.symlink(".", sweep / RUNS[1] / name)
    assert_runs_found_once(sweep, caplog, "a -> . (visited already)", "b -> . (visited already)")


def test_links_to_the_parent_and_the_home_folder_are_not_walked(sweep, caplog):
    os.symlink("../..", sweep / RUNS[0] / "up")  # the folder holding the sweep
    os.symlink(os.path.expanduser("~"), sweep / RUNS[0] / "home")
    assert_runs_found_once(sweep, caplog, "up -> ../.. (outside the tree)", "home -> ")


def test_folders_linking_each_other_are_walked_once(sweep, caplog):
    first, second = sweep / RUNS[0] / "x", sweep / RUNS[1] / "y"
    first.mkdir(), second.mkdir()
    os.symlink(second, first / "to_y")
    os.symlink(first, second / "to_x")
    assert_runs_found_once(sweep, caplog, "(visited already)")


def test_a_link_that_points_at_itself_is_skipped(sweep, caplog):
    os.symlink("loop", sweep / RUNS[0] / "loop")
    assert_runs_found_once(sweep, caplog, "loop (a link loop)")


def test_folders_nested_past_the_depth_bound_are_skipped(sweep, caplog):
    deep = sweep / RUNS[0]
    for _ in range(MAX_DEPTH + 3):
        deep = deep / "d"
    deep.mkdir(parents=True)
    assert_runs_found_once(sweep, caplog, f"(deeper than {MAX_DEPTH} folders)")


def test_a_link_to_a_folder_outside_that_is_not_a_run_is_skipped(sweep, tmp_path, caplog):
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "lots").mkdir(parents=True)
    os.symlink(elsewhere, sweep / RUNS[0] / "out")
    assert_runs_found_once(sweep, caplog, f"out -> {elsewhere} (outside the tree)")


def test_a_link_to_another_sweeps_run_is_followed(sweep, tmp_path, caplog):
    """What `make compare` does: a run of the first sweep linked into the second."""
    second = tmp_path / "cmp" / "encoders"
    second.mkdir()
    os.symlink(sweep / RUNS[1], second / "0_linked")
    os.symlink("/", sweep / RUNS[1] / "root")  # inside the linked run: still refused
    with caplog.at_level(logging.WARNING):
        assert [run.name for run in within_time(find_runs, second)] == ["0_linked"]
    assert "root -> / (outside the tree)" in " ".join(warnings_of(caplog))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every folder")
def test_an_unreadable_folder_is_skipped(sweep, caplog):
    locked = sweep / RUNS[0] / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        assert_runs_found_once(sweep, caplog, "locked (cannot be read")
    finally:
        locked.chmod(0o755)


def test_the_checkpoint_finder_walks_a_looping_folder_once(tmp_path, caplog):
    run = tmp_path / "runs" / "0_a"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "best.pt").write_bytes(b"x")
    os.symlink(".", run / "again")
    os.symlink("/", run / "root")
    with caplog.at_level(logging.WARNING):
        found = within_time(find_checkpoints, [tmp_path / "runs"])
    assert found == [run / "checkpoints" / "best.pt"]
    assert len(warnings_of(caplog)) == 1 and "skipped 2 folders" in warnings_of(caplog)[0]


def test_a_walk_says_what_it_skipped_in_one_line(tmp_path):
    (tmp_path / "a").mkdir()
    os.symlink("/", tmp_path / "a" / "root")
    os.symlink(".", tmp_path / "self")
    walk = within_time(walk_folders, tmp_path)
    assert walk.folders == [tmp_path, tmp_path / "a"]
    assert walk.summary() == (
        f"skipped 2 folders: {tmp_path}/a/root -> / (outside the tree), "
        f"{tmp_path}/self -> . (visited already)"
    )


# ---------------------------------------------------------------- the comparison command


@pytest.mark.parametrize("links", [{"root": "/"}, {"a": ".", "b": "."}], ids=["root", "self"])
def test_the_comparison_summary_ends_over_a_looping_run_folder(sweep, tmp_path, links):
    """`seq2seq-compare 'stages=[summary]'` ran without end (646 MB and growing) before."""
    for name, target in links.items():
        os.symlink(target, sweep / RUNS[1] / name)
    out = tmp_path / "out"
    done = run_watched(["-m", "seq2seq.cli.compare", "stages=[summary]", f"dir={sweep.parent}",
                        f"report.out_dir={out}", "report.image=false", "report.aer=false",
                        "report.resamples=10"], timeout=60, max_mb=1500)  # fmt: skip
    assert done.returncode == 0, (done.killed, done.stderr[-2000:])
    said = done.stdout + done.stderr  # Hydra logs to the console's standard output
    skipped = [line for line in said.splitlines() if "skipped" in line]
    assert len(skipped) == 1 and all(f"{name} -> {target}" in skipped[0]
                                     for name, target in links.items()), said  # fmt: skip
    assert "Traceback" not in said and (out / "COMPARISON.md").is_file()


# ---------------------------------------------------------------- plugin folders


def test_a_plugin_package_linking_itself_imports_each_module_once(tmp_path, caplog):
    package = tmp_path / "selfpkg"
    package.mkdir()
    counter = tmp_path / "count.txt"
    runs = f"open({str(counter)!r}, 'a').write('x')\n"
    (package / "__init__.py").write_text(runs, encoding="utf-8")
    (package / "part.py").write_text(runs, encoding="utf-8")
    os.symlink(".", package / "again")
    os.symlink("/", package / "root")
    with caplog.at_level(logging.WARNING):
        (plugin,) = within_time(import_plugins, [str(package)], tmp_path)
    try:
        assert plugin.modules == ("selfpkg", "selfpkg.part")
        assert counter.read_text(encoding="utf-8") == "xx"  # each module ran once
        lines = warnings_of(caplog)
        assert len(lines) == 1 and "again -> ." in lines[0] and "root -> /" in lines[0]
    finally:
        unload(plugin)


def test_a_plugin_folder_with_looping_file_links_imports_its_real_files(tmp_path):
    folder = tmp_path / "plain_plugins"
    folder.mkdir()
    (folder / "plain_one.py").write_text("VALUE = 1\n", encoding="utf-8")
    os.symlink("/", folder / "root")
    os.symlink("plain_loop_b.py", folder / "plain_loop_a.py")
    os.symlink("plain_loop_a.py", folder / "plain_loop_b.py")
    (plugin,) = within_time(import_plugins, [str(folder)], tmp_path)
    try:
        assert plugin.modules == ("plain_one",)
    finally:
        unload(plugin)


def test_a_plugin_preset_folder_with_looping_links_is_read_once(tmp_path, caplog):
    """`seq2seq-check --config-dir` reads every preset of the folder before Hydra does."""
    configs = tmp_path / "configs"
    (configs / "attention").mkdir(parents=True)
    (configs / "attention" / "mine.yaml").write_text("attention: {score: dot}\n", "utf-8")
    os.symlink("/", configs / "root")
    os.symlink("..", configs / "attention" / "up")
    with caplog.at_level(logging.WARNING):
        within_time(check_user_presets, configs)
    lines = warnings_of(caplog)
    assert len(lines) == 1 and "root -> / (outside the tree)" in lines[0], lines
    assert "up -> .. (visited already)" in lines[0]
