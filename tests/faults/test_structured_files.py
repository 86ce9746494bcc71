"""Structured files read without bounds: the YAML and JSON that come with an artefact (a run
folder's config, overrides and results, a metrics log, an aligner's scores, a prepared
cache's metadata, a preparation record, a data config given as a file, a plugin's presets
and options) are read through `seq2seq.bounded_files`: the size checked with stat before
reading and at most the limit read, YAML aliases refused before they are expanded (a
"billion laughs" of a few hundred bytes), nesting bounded, FIFOs refused without blocking;
each refusal one line naming the file (and line). Attacks that could hang or swell run
under a time limit and, where the issue speaks of memory, a memory bound.
"""

from __future__ import annotations

import io
import os
import tracemalloc
from contextlib import redirect_stderr
from pathlib import Path

import pytest
from sweep_fixtures import fake_run, results
from watched import run_watched, within_time

from seq2seq.bounded_files import (
    MAX_DEPTH,
    STRUCTURED_LIMIT,
    StructuredFileError,
)
from seq2seq.cli import check
from seq2seq.config.data_presets import PresetError, data_preset
from seq2seq.data.encode import open_encoded
from seq2seq.data.record import read_record
from seq2seq.runs.metrics_log import read_series
from seq2seq.study.aer_rows import AlignerFileError, read_aligners
from seq2seq.study.reading import RunReadError, read_config, read_overrides, read_results

pytestmark = pytest.mark.attack("structured")
SECONDS = 10  # within_time's default
RUN = "1_attention=additive"
HUGE = 10 * 1024**3  # a sparse file: no disk used, 10 GB if read


def alias_bomb(levels: int = 9) -> str:
    """A few hundred bytes of YAML whose aliases expand to 9**levels strings."""
    lines = ['lol0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels + 1):
        lines.append(f"lol{level}: &a{level} [" + ",".join([f"*a{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def refused(error_type, function, *arguments) -> str:
    """The one-line message `function(*arguments)` is refused with, within SECONDS and
    (Python allocations traced) within 50 MB."""
    tracemalloc.start()
    try:
        with pytest.raises(error_type) as raised:
            within_time(function, *arguments)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 1024**2, f"{peak / 1024**2:.0f} MB allocated"
    message = str(raised.value)
    assert "\n" not in message
    return message


def sparse(path: Path, size: int = HUGE) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as stream:
        stream.truncate(size)
    return path


@pytest.fixture
def run(tmp_path) -> Path:
    folder = tmp_path / "cmp" / "attention"
    fake_run(folder / "0_attention=dot", "dot", results(3_892_384, 12.0), {})
    fake_run(folder / RUN, "additive", results(4_023_968, 14.5), {})
    return folder / RUN


# ---------------------------------------------------------------- run folders


def test_an_alias_bomb_in_a_run_config_is_refused_before_expansion(run):
    path = run / ".hydra" / "config.yaml"
    victim = alias_bomb() + path.read_text(encoding="utf-8")
    path.write_text(victim, encoding="utf-8")
    message = refused(RunReadError, read_config, run)
    assert message.startswith(f"{path}: line 2: a YAML alias (*a0) is refused")
    assert path.read_text(encoding="utf-8") == victim


def test_a_merge_key_is_an_alias_too(run):
    path = run / ".hydra" / "config.yaml"
    path.write_text("base: &b {x: 1}\nencoder:\n  <<: *b\n", encoding="utf-8")
    assert "a YAML alias (*b) is refused" in refused(RunReadError, read_config, run)


def test_an_alias_bomb_in_the_overrides_is_refused(run):
    path = run / ".hydra" / "overrides.yaml"
    path.write_text(alias_bomb(), encoding="utf-8")
    assert refused(RunReadError, read_overrides, run).startswith(f"{path}: line 2: a YAML alias")


def test_a_huge_results_file_is_refused_before_it_is_read(run):
    path = sparse(run / "results.json")
    assert "over the limit" in refused(RunReadError, read_results, run)
    assert path.stat().st_size == HUGE


def test_a_huge_run_config_is_refused_before_it_is_read(run):
    sparse(run / ".hydra" / "config.yaml")
    assert f"over the limit of {STRUCTURED_LIMIT:,}" in refused(RunReadError, read_config, run)


def test_a_fifo_in_place_of_the_config_is_refused_without_blocking(run):
    path = run / ".hydra" / "config.yaml"
    path.unlink()
    os.mkfifo(path)
    assert refused(RunReadError, read_config, run) == f"{path}: not a regular file"


@pytest.mark.parametrize("text", ["[" * 100_000, '{"a": ' * 5_000 + "1" + "}" * 5_000])
def test_deeply_nested_results_are_refused_not_a_recursion_error(run, text):
    (run / "results.json").write_text(text, encoding="utf-8")
    assert f"over {MAX_DEPTH}" in refused(RunReadError, read_results, run)


def test_a_deeply_nested_config_is_refused(run):
    (run / ".hydra" / "config.yaml").write_text("a: " + "[" * 50_000, encoding="utf-8")
    assert f"nested deeper than {MAX_DEPTH} levels" in refused(RunReadError, read_config, run)


def test_a_key_given_twice_is_refused_naming_its_line(run):
    path = run / ".hydra" / "config.yaml"
    path.write_text("trainer: {seed: 1}\ntrainer: {seed: 2}\n", encoding="utf-8")
    assert refused(RunReadError, read_config, run) == (
        f"{path}: line 2: the key 'trainer' is given twice"
    )


def test_the_comparison_leaves_out_a_run_whose_config_is_an_alias_bomb(run, tmp_path):
    """Before: `seq2seq-compare 'stages=[summary]'` hung at 711 MB and growing."""
    path = run / ".hydra" / "config.yaml"
    path.write_text(alias_bomb() + path.read_text(encoding="utf-8"), encoding="utf-8")
    out = tmp_path / "out"
    done = run_watched(["-m", "seq2seq.cli.compare", "stages=[summary]",
                        f"dir={run.parent.parent}", f"report.out_dir={out}", "report.image=false",
                        "report.aer=false", "report.resamples=10"], timeout=60, max_mb=1500)  # fmt: skip
    assert done.returncode == 0, (done.killed, done.stderr[-2000:])
    said = done.stdout + done.stderr
    lines = [line for line in said.splitlines() if str(path) in line]
    assert len(lines) == 1 and "a YAML alias (*a0) is refused" in lines[0], said
    assert "1 run could not be read" in said and "Traceback" not in said


# ---------------------------------------------------------------- logs and score files


def test_a_metrics_log_of_one_endless_line_is_read_in_bounded_memory(tmp_path):
    path = sparse(tmp_path / "metrics.jsonl", 200 * 1024**2)
    with path.open("ab") as stream:
        stream.write(b'\n{"step": 1, "train/loss": 2.5}\n')
    tracemalloc.start()
    try:
        series = within_time(read_series, tmp_path, "train/loss")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 1024**2, f"{peak / 1024**2:.0f} MB allocated"
    assert series.values == {1: 2.5} and series.skipped[0].startswith("line 1 (")


def test_a_metrics_line_nested_without_end_is_skipped(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("[" * 60_000 + '\n{"step": 2, "x": 1.0}\n')
    series = within_time(read_series, tmp_path, "x")
    assert series.values == {2: 1.0} and "nested too deep" in series.skipped[0]


def test_a_huge_aligner_file_is_refused_in_one_line(tmp_path):
    path = sparse(tmp_path / "aligner_eflomal.json")
    assert refused(AlignerFileError, read_aligners, path).startswith(f"aligner file {path}: ")


# ---------------------------------------------------------------- data configs and caches


def test_a_data_config_file_with_an_alias_bomb_is_refused(tmp_path):
    path = tmp_path / "corpus.yaml"
    path.write_text(alias_bomb() + "name: mine\n", encoding="utf-8")
    assert refused(PresetError, data_preset, str(path)).startswith(f"--data: {path}: line 2")


def test_a_prepared_cache_with_huge_metadata_is_refused(tmp_path):
    sparse(tmp_path / "cache" / "meta.json")
    assert "over the limit" in refused(ValueError, open_encoded, tmp_path / "cache", True)


def test_a_preparation_record_nested_without_end_is_refused(tmp_path):
    path = tmp_path / "prepared_x.json"
    path.write_text("[" * 100_000, encoding="utf-8")
    assert refused(StructuredFileError, read_record, path).startswith(f"{path}: nested")


# ---------------------------------------------------------------- a plugin's presets and options


def run_check(argv: list[str]) -> tuple[int, str]:
    """`seq2seq-check` main(argv) within SECONDS: (exit status, standard error)."""
    err = io.StringIO()

    def call():
        with redirect_stderr(err):
            try:
                return check.main(argv)
            except SystemExit as stop:
                return stop.code

    return within_time(call), err.getvalue()


def test_a_plugin_preset_with_an_alias_bomb_is_refused_in_one_line(tmp_path):
    preset = tmp_path / "configs" / "attention" / "bomb.yaml"
    preset.parent.mkdir(parents=True)
    preset.write_text(alias_bomb(), encoding="utf-8")
    status, err = run_check(["score", "dot", "--config-dir", str(tmp_path / "configs"), "--quick"])
    assert status == 2 and err.count("\n") == 1, err
    assert err.startswith(f"seq2seq-check: {preset}: line 2: a YAML alias")


def test_a_huge_plugin_preset_is_refused_in_one_line(tmp_path):
    preset = sparse(tmp_path / "configs" / "attention" / "huge.yaml")
    status, err = run_check(["score", "dot", "--config-dir", str(tmp_path / "configs"), "--quick"])
    assert status == 2 and err.count("\n") == 1 and f"{preset}: " in err and "over the limit" in err


def test_an_option_value_with_an_alias_bomb_is_refused_in_one_line():
    items = ["&a0 [l, l, l, l, l, l, l, l, l]"]
    items += [f"&a{level} [" + ", ".join([f"*a{level - 1}"] * 9) + "]" for level in range(1, 10)]
    status, err = run_check(["score", "dot", "--option", f"window=[{', '.join(items)}]"])
    assert status == 2 and err.count("\n") == 1, err
    assert "--option window: line 1: a YAML alias (*a0) is refused" in err
