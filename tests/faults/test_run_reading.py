"""Damaged run folders: the comparison (`seq2seq.study.report`, `seq2seq.study.comparison`)
and the loss-curve check (`seq2seq.study.loss_curves`, `scripts/gpu_compare_losses.py`) read
what training left behind, and a run whose files cannot be read is reported in one line
naming the file, left out of the table and counted, never a traceback. The library readers
(`seq2seq.study.reading`) validate what they read and raise `RunReadError` naming the file.
A gold alignment file that never uses word 0 is read with a warning (it is likely 1-based).
"""

from __future__ import annotations

import csv
import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from sweep_fixtures import fake_run, report, results

from seq2seq.align.gold import gold_set
from seq2seq.align.pharaoh import read_links
from seq2seq.study import loss_curves
from seq2seq.study.comparison import StageError, best_of_first_sweep
from seq2seq.study.reading import RunReadError, best_choice, read_config, read_results
from seq2seq.study.sweep import link_runs

pytestmark = pytest.mark.attack("runs")
SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
DAMAGED = "2_attention=general"

# A damaged file of the third run: (its path in the run folder, its content, what the one
# line about it says).
RESULTS, CONFIG = "results.json", ".hydra/config.yaml"
DAMAGE = {
    "results truncated": (RESULTS, b'{"test": {"bleu": 12.0, "ch', "not valid JSON"),
    "results empty": (RESULTS, b"", "empty file"),
    "results a list": (RESULTS, b"[1, 2, 3]", "not a JSON object (got a list)"),
    "results a string step count": (RESULTS, b'{"steps": "sixty"}',
                                    "steps must be an integer, got 'sixty'"),
    "results test not an object": (RESULTS, b'{"test": [1]}', "test must be an object, got a list"),
    "results a string test bleu": (RESULTS, b'{"test": {"bleu": "high"}}',
                                   "test.bleu must be a number"),
    "results a boolean parameter count": (RESULTS, b'{"parameters": true}',
                                          "parameters must be an integer"),
    "results binary bytes": (RESULTS, b"\x00\xff\xfe\x81", "not UTF-8 text"),
    "config binary bytes": (CONFIG, b"\x00\xff\xfe\x81garbage", "not UTF-8 text"),
    "config unbalanced YAML": (CONFIG, b"attention: {score: [dot\n", "not valid YAML"),
    "config a scalar": (CONFIG, b"garbage\n", "not a YAML mapping (got a string)"),
    "config a list": (CONFIG, b"- 1\n- 2\n", "not a YAML mapping (got a list)"),
    "config no model groups": (CONFIG, b"foo: bar\n", "no encoder settings"),
    "config empty": (CONFIG, b"", "not a YAML mapping (got nothing)"),
}  # fmt: skip
READERS = {RESULTS: read_results, CONFIG: read_config}


@pytest.fixture
def sweep(tmp_path) -> Path:
    """Two finished runs and a third whose files each test damages."""
    folder = tmp_path / "attention"
    fake_run(folder / "0_attention=dot", "dot", results(3_892_384, 12.0), {})
    fake_run(folder / "1_attention=additive", "additive", results(4_023_968, 14.5), {})
    fake_run(folder / DAMAGED, "general", results(3_900_000, 20.0), {})
    return folder


def table(sweep: Path, out: Path) -> Path | None:
    return report([sweep], out)


def csv_runs(out: Path) -> list[str]:
    with (out / "comparison.csv").open(encoding="utf-8") as handle:
        return [Path(row["run_dir"]).name for row in csv.DictReader(handle)]


def assert_left_out(err: str, path: Path, reason: str, count: int = 1) -> None:
    """One line names the file and what is wrong with it; one line counts the runs left
    out; no traceback."""
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if str(path) in line]
    assert len(lines) == 1 and reason in lines[0], err
    assert f"{count} run{'s' if count > 1 else ''} could not be read" in err, err


# ---------------------------------------------------------------- the report's table


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE)
def test_a_damaged_file_leaves_its_run_out_of_the_table(sweep, tmp_path, capsys, damage):
    name, content, reason = damage
    path = sweep / DAMAGED / name
    path.write_bytes(content)
    out = tmp_path / "out"
    assert table(sweep, out) is not None
    assert_left_out(capsys.readouterr().err, path, reason)
    assert csv_runs(out) == ["0_attention=dot", "1_attention=additive"]
    text = (out / "COMPARISON.md").read_text(encoding="utf-8")
    assert "1 run could not be read and was left out" in text and str(path) in text


def test_a_config_with_a_string_seed_or_a_broken_interpolation_is_left_out(
    sweep, tmp_path, capsys
):
    seeded, interpolated = sweep / "0_attention=dot", sweep / DAMAGED
    for run, key, value in [(seeded, "trainer.seed", "abc"), (interpolated, "attention.score",
                                                             "${nowhere}")]:  # fmt: skip
        config = OmegaConf.load(run / ".hydra" / "config.yaml")
        OmegaConf.update(config, key, value)
        OmegaConf.save(config, run / ".hydra" / "config.yaml")
    out = tmp_path / "out"
    assert table(sweep, out) is not None
    err = capsys.readouterr().err
    assert_left_out(err, seeded / ".hydra" / "config.yaml", "trainer.seed must be an integer", 2)
    assert_left_out(err, interpolated / ".hydra" / "config.yaml", "cannot be resolved", 2)
    assert csv_runs(out) == ["1_attention=additive"]


def test_garbage_overrides_leave_the_run_out(sweep, tmp_path, capsys):
    path = sweep / DAMAGED / ".hydra" / "overrides.yaml"
    path.write_text("{a: [1, 2]}\n", encoding="utf-8")
    out = tmp_path / "out"
    assert table(sweep, out) is not None
    assert_left_out(capsys.readouterr().err, path, "not a YAML list of overrides")
    assert csv_runs(out) == ["0_attention=dot", "1_attention=additive"]


def test_binary_test_hypotheses_cost_the_significance_test_only(tmp_path, capsys):
    """A `test.hyp` that is not text: one line, no confidence interval, the run stays."""
    prepared = tmp_path / "data" / "prepared" / "tatoeba_zh_en"
    prepared.mkdir(parents=True)
    (prepared / "test.en").write_text("a cat .\nthe dog .\n", encoding="utf-8")
    sweep, root = tmp_path / "attention", f"data.root={tmp_path / 'data'}"
    for number, attention in enumerate(("dot", "additive")):
        run = sweep / f"{number}_attention={attention}"
        fake_run(run, attention, results(4_000_000, 10.0 + number), {}, extra=(root,))
        (run / "test.hyp").write_text("a cat .\nthe dog .\n", encoding="utf-8")
    broken = sweep / "1_attention=additive" / "test.hyp"
    broken.write_bytes(b"\xff\xfe\x00a\n")
    out = tmp_path / "out"
    assert report([sweep], out, resamples=20) is not None
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{broken}: cannot be read" in err
    with (out / "comparison.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [bool(row["test_bleu_ci_low"]) for row in rows] == [True, False]


def test_a_sweep_with_no_readable_run_writes_nothing_and_says_so_in_one_line(
    sweep, tmp_path, capsys
):
    for run in sweep.iterdir():
        (run / "results.json").write_text("[1, 2, 3]", encoding="utf-8")
    assert table(sweep, tmp_path / "out") is None
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("not a JSON object") == 3
    assert err.strip().splitlines()[-1].startswith("compare: no run could be read")
    assert not (tmp_path / "out" / "COMPARISON.md").exists()


# ---------------------------------------------------------------- the encoder stage's choice


def test_the_best_attention_skips_a_run_it_cannot_read(sweep, capsys):
    path = sweep / DAMAGED / "results.json"  # the best valid BLEU, had it been readable
    path.write_bytes(b"[1, 2, 3]")
    assert best_of_first_sweep(sweep.parent) == "additive"
    assert_left_out(capsys.readouterr().err, path, "not a JSON object (got a list)")


def test_the_best_attention_skips_garbage_overrides_and_fails_when_nothing_is_left(
    sweep, capsys
):
    for run in sweep.iterdir():
        (run / ".hydra" / "overrides.yaml").write_bytes(b"\x00\xff\xfe")
    with pytest.raises(StageError, match="no finished run below") as failure:
        best_of_first_sweep(sweep.parent)
    assert "\n" not in str(failure.value)
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("not UTF-8 text") == 3
    assert "3 runs could not be read" in err


def test_linking_skips_a_run_whose_overrides_cannot_be_read(sweep, tmp_path, capsys):
    path = sweep / "0_attention=dot" / ".hydra" / "overrides.yaml"
    path.write_bytes(b"[unclosed\n")
    target = tmp_path / "encoders"
    assert [link.name for link in link_runs(sweep, target, "attention=additive")] == [
        "0_attention=additive"
    ]
    assert_left_out(capsys.readouterr().err, path, "not valid YAML")
    assert [link.name for link in target.iterdir()] == ["0_attention=additive"]


# ---------------------------------------------------------------- the library readers


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE)
def test_the_readers_validate_what_they_read(tmp_path, damage):
    name, content, reason = damage
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    with pytest.raises(RunReadError, match=rf"{re.escape(path.name)}: ") as raised:
        READERS[name](tmp_path)
    assert reason in str(raised.value)


def test_read_results_keeps_a_valid_file_and_a_missing_one(tmp_path):
    assert read_results(tmp_path) == {}  # still running, or crashed
    (tmp_path / "results.json").write_text(json.dumps(results(10, 1.5)), encoding="utf-8")
    assert read_results(tmp_path) == results(10, 1.5)


def test_best_choice_reports_unreadable_runs_when_asked(sweep):
    (sweep / DAMAGED / "results.json").write_bytes(b"")
    with pytest.raises(RunReadError, match="empty file"):
        best_choice(sweep, "attention")
    unreadable: list[RunReadError] = []
    assert best_choice(sweep, "attention", unreadable) == "additive"
    assert [str(sweep / DAMAGED / "results.json") in str(error) for error in unreadable] == [True]


# ---------------------------------------------------------------- the loss-curve check

BAD_LINES = {  # a metrics.jsonl line → what the warning says
    "a null loss": (b'{"step": 50, "train/loss": null}', "train/loss must be a number"),
    "a string step": (b'{"step": "fifty", "train/loss": 1.0}', "step must be an integer"),
    "a list": (b"[50, 1.0]", "not a JSON object"),
    "binary bytes": (b"\x00\xff\xfe\x81", "not UTF-8 text"),
    "no loss": (b'{"step": 50}', "no train/loss"),
    "not JSON": (b'{"step": 50, "train/lo', "not valid JSON"),
}


def metrics_run(run_dir: Path, steps: int, scale: float = 1.0) -> Path:
    run_dir.mkdir(parents=True)
    lines = [json.dumps({"step": s, "train/loss": scale * (2 + 6 / s)}) for s in range(1, steps)]
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return run_dir


@pytest.mark.parametrize("bad", BAD_LINES.values(), ids=BAD_LINES)
def test_a_bad_metrics_line_is_skipped_and_named(tmp_path, capsys, bad):
    content, reason = bad
    reference = metrics_run(tmp_path / "fp32", 120)
    candidate = metrics_run(tmp_path / "bf16", 120)
    path = candidate / "metrics.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines.insert(10, content)  # the 11th line
    path.write_bytes(b"\n".join(lines))
    assert loss_curves.check(candidate, reference) == 0
    err = capsys.readouterr().err
    assert f"{path}: skipped 1 unreadable line: line 11 ({reason}" in err, err
    assert 50 in loss_curves.read_losses(candidate)  # the good line of step 50 is kept


def test_a_truncated_last_line_and_a_file_of_garbage_run_as_a_script(tmp_path):
    """As `gpu_check.sh` runs it: a killed run's half-written last line is skipped; a file
    with no readable line at all exits 2 in one line; neither prints a traceback."""
    reference = metrics_run(tmp_path / "fp32", 120)
    candidate = metrics_run(tmp_path / "bf16", 120)
    with (candidate / "metrics.jsonl").open("ab") as stream:
        stream.write(b'{"step": 120, "train/lo')
    script = [sys.executable, str(SCRIPTS / "gpu_compare_losses.py")]
    finished = subprocess.run([*script, str(candidate), str(reference)], capture_output=True,
                              text=True, timeout=60)  # fmt: skip
    assert finished.returncode == 0, finished.stderr
    assert "line 120 (not valid JSON" in finished.stderr
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "metrics.jsonl").write_bytes(b"\x00\xff\n[1]\nnull\n")
    finished = subprocess.run([*script, str(garbage), str(reference)], capture_output=True,
                              text=True, timeout=60)  # fmt: skip
    assert finished.returncode == 2 and "Traceback" not in finished.stderr
    assert finished.stderr.strip().splitlines()[-1].startswith("gpu_compare_losses: cannot read")
    assert "no readable train/loss" in finished.stderr


# ---------------------------------------------------------------- gold alignment files


def test_a_gold_file_that_never_uses_word_0_is_read_with_a_warning(tmp_path, caplog):
    one_based = tmp_path / "gold.1"
    one_based.write_text("1-1 2-3\n\n3-2 2-2-P\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="seq2seq.align.pharaoh"):
        read_links(one_based)
    assert [str(one_based) in record.getMessage() for record in caplog.records] == [True]
    assert "1-based" in caplog.records[0].getMessage()
    caplog.clear()
    zero_based = tmp_path / "gold.0"
    zero_based.write_text("1-1 2-3\n0-2\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="seq2seq.align.pharaoh"):
        read_links(zero_based)
        read_links(one_based, one_based=True)  # read as 1-based: nothing to warn about
        gold_set("zh", "en", "test")  # the shipped gold sets are 0-based
    assert caplog.records == []
