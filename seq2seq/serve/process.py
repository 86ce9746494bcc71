"""A `seq2seq-serve` process on a free loopback port, for the browser test and the load test.

`running_server(arguments)` starts `python -m seq2seq.cli.serve ARGUMENTS --host 127.0.0.1
--port FREE`, waits until `GET /health` answers, yields its URL and process, and stops it on
the way out (terminate, then kill after 10 s). The server only ever listens on 127.0.0.1.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"


class ServerError(RuntimeError):
    """The server did not start; the message holds the end of its output."""


@dataclass
class Server:
    url: str  # http://127.0.0.1:PORT
    process: subprocess.Popen


def free_port() -> int:
    """A port nothing listens on now (the OS's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def get_json(url: str, timeout: float = 5.0) -> Any:
    """GET url and read its JSON body."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


def wait_until_healthy(server: Server, log: Path, seconds: float) -> None:
    """Poll `/health` until it answers; ServerError when the process ends or time is up."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise ServerError(f"seq2seq-serve exited with {server.process.returncode}: {tail(log)}")
        try:
            get_json(server.url + "/health", timeout=1.0)
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.1)
    raise ServerError(f"seq2seq-serve did not answer within {seconds:g} s: {tail(log)}")


def tail(log: Path, lines: int = 5) -> str:
    text = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    return " | ".join(text[-lines:]) or "(no output)"


@contextmanager
def running_server(
    arguments: Sequence[str], startup_s: float = 120.0, env: dict[str, str] | None = None
) -> Iterator[Server]:
    """A server of `seq2seq-serve ARGUMENTS` on a free loopback port (module docstring)."""
    port = free_port()
    command = [sys.executable, "-m", "seq2seq.cli.serve", *arguments, "--host", HOST,
               "--port", str(port)]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="seq2seq-serve-") as folder:
        log = Path(folder) / "server.log"
        with log.open("wb") as output:
            process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env)
        server = Server(f"http://{HOST}:{port}", process)
        try:
            wait_until_healthy(server, log, startup_s)
            yield server
        finally:
            stop(process)


def stop(process: subprocess.Popen) -> None:
    """Terminate the process (uvicorn shuts down gracefully), kill it after 10 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
