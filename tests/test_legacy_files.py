"""Files written before the package redesign still load and work: checkpoints, an export
folder and run folders written by commit 1485cbd (tests/fixtures/legacy_1485cbd/, whose
README says how they were made).

The tests drive the public commands only, through `main(argv)` of `seq2seq.cli.translate`,
`.evaluate` and `.export`, or `python -m seq2seq.cli.<command>` in a subprocess. They never
import the modules behind those commands, so moving modules does not touch them; only a
change in what an old file means does. What each command printed for these files at that
commit is in the fixture's `expected/`. Nothing is written into the fixture folder: the
tests that write work on copies in tmp_path, and `fixture_folder_untouched` checks it.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from helpers import run_main

from seq2seq.cli import evaluate, export, translate

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "legacy_1485cbd"
SWEEP = FIXTURE / "sweep"
EXPORT = FIXTURE / "export_transformer"
INPUTS = FIXTURE / "inputs.txt"
RUNS = ("0_transformer", "1_gru_additive")  # the Transformer's export is EXPORT
# The searches the old code's translations were recorded with (expected/translate_*_NAME.txt)
SEARCHES = {"beam5": [], "greedy_alignments": ["--beam-size", "1", "--alignments"]}
RESUMED_TO = 152  # both legacy runs stopped at update 150


def expected(name: str) -> str:
    return (FIXTURE / "expected" / name).read_text(encoding="utf-8")


def best(run: str) -> Path:
    return SWEEP / run / "checkpoints" / "best.pt"


def one_thread_env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def run_command(module: str, *arguments: object, cwd: Path) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGUMENTS` in `cwd` on one thread; stdout and stderr together."""
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, arguments)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=one_thread_env(),
        timeout=300,
    )


def folder_digest(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module", autouse=True)
def fixture_folder_untouched():
    """No test writes into, adds to or removes from the fixture folder."""
    before = folder_digest(FIXTURE)
    yield
    assert folder_digest(FIXTURE) == before, "a test changed tests/fixtures/legacy_1485cbd"


@pytest.fixture(autouse=True)
def one_thread():
    """The old code's outputs were recorded on one thread: decode on one thread too, so
    that sums are added in the same order."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def recorded_overrides(run_dir: Path) -> list[str]:
    """The command line the legacy run was trained with (its `.hydra/overrides.yaml`)."""
    overrides = yaml.safe_load((run_dir / ".hydra" / "overrides.yaml").read_text())
    assert isinstance(overrides, list) and overrides
    return [str(override) for override in overrides]


def metrics_lines(text: str) -> dict[int, dict]:
    """`metrics.jsonl` by step (the later line of a repeated step)."""
    return {line["step"]: line for line in map(json.loads, text.splitlines()) if line}


# ---------------------------------------------------------------- translating


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("run", RUNS)
def test_a_legacy_checkpoint_translates_as_the_old_code_did(run, search, capsys):
    code, out, err = run_main(translate.main, capsys, best(run), "-i", INPUTS, *SEARCHES[search])
    assert code == 0, err
    assert out == expected(f"translate_{run}_{search}.txt")


@pytest.mark.parametrize("search", SEARCHES)
def test_the_legacy_export_translates_as_the_old_code_and_its_checkpoint_did(search, capsys):
    pytest.importorskip("ctranslate2", reason="the export extra")
    arguments = ["--engine", "ctranslate2", EXPORT, "-i", INPUTS, *SEARCHES[search]]
    code, out, err = run_main(translate.main, capsys, *arguments)
    assert code == 0, err
    assert out == expected(f"translate_export_transformer_{search}.txt")
    # At 1485cbd the export and its checkpoint gave the same translations and links.
    assert out == expected(f"translate_0_transformer_{search}.txt")


def test_a_legacy_checkpoint_exports_and_the_export_translates_as_before(tmp_path, capsys):
    pytest.importorskip("ctranslate2", reason="the export extra")
    out_dir = tmp_path / "exported"
    code, _, err = run_main(export.main, capsys, best("0_transformer"), out_dir,
                            "--format", "ctranslate2")  # fmt: skip
    assert code == 0, err
    code, out, err = run_main(translate.main, capsys, "--engine", "ctranslate2", out_dir,
                              "-i", INPUTS)  # fmt: skip
    assert code == 0, err
    assert out == expected("translate_export_transformer_beam5.txt")


# ---------------------------------------------------------------- evaluating


@pytest.mark.parametrize("run", RUNS)
def test_a_legacy_checkpoint_scores_its_test_split_as_the_old_code_did(run, tmp_path, capsys):
    """Beam 5 (the default): the hypotheses and scores the old seq2seq-evaluate wrote."""
    hypotheses = tmp_path / "test.hyp"
    code, out, err = run_main(evaluate.main, capsys, best(run), "--data-root", tmp_path / "data",
                              "-o", hypotheses, "--json")  # fmt: skip
    assert code == 0, err
    assert hypotheses.read_text(encoding="utf-8") == expected(f"evaluate_{run}.hyp")
    scores, old = json.loads(out), json.loads(expected(f"evaluate_{run}.json"))
    assert scores["bleu"] == pytest.approx(old["bleu"], abs=1e-9)
    assert scores["chrf"] == pytest.approx(old["chrf"], abs=1e-9)


@pytest.mark.parametrize("run", RUNS)
def test_a_legacy_checkpoint_scores_what_its_run_folder_recorded(run, tmp_path, capsys):
    """With the run's own test search (greedy): its test.hyp and results.json test scores."""
    hypotheses = tmp_path / "test.hyp"
    code, out, err = run_main(evaluate.main, capsys, best(run), "--data-root", tmp_path / "data",
                              "-o", hypotheses, "--json", "--beam-size", "1")  # fmt: skip
    assert code == 0, err
    assert hypotheses.read_text(encoding="utf-8") == (SWEEP / run / "test.hyp").read_text()
    recorded = json.loads((SWEEP / run / "results.json").read_text())["test"]
    scores = json.loads(out)
    assert scores["bleu"] == pytest.approx(recorded["bleu"], abs=1e-9)
    assert scores["chrf"] == pytest.approx(recorded["chrf"], abs=1e-9)


# ---------------------------------------------------------------- comparing

# The columns of comparison.csv read from the legacy files: results.json (parameters, steps,
# scores), the TensorBoard scalars (tokens/s, last ¼ gain, alignment accuracy, minutes to
# best) and .hydra/config.yaml (the model's name).
FROM_LEGACY_FILES = ("parameters", "steps", "best_step", "train_minutes", "minutes_to_best",
                     "last_quarter_gain", "tokens_per_sec", "valid_bleu", "test_bleu",
                     "test_chrf", "alignment_accuracy")  # fmt: skip


def test_compare_summarises_the_two_legacy_runs_as_the_old_code_did(tmp_path):
    shutil.copytree(SWEEP, tmp_path / "sweep")
    finished = run_command("seq2seq.cli.compare", "stages=[summary]", "sweeps=[sweep]",
                           "report.out_dir=report", "dir=compare", cwd=tmp_path)  # fmt: skip
    assert finished.returncode == 0, finished.stdout[-3000:]
    report = (tmp_path / "report" / "COMPARISON.md").read_text(encoding="utf-8")
    with open(tmp_path / "report" / "comparison.csv", newline="", encoding="utf-8") as table:
        rows = {row["run_dir"]: row for row in csv.DictReader(table)}
    with open(FIXTURE / "expected" / "comparison.csv", newline="", encoding="utf-8") as table:
        old_rows = {row["run_dir"]: row for row in csv.DictReader(table)}
    assert sorted(rows) == sorted(old_rows) == [f"sweep/{run}" for run in RUNS]
    for run_dir, old in old_rows.items():
        assert run_dir in report
        assert old["model"] in report  # "encoder=transformer · decoder=transformer · ..."
        assert rows[run_dir]["model"] == old["model"]
        for column in FROM_LEGACY_FILES:
            assert float(rows[run_dir][column]) == pytest.approx(float(old[column]), rel=1e-9), (
                f"{run_dir}: {column}"
            )
    assert "encoder=transformer" in report and "encoder=gru" in report
    # The alignment picture is drawn from the runs' legacy best.pt; a run whose checkpoint
    # does not load leaves it out (with a warning), so the picture must be there.
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", report)
    assert images and all((tmp_path / "report" / image).is_file() for image in images), images


# ---------------------------------------------------------------- resuming


@pytest.mark.parametrize("run", RUNS)
def test_a_legacy_run_resumes_from_its_last_checkpoint_as_the_old_code_did(run, tmp_path, capsys):
    """The run's own command line, two more updates, trainer.resume: the same losses as the
    old code logged after the same resumption (data order, optimiser and random state
    restored from the legacy last.pt), in the same run folder; the new checkpoint translates."""
    run_dir = tmp_path / run
    shutil.copytree(SWEEP / run, run_dir)
    finished = run_command("seq2seq.cli.train", *recorded_overrides(run_dir),
                           f"trainer.max_steps={RESUMED_TO}", "trainer.log_every=1",
                           "logging.tensorboard=false",  # no attention images: 3 s less
                           f"trainer.resume={run_dir}", f"hydra.run.dir={run_dir}",
                           cwd=tmp_path)  # fmt: skip
    assert finished.returncode == 0, finished.stdout[-3000:]
    logged = metrics_lines((run_dir / "metrics.jsonl").read_text(encoding="utf-8"))
    old_log = metrics_lines((SWEEP / run / "metrics.jsonl").read_text(encoding="utf-8"))
    assert {step: logged[step] for step in old_log} == old_log  # the legacy log kept
    old_resumed = metrics_lines(expected(f"resume_{run}_metrics.jsonl"))
    assert max(logged) == RESUMED_TO and sorted(old_resumed) == [151, RESUMED_TO]
    for step, old in old_resumed.items():
        for key in ("train/loss", "train/grad_norm", "train/lr", "train/tflop"):
            assert logged[step][key] == pytest.approx(old[key], rel=1e-6), f"step {step}: {key}"
        assert logged[step]["epoch"] == old["epoch"]
    code, out, err = run_main(translate.main, capsys, run_dir / "checkpoints" / "last.pt",
                              "-i", INPUTS)  # fmt: skip
    assert code == 0, err
    assert len(out.splitlines()) == len(INPUTS.read_text().splitlines())


def test_rerunning_a_finished_legacy_run_keeps_its_results(tmp_path):
    """`trainer.resume=auto` in the folder of a finished run (the command rerun as it was):
    nothing trains, and its results.json and test.hyp stand."""
    run_dir = tmp_path / "1_gru_additive"
    shutil.copytree(SWEEP / "1_gru_additive", run_dir)
    finished = run_command("seq2seq.cli.train", *recorded_overrides(run_dir),
                           "trainer.resume=auto", f"hydra.run.dir={run_dir}",
                           cwd=tmp_path)  # fmt: skip
    assert finished.returncode == 0, finished.stdout[-3000:]
    # Not tested again: the files are as the old run left them (a new test would also
    # rewrite results.json's run_dir, which still names the folder the old code ran in).
    for name in ("results.json", "test.hyp"):
        assert (run_dir / name).read_bytes() == (SWEEP / "1_gru_additive" / name).read_bytes()
    logged = metrics_lines((run_dir / "metrics.jsonl").read_text(encoding="utf-8"))
    assert max(logged) == 150
