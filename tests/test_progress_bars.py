"""Progress bars (`seq2seq.progress_bars`): drawn in a terminal and in a notebook, silent
in CI and under redirects, and off on request.

A terminal is a pseudo-terminal (`os.openpty`) put in raw mode, so what it receives is
byte for byte what was written: a bar is a carriage return and tqdm's `%|`. The commands
run as subprocesses where the redirect itself is tested, in-process otherwise.
"""

from __future__ import annotations

import fcntl
import io
import os
import random
import re
import struct
import subprocess
import sys
import termios
import threading
import tty
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from helpers import compose_config, letters, run_main, save_model

import seq2seq.cli.lab as lab_cli
from seq2seq.cli import translate as translate_cli
from seq2seq.config.build import build_model
from seq2seq.data.tokenizer import SubwordTokenizer
from seq2seq.lab.experiment import Experiment, Finding
from seq2seq.lab.page import Machine
from seq2seq.progress_bars import PROGRESS_ENV, bars_wanted, in_notebook, progress_bar
from seq2seq.training.progress import ProgressDisplay

REPO_ROOT = Path(__file__).resolve().parent.parent
BAR_MARK = "%|"  # tqdm's percentage next to the bar itself
SWITCHES = ("CI", "TQDM_DISABLE", PROGRESS_ENV)  # environment variables that turn bars off
LINES = 40  # input lines of the translation: ten batches of BATCH
BATCH = 4


def quiet_environment(**extra: str) -> dict[str, str]:
    """This environment without anything that turns bars off, one thread, plus `extra`."""
    environ = {key: value for key, value in os.environ.items() if key not in SWITCHES}
    return {**environ, "OMP_NUM_THREADS": "1", **extra}


@pytest.fixture
def no_switches(monkeypatch):
    """The test's own environment without CI, TQDM_DISABLE or SEQ2SEQ_PROGRESS, each
    restored after, also when a command sets one (`--no-progress`): set first so that
    monkeypatch records its value before, then removed."""
    for name in SWITCHES:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


@contextmanager
def terminal() -> Iterator[tuple[io.TextIOWrapper, list[bytes]]]:
    """A raw 80-column pseudo-terminal: its writable end as a text stream, and the bytes it
    received (complete once the block ends). A thread drains it, so no writer blocks."""
    main_fd, child_fd = os.openpty()
    tty.setraw(child_fd)
    fcntl.ioctl(child_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    received: list[bytes] = []
    reader = threading.Thread(target=drain, args=(main_fd, received), daemon=True)
    reader.start()
    stream = open(child_fd, "w", encoding="utf-8", buffering=1)  # noqa: SIM115
    try:
        yield stream, received
    finally:
        stream.close()
        reader.join(timeout=30)
        os.close(main_fd)


def drain(fd: int, received: list[bytes]) -> None:
    """Read `fd` (a terminal's reading end) until its other end is closed."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: every writer has closed the terminal
            return
        if not chunk:
            return
        received.append(chunk)


def text_of(received: list[bytes]) -> str:
    return b"".join(received).decode("utf-8", errors="replace")


def run_on_terminal(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[bytes, str]:
    """Run `command` with stderr on a pseudo-terminal, stdout on a pipe: (stdout, what the
    terminal received)."""
    with terminal() as (stream, received):
        done = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=stream, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, text_of(received)[-2000:]
    return done.stdout, text_of(received)


def run_redirected(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[bytes, str]:
    """Run `command` with stdout and stderr on pipes, as CI and `2> file` do."""
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout, done.stderr.decode("utf-8", errors="replace")


# ---------------------------------------------------------------- the rule


def test_a_terminal_wants_bars_a_file_or_a_pipe_does_not(tmp_path):
    with terminal() as (stream, _):
        assert bars_wanted(True, stream, environ={})
        assert not bars_wanted(False, stream, environ={})
    with open(tmp_path / "log.txt", "w") as log_file:
        assert not bars_wanted(True, log_file, environ={})
    reading, writing = os.pipe()
    with open(writing, "w") as pipe:
        assert not bars_wanted(True, pipe, environ={})
    os.close(reading)
    assert not bars_wanted(True, io.StringIO(), environ={})


@pytest.mark.parametrize(
    ("environ", "wanted"),
    [
        ({PROGRESS_ENV: "0"}, False),
        ({PROGRESS_ENV: "off"}, False),
        ({PROGRESS_ENV: "1"}, True),
        ({"CI": "1"}, False),
        ({"CI": "true"}, False),
        ({"CI": "false"}, True),
        ({"CI": ""}, True),
        ({"TQDM_DISABLE": "1"}, False),
        ({}, True),
    ],
)
def test_the_environment_turns_bars_off_even_on_a_terminal(environ, wanted):
    with terminal() as (stream, _):
        assert bars_wanted(True, stream, environ=environ) is wanted


def fake_ipython(shell: object) -> types.ModuleType:
    module = types.ModuleType("IPython")
    module.get_ipython = lambda: shell
    return module


def test_a_jupyter_kernel_wants_bars_though_its_stderr_is_no_terminal(monkeypatch):
    not_a_terminal = io.StringIO()
    assert not in_notebook()  # pytest is no kernel
    kernel_shell = types.SimpleNamespace(kernel=object())
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    monkeypatch.setitem(sys.modules, "IPython", fake_ipython(kernel_shell))
    assert in_notebook()
    assert bars_wanted(True, not_a_terminal, environ={})
    assert not bars_wanted(True, not_a_terminal, environ={PROGRESS_ENV: "0"})
    assert not bars_wanted(False, not_a_terminal, environ={})
    # IPython in a terminal (no kernel), or a shell not made yet: no notebook
    monkeypatch.setitem(sys.modules, "IPython", fake_ipython(types.SimpleNamespace()))
    assert not bars_wanted(True, not_a_terminal, environ={})
    monkeypatch.setitem(sys.modules, "IPython", fake_ipython(None))
    assert not in_notebook()


def test_the_notebook_check_never_imports_ipython(monkeypatch):
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    assert not in_notebook()
    assert "IPython" not in sys.modules


def test_a_bar_draws_on_a_terminal_and_writes_nothing_into_a_file(tmp_path, no_switches):
    with terminal() as (stream, received):
        with progress_bar(10, unit="step", desc="counting", file=stream) as bar:
            bar.update(10)
    drawn = text_of(received)
    assert "counting" in drawn and BAR_MARK in drawn and "10/10" in drawn and "\r" in drawn
    with open(tmp_path / "err.txt", "w") as log_file:
        with progress_bar(10, unit="step", desc="counting", file=log_file) as bar:
            bar.update(10)
    assert (tmp_path / "err.txt").read_text() == ""


# ---------------------------------------------------------------- training


def test_training_draws_the_bar_from_the_resumed_update_with_the_time_left(
    monkeypatch, no_switches, caplog
):
    caplog.set_level("INFO", logger="seq2seq.training.progress")
    with terminal() as (stream, received), monkeypatch.context() as patch:
        patch.setattr(sys, "stderr", stream)
        display = ProgressDisplay(total_steps=100, enabled=True)
        display.update(40, {})  # resumed at update 40: the bar starts there
        for step in range(41, 51):
            display.advance(step, float(step))
        display.update(50, {"train/loss": 1.5, "train/lr": 1e-3, "train/tokens_per_sec": 900})
        display.close()
    drawn = text_of(received)
    assert drawn.split("\r")[1].startswith(" 40%|") and "40/100" in drawn
    assert "50/100" in drawn and "loss=1.500" in drawn
    assert re.search(r"50/100 \[\d\d:\d\d<\d\d:\d\d", drawn), drawn  # elapsed<time left
    assert "update 50/100" not in caplog.text  # the bar, not the log line


@pytest.mark.parametrize("switch_off", ["option", "environment"])
def test_training_off_a_bar_logs_its_lines(monkeypatch, no_switches, caplog, switch_off):
    caplog.set_level("INFO", logger="seq2seq.training.progress")
    if switch_off == "environment":
        monkeypatch.setenv(PROGRESS_ENV, "0")
    with terminal() as (stream, received), monkeypatch.context() as patch:
        patch.setattr(sys, "stderr", stream)
        display = ProgressDisplay(100, enabled=switch_off != "option")
        display.update(0, {})
        display.advance(1, 1.0)
        display.update(1, {"train/loss": 1.5, "train/lr": 1e-3, "train/tokens_per_sec": 900})
        display.close()
    assert text_of(received) == ""
    assert "update 1/100 epoch 0 loss 1.500" in caplog.text


# ---------------------------------------------------------------- translating a file


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """An untrained small GRU on the letters task: its outputs are noise, but each line is
    translated, which is all a bar counts."""
    folder = tmp_path_factory.mktemp("progress")
    tokenizer = SubwordTokenizer.train(
        letters(random.Random(0), 500), lang="toy", vocab_size=30, folder=folder, vocab_cap=True
    )
    cfg = compose_config(["data=toy_reverse", "model.embed_dim=16", "encoder.hidden_size=16",
                          "decoder.hidden_size=16", "encoder=gru", "decoder=gru",
                          "attention=additive"])  # fmt: skip
    torch.manual_seed(0)
    model = build_model(cfg, tokenizer.vocab_size, tokenizer.vocab_size)
    save_model(folder / "model.pt", model, cfg, tokenizer)
    (folder / "input.txt").write_text("\n".join(letters(random.Random(1), LINES)) + "\n")
    return folder / "model.pt"


def translate_command(checkpoint: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "seq2seq.cli.translate", str(checkpoint),
            "-i", str(checkpoint.with_name("input.txt")), "--batch-size", str(BATCH),
            "--max-len-a", "1", "--max-len-b", "2", *options]  # fmt: skip


def test_translating_a_file_is_silent_redirected_and_shows_a_bar_on_a_terminal(
    checkpoint, tmp_path
):
    command, env = translate_command(checkpoint), quiet_environment()
    redirected_out, redirected_err = run_redirected(command, tmp_path, env)
    assert "\r" not in redirected_err and BAR_MARK not in redirected_err
    assert len(redirected_out.decode().splitlines()) == LINES
    shown_out, drawn = run_on_terminal(command, tmp_path, env)
    assert "translating" in drawn and BAR_MARK in drawn and f"/{LINES}" in drawn
    assert shown_out == redirected_out  # the bar leaves standard output as it was
    ci_out, ci_err = run_on_terminal(command, tmp_path, quiet_environment(CI="true"))
    assert ci_out == redirected_out and BAR_MARK not in ci_err and "\r" not in ci_err


@pytest.mark.parametrize(
    ("options", "environ", "shown"),
    [
        ((), {}, True),
        (("--no-progress",), {}, False),
        ((), {PROGRESS_ENV: "0"}, False),
        ((), {"CI": "1"}, False),
        (("--batch-size", str(LINES)), {}, False),
    ],  # fmt: skip
)
def test_translate_shows_its_bar_unless_turned_off_or_one_batch(
    checkpoint, monkeypatch, capsys, no_switches, options, environ, shown
):
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    argv = translate_command(checkpoint, *options)[3:]
    with terminal() as (stream, received), monkeypatch.context() as patch:
        patch.setattr(sys, "stderr", stream)
        code, out, _ = run_main(translate_cli.main, capsys, *argv)
    assert code == 0 and len(out.splitlines()) == LINES
    drawn = text_of(received)
    assert (BAR_MARK in drawn and "translating" in drawn) is shown, drawn


# ---------------------------------------------------------------- preparing a corpus


def corpus_overrides(tmp_path: Path) -> list[str]:
    """`seq2seq-data` overrides of a small tab-separated corpus given by a file:// URL, so
    that it is downloaded (a bar) and read (a bar), in `data` below the working folder."""
    corpus = tmp_path / "pairs.tsv"
    rng = random.Random(0)
    words = [("cat", "猫"), ("dog", "狗"), ("tea", "茶"), ("red", "红"), ("big", "大")]
    lines = []
    for index in range(300):
        chosen = rng.choices(words, k=rng.randint(2, 5))
        lines.append(f"{' '.join(w for w, _ in chosen)} {index}.\t"
                     f"{''.join(h for _, h in chosen)}{index}。\tCC-BY")  # fmt: skip
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [f"data.source.url={corpus.as_uri()}", "data.source.member=''",
            "data.source.sha256=null", "data.name=tiny", "data.valid_size=20",
            "data.test_size=20", "data.src_vocab_size=40", "data.tgt_vocab_size=40",
            "data.vocab_cap=true", "data.root=data"]  # fmt: skip


def without_log_times(stdout: bytes) -> list[str]:
    """`seq2seq-data`'s standard output (its log lines go there) without their times."""
    return [re.sub(r"^\[[^]]*\]", "[time]", line) for line in stdout.decode().splitlines()]


def test_preparing_a_corpus_is_silent_redirected_and_shows_its_bars_on_a_terminal(tmp_path):
    overrides = corpus_overrides(tmp_path)
    command = [sys.executable, "-m", "seq2seq.cli.data", "prepare", *overrides]
    runs = {name: tmp_path / name for name in ("piped", "terminal", "switched_off")}
    for folder in runs.values():
        folder.mkdir()
    piped_out, piped_err = run_redirected(command, runs["piped"], quiet_environment())
    assert "\r" not in piped_err and BAR_MARK not in piped_err
    assert "train size" in piped_out.decode()
    shown_out, drawn = run_on_terminal(command, runs["terminal"], quiet_environment())
    assert "reading pairs.tsv" in drawn and BAR_MARK in drawn  # the corpus read, line by line
    assert without_log_times(shown_out) == without_log_times(piped_out)
    off_out, off_err = run_on_terminal([*command, "--no-progress"], runs["switched_off"],
                                       quiet_environment())  # fmt: skip
    assert BAR_MARK not in off_err and "\r" not in off_err
    assert without_log_times(off_out) == without_log_times(piped_out)


# ---------------------------------------------------------------- the lab


def drawn_experiment(context) -> Finding:
    return Finding(summary="Nothing measured.", table=[{"x": 0}], figures=[])


FAKES = {
    name: Experiment(name, order, name.title(), "A claim.", drawn_experiment, "Nothing.")
    for order, name in enumerate(("first", "second"), 1)
}


@pytest.mark.parametrize("options", [(), ("--no-progress",)])
def test_the_lab_counts_its_experiments_on_a_terminal_unless_told_not_to(
    tmp_path, monkeypatch, capsys, no_switches, options
):
    monkeypatch.setattr(lab_cli, "experiments", lambda: FAKES)
    monkeypatch.setattr(lab_cli, "this_machine", lambda threads: Machine("a CPU", 2, 1, 1.0))
    with terminal() as (stream, received), monkeypatch.context() as patch:
        patch.setattr(sys, "stderr", stream)
        with pytest.raises(SystemExit) as stopped:
            lab_cli.main(["first", "second", "--out", str(tmp_path / "pages"), "--quick",
                          *options])  # fmt: skip
    assert stopped.value.code == 0
    out = capsys.readouterr().out
    assert out.count("Nothing measured.") == 2 and "\r" not in out
    drawn = text_of(received)
    assert ("2/2" in drawn and BAR_MARK in drawn and "experiment" in drawn) is (not options)
