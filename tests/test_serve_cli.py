"""`seq2seq-serve`'s command line (`seq2seq.cli.serve`): every problem found before the
model loads is one line and exit code 2: a limit out of range, an `--allowed-host` that is
no host name, a port in use, a missing checkpoint, and the `serve` extra not installed (it
names the pip command). The help says what the service protects and what it does not."""

from __future__ import annotations

import socket
import sys

import pytest
from helpers import run_main

from seq2seq.cli import serve


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--max-queue", "0"], "--max-queue must be an integer from 1 to 100,000, got 0"),
     (["--max-wait-ms", "5000"], "--max-wait-ms must be a number from 0 to 1000"),
     (["--beam-size", "0"], "--beam-size must be an integer of at least 1"),
     (["--beam-size", "8", "--max-beam", "6"], "--beam-size 8 is over --max-beam 6"),
     (["--port", "70000"], "argument --port: must be an integer from 1 to 65,535"),
     (["--threads", "0"], "argument --threads: must be an integer from 1"),
     (["--engine", "ctranslate2", "--plugins", "x.py"], "--plugins needs --engine pytorch"),
     (["--read-timeout-s", "0"], "--read-timeout-s must be a number from 0.01 to 600, got 0.0"),
     (["--allowed-host", "http://evil.example/"],
      "'http://evil.example/' is not a host name or an IP address"),
     (["--allowed-host", "example.org:8080"], "give it without a port: every port is accepted")],
)  # fmt: skip
def test_bad_options_are_one_line_before_loading(capsys, tmp_path, argv, message):
    code, out, err = run_main(serve.main, capsys, tmp_path / "missing.pt", *argv)
    assert code == 2 and out == ""
    assert message in one_error_line(err)


def test_the_help_says_what_is_and_is_not_protected(capsys):
    with pytest.raises(SystemExit):
        serve.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for words in ("--allowed-host NAME", "Host header", "application/json", "no TLS",
                  "no authentication", "reverse proxy", "--read-timeout-s"):  # fmt: skip
        assert words in text


def test_a_port_in_use_is_one_line(capsys, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = run_main(serve.main, capsys, tmp_path / "x.pt", "--port", port)
    assert code == 2
    assert one_error_line(err).endswith(f"--host 127.0.0.1 --port {port}: the port is in use")


def test_a_missing_checkpoint_is_one_line(capsys, tmp_path):
    pytest.importorskip("fastapi", reason="the serve extra is not installed")
    code, _, err = run_main(serve.main, capsys, tmp_path / "missing.pt", "--port", free_port())
    assert code == 2 and "missing.pt" in one_error_line(err)


def test_without_the_extra_it_names_the_pip_command(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "fastapi", None)  # `import fastapi` raises ImportError
    code, _, err = run_main(serve.main, capsys, tmp_path / "x.pt", "--port", free_port())
    assert code == 2
    assert one_error_line(err) == (
        "seq2seq-serve: fastapi is not installed: pip install 'seq2seq-attention[serve]'"
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
