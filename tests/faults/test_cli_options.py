"""Command-line values out of range, given to every command that takes them: thread
counts (`--threads 100000` used to end `seq2seq-lab` in a segmentation fault), device names
(`--device banana` used to start the lab's experiments and fail inside each), ports, seeds
and counts. Each is refused while the options are parsed (`seq2seq.cli.checked_options`): exit
code 2, one line on stderr naming the option, nothing on stdout, nothing written in the
working folder; `trainer.threads` and seq2seq-compare's counts the same way at start-up.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from helpers import TINY_TOY, compare_settings, compose_config, run_main

from seq2seq.cli import align, align_baseline, data, evaluate, lab, serve, translate
from seq2seq.config.build import ConfigError
from seq2seq.config.value_checks import thread_limit
from seq2seq.runs.assemble import train_and_test
from seq2seq.study.comparison import check

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.attack("cli")

TOO_MANY_THREADS = str(100 * (os.cpu_count() or 1) + 100_000)

# Bad values every command with the option must refuse: (arguments, the option named).
THREAD_CASES = {
    "threads_huge": (["--threads", TOO_MANY_THREADS], "--threads"),
    "threads_negative": (["--threads", "-1"], "--threads"),
    "threads_not_a_number": (["--threads", "many"], "--threads"),
}
DEVICE_CASES = {
    "device_banana": (["--device", "banana"], "--device"),
    "device_cuda_7": (["--device", "cuda:7"], "--device"),
    "device_meta": (["--device", "meta"], "--device"),
}


def lab_argv(options: list[str], folder: Path) -> list[str]:
    return ["masks", "--quick", "--out", str(folder / "lab"), "--runs", str(folder / "runs"),
            *options]  # fmt: skip


def checkpoint_argv(options: list[str], folder: Path) -> list[str]:
    return [str(folder / "model.pt"), "a b c", *options]


def evaluate_argv(options: list[str], folder: Path) -> list[str]:
    return [str(folder / "model.pt"), "--split", "test", "-o", str(folder / "out.hyp"), *options]


def align_argv(options: list[str], folder: Path) -> list[str]:
    return [str(folder / "model.pt"), "--src", "s", "--tgt", "t", "-o", str(folder / "links"),
            *options]  # fmt: skip


def serve_argv(options: list[str], folder: Path) -> list[str]:
    return [str(folder / "model.pt"), *options]


def baseline_argv(options: list[str], folder: Path) -> list[str]:
    return ["--data-dir", str(folder), "--src", "zh", "--tgt", "en", "--out",
            str(folder / "links"), *options]  # fmt: skip


# command: (its main, how its arguments are made, the cases it must refuse)
COMMANDS: dict[str, tuple[Callable, Callable, dict]] = {
    "lab": (lab.main, lab_argv, {**THREAD_CASES, **DEVICE_CASES}),
    "translate": (translate.main, checkpoint_argv, DEVICE_CASES),
    "evaluate": (evaluate.main, evaluate_argv, DEVICE_CASES),
    "align": (align.main, align_argv, DEVICE_CASES),
    "serve": (serve.main, serve_argv, {**THREAD_CASES, **DEVICE_CASES}),
}
CASES = [(command, case) for command, (_, _, cases) in COMMANDS.items() for case in cases]


def assert_refused(code: int, out: str, err: str, option: str, folder: Path) -> None:
    """Exit code 2, one line naming the option, no traceback, nothing made in `folder`."""
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    assert option in lines[0] and "Traceback" not in err
    assert out == ""
    assert list(folder.iterdir()) == [], list(folder.iterdir())


@pytest.fixture
def empty_folder(tmp_path, monkeypatch) -> Path:
    """An empty working folder: a refused command must leave it empty."""
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


@pytest.mark.parametrize(("command", "case"), CASES)
def test_a_bad_thread_count_or_device_is_refused_before_anything_starts(
    command, case, empty_folder, capsys
):
    main, make_argv, cases = COMMANDS[command]
    options, option = cases[case]
    code, out, err = run_main(main, capsys, *make_argv(options, empty_folder))
    assert_refused(code, out, err, option, empty_folder)


def test_cuda_is_refused_where_there_is_none(empty_folder, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for main, make_argv, _ in COMMANDS.values():
        code, out, err = run_main(main, capsys, *make_argv(["--device", "cuda"], empty_folder))
        assert_refused(code, out, err, "no CUDA device", empty_folder)


def test_the_thread_limit_is_a_multiple_of_the_cores(empty_folder, capsys):
    limit = thread_limit()
    assert limit == 4 * (os.cpu_count() or 1)
    code, out, err = run_main(
        lab.main, capsys, *lab_argv(["--threads", str(limit + 1)], empty_folder)
    )
    assert_refused(code, out, err, f"to {limit} ", empty_folder)


OTHER_CASES = {
    "lab_max_steps_zero": (lab.main, lab_argv, ["--max-steps", "0"], "--max-steps"),
    "lab_max_steps_huge": (lab.main, lab_argv, ["--max-steps", "1" + "0" * 30], "--max-steps"),
    "lab_seed_negative": (lab.main, lab_argv, ["--seed", "-1"], "--seed"),
    "lab_seed_over_numpy": (lab.main, lab_argv, ["--seed", str(2**32)], "--seed"),
    "serve_port_zero": (serve.main, serve_argv, ["--port", "0"], "--port"),
    "serve_port_huge": (serve.main, serve_argv, ["--port", "70000"], "--port"),
    "serve_port_negative": (serve.main, serve_argv, ["--port", "-80"], "--port"),
    "translate_beam_huge": (translate.main, checkpoint_argv, ["--beam-size", "100000"], "--beam-size"),
    "translate_batch_huge": (translate.main, checkpoint_argv, ["--batch-size", "10000000"], "--batch-size"),
    "evaluate_beam_huge": (evaluate.main, evaluate_argv, ["--beam-size", "100000"], "--beam-size"),
    "baseline_samplers_huge": (align_baseline.main, baseline_argv, ["--samplers", TOO_MANY_THREADS], "--samplers"),
    "baseline_samplers_zero": (align_baseline.main, baseline_argv, ["--samplers", "0"], "--samplers"),
    "baseline_iterations_inf": (align_baseline.main, baseline_argv, ["--iterations", "inf"], "--iterations"),
    "baseline_iterations_nan": (align_baseline.main, baseline_argv, ["--iterations", "nan"], "--iterations"),
    "baseline_iterations_huge": (align_baseline.main, baseline_argv, ["--iterations", "1e12"], "--iterations"),
    "baseline_max_train_negative": (align_baseline.main, baseline_argv, ["--max-train", "-5"], "--max-train"),
    "synth_pairs_huge": (data.synth_main, lambda options, folder: [*options, str(folder / "s.tsv")], [str(10**15)], "pairs"),
    "synth_pairs_negative": (data.synth_main, lambda options, folder: [*options, str(folder / "s.tsv")], ["-5"], "pairs"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(OTHER_CASES))
def test_a_count_port_or_seed_out_of_range_is_refused(case, empty_folder, capsys):
    main, make_argv, options, option = OTHER_CASES[case]
    code, out, err = run_main(main, capsys, *make_argv(options, empty_folder))
    assert_refused(code, out, err, option, empty_folder)


# ---------------------------------------------------------------- training and compare


@pytest.mark.parametrize("threads", [thread_limit() + 1, 100_000, -1])
def test_trainer_threads_out_of_range_stops_the_training_before_its_folder(threads, tmp_path):
    config = compose_config([*TINY_TOY, f"trainer.threads={threads}"])
    with pytest.raises(ConfigError, match="trainer.threads must be an integer"):
        train_and_test(config, tmp_path / "run", outputs_root=tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("override", "key"),
    [("threads=100000", "threads"), ("threads=-1", "threads"), ("jobs=100000", "jobs"),
     ("seeds=1000000000000", "seeds"), ("seed_base=-1", "seed_base"),
     ("report.resamples=0", "report.resamples"),
     ("report.resamples=1000000000000", "report.resamples")],
)  # fmt: skip
def test_compare_counts_out_of_range_fail_before_anything_is_trained(override, key):
    with pytest.raises(ValueError) as failure:
        check(compare_settings(override))
    assert str(failure.value).startswith(key)


# ---------------------------------------------------------------- real processes


def one_process(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})  # fmt: skip


def test_lab_with_100000_threads_is_one_line_not_a_segfault(tmp_path):
    done = one_process([sys.executable, "-m", "seq2seq.lab", "masks", "--quick", "--threads",
                        "100000"], tmp_path)  # fmt: skip
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.startswith("seq2seq-lab: error: argument --threads: must be an integer")
    assert len(done.stderr.strip().splitlines()) == 1 and done.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_compare_with_a_bad_report_device_is_one_line(tmp_path):
    done = one_process([sys.executable, "-m", "seq2seq.cli.compare", "report.device=banana",
                        "stages=[summary]", f"dir={tmp_path / 'cmp'}"], tmp_path)  # fmt: skip
    assert done.returncode == 2, done.stderr
    errors = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "report.device 'banana' is not a device name" in errors[0]
    assert "Traceback" not in done.stderr


# ---------------------------------------------------------------- the scripts


def script(name: str):
    """A script of scripts/ loaded as a module (its `main` not run)."""
    spec = importlib.util.spec_from_file_location(
        f"script_{name}", REPO_ROOT / "scripts" / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT_CASES = {
    "bench_threads": ("bench", ["--threads", TOO_MANY_THREADS], "--threads"),
    "bench_device": ("bench", ["--device", "banana"], "--device"),
    "bench_steps": ("bench", ["--steps", "0"], "--steps"),
    "bench_peer_threads": ("bench_peer", ["--threads", "-1"], "--threads"),
    "bench_peer_minutes": ("bench_peer", ["--minutes", "inf"], "--minutes"),
    "bench_inference_threads": ("bench_inference", ["--model", "a=b", "--threads", "1", TOO_MANY_THREADS], "--threads"),
    "bench_data_updates": ("bench_data", ["--updates", "0"], "--updates"),
    "attention_diagnostics_threads": ("attention_diagnostics", ["--threads", TOO_MANY_THREADS], "--threads"),
    "generalisation_rare_count": ("generalisation", ["x.pt", "--rare-count", "-3"], "--rare-count"),
    "serve_load_concurrency": ("serve_load", ["--concurrency", "1", "1000000"], "--concurrency"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(SCRIPT_CASES))
def test_a_script_refuses_a_bad_value_in_one_line(case, empty_folder, capsys):
    name, options, option = SCRIPT_CASES[case]
    module = script(name)
    parse = module.main if name == "generalisation" else module.build_parser().parse_args
    code, out, err = run_main(parse, capsys, *options)
    assert_refused(code, out, err, option, empty_folder)
