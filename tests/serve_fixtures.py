"""What the service's tests share: the toy checkpoint they serve, an engine that counts (and
may slow) the sentences it translates, the real server (uvicorn, `server_config`) in a
thread on a free 127.0.0.1 port, and raw HTTP over a socket to that port. Traffic goes to
127.0.0.1 only, every socket with a timeout."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from helpers import TOY_TRANSFORMER, compose_config

from seq2seq.runs.assemble import train_and_test

HOST = "127.0.0.1"


def toy_checkpoint(root: Path) -> Path:
    """A toy Transformer (1 encoder layer of 4 heads, 2 decoder layers of 4 heads) trained
    for two updates under `root`: its `best.pt`."""
    train_and_test(compose_config(TOY_TRANSFORMER + [f"data.root={root / 'data'}"]), root / "run")
    return root / "run" / "checkpoints" / "best.pt"


class CountingEngine:
    """An engine that records the sentences it is given (`seen`; `calls`, `sentences`:
    how many calls and sentences), waits for `gate` when there is one (10 s at most) and
    sleeps `pause_s` (so that work takes a known time), then lets `engine` translate."""

    def __init__(self, engine, pause_s: float = 0.0, gate: threading.Event | None = None):
        self.engine, self.name, self.pause_s, self.gate = engine, engine.name, pause_s, gate
        self.links_problem, self.attention_problem = engine.links_problem, engine.attention_problem
        self.seen: list[str] = []
        self.calls = 0

    @property
    def sentences(self) -> int:
        return len(self.seen)

    def translate(self, sentences, settings, need_weights):
        self.calls += 1
        if self.gate is not None:
            assert self.gate.wait(10)
        time.sleep(self.pause_s)
        self.seen.extend(sentences)
        return self.engine.translate(sentences, settings, need_weights)

    def __getattr__(self, name):  # links, views, model_info, viewer_base
        return getattr(self.engine, name)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


@contextmanager
def server_in_thread(app, limits) -> Iterator[int]:
    """The service `app` run by uvicorn as `seq2seq-serve` runs it (`server_config`, the
    logging left to pytest) in a thread on a free port; its port. Stopped on the way out."""
    import uvicorn

    from seq2seq.serve.server import server_config

    port = free_port()
    server = uvicorn.Server(server_config(app, HOST, port, limits, log_config=None))
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(20)


def request_bytes(path: str = "/translate", body: bytes | None = None, host: str | None = HOST,
                  content_type: str | None = "application/json", method: str = "POST",
                  http: str = "HTTP/1.1") -> bytes:  # fmt: skip
    """A request as a client sends it; a `None` header is left out."""
    lines = [f"{method} {path} {http}"]
    if host is not None:
        lines.append(f"Host: {host}")
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


def exchange(port: int, data: bytes, timeout: float = 10.0) -> Answer:
    """Send `data` on a new connection and read one answer (its Content-Length)."""
    with socket.create_connection((HOST, port), timeout=timeout) as connection:
        connection.sendall(data)
        return read_answer(connection)


def read_answer(connection: socket.socket) -> Answer:
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = connection.recv(65536)
        assert chunk, f"the connection closed before an answer: {received!r}"
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    while len(body) < int(headers.get("content-length", 0)):
        chunk = connection.recv(65536)
        assert chunk, "the connection closed inside the body"
        body += chunk
    return Answer(int(status_line.split()[1]), headers, body)


def translate_body(sentences: list[str], **options) -> bytes:
    return json.dumps({"sentences": sentences, **options}).encode("utf-8")


def closed_within(connection: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed `connection` (reading and dropping what it sends),
    or None when it is still open after `seconds`."""
    start = time.monotonic()
    connection.settimeout(0.05)
    while time.monotonic() - start < seconds:
        try:
            if connection.recv(65536) == b"":
                return time.monotonic() - start
        except TimeoutError:
            continue
        except ConnectionResetError:
            return time.monotonic() - start
    return None
