"""Attacks on `seq2seq-serve` over real sockets: the service (uvicorn with the configuration
the command runs, `seq2seq.serve.server.server_config`) in a thread on a free 127.0.0.1
port, serving a toy Transformer through an engine that counts what it translates.

* clients that send heavy requests and hang up leave no work behind, and the next client
  is answered at once; a request past its deadline is a 504 and its work stops there, and
  one still queued at its deadline is never translated;
* a `Host` the service does not answer to (DNS rebinding) is a 400 and nothing else;
* a body not sent as `application/json` (what any web page can send without asking) is a
  415 and is not read;
* a client that hangs up inside its body is one INFO line, no traceback;
* a client that does not finish its headers, or its body, within `--read-timeout-s` is
  disconnected (a late body is a 408 first);
* the command itself, in a subprocess, with `--allowed-host` and `--read-timeout-s`.

Traffic goes to 127.0.0.1 only, bounded in count, every socket with a timeout.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from contextlib import contextmanager

import pytest

pytest.importorskip("fastapi", reason="fastapi is not installed (pip install '.[serve]')")
pytest.importorskip("uvicorn", reason="uvicorn is not installed (pip install '.[serve]')")

from serve_fixtures import (  # noqa: E402
    HOST,
    CountingEngine,
    closed_within,
    exchange,
    read_answer,
    request_bytes,
    server_in_thread,
    toy_checkpoint,
    translate_body,
)

from seq2seq.search.batched import SearchSettings  # noqa: E402
from seq2seq.search.translator import Translator  # noqa: E402
from seq2seq.serve.app import create_app  # noqa: E402
from seq2seq.serve.backends import TorchEngine  # noqa: E402
from seq2seq.serve.hosts import LOOPBACK_NAMES, allowed_names  # noqa: E402
from seq2seq.serve.limits import Limits  # noqa: E402
from seq2seq.serve.process import running_server  # noqa: E402

LONG = "a b c d e f g h i j a b c d e f g h i j a b c d e f"  # 26 pieces: a long search
READ_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def engine(tmp_path_factory) -> TorchEngine:
    checkpoint = toy_checkpoint(tmp_path_factory.mktemp("serve_attacks"))
    return TorchEngine(Translator.load(checkpoint), checkpoint)


@contextmanager
def served(engine, search: SearchSettings | None = None, allowed=LOOPBACK_NAMES, **limits):
    """(port, service) of the real server in a thread, serving `engine` under `limits`."""
    limits = Limits(**{"read_timeout_s": READ_TIMEOUT_S, **limits})
    app = create_app(engine, limits, search, allowed)
    with server_in_thread(app, limits) as port:
        yield port, app.state.service


def wait_for(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def health(port: int) -> dict:
    return exchange(port, request_bytes("/health", method="GET", content_type=None)).json()


def problems(caplog) -> list[logging.LogRecord]:
    """Records a hostile client must not cause: warnings, errors, tracebacks."""
    return [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]


# ---------------------------------------------------------------- work nobody awaits


@pytest.mark.attack("serve")
def test_clients_that_hang_up_leave_no_work_behind(engine, caplog, fault_figures):
    """40 clients send 32 long sentences at beam 16 (1280 sentences, 80 chunks of 16) and
    hang up once their requests are queued: at most the chunks running then are finished,
    everything else is dropped, and a new client is answered at once."""
    caplog.set_level(logging.INFO)
    counting = CountingEngine(engine, pause_s=0.1)  # each chunk takes 0.1 s at least
    clients, heavy = 40, request_bytes(body=translate_body([LONG] * 32, beam_size=16))
    sent = clients * 32
    with served(counting, max_queue=64) as (port, service):
        connections = [socket.create_connection((HOST, port), timeout=10) for _ in range(clients)]
        for connection in connections:
            connection.sendall(heavy)
        wait_for(lambda: service.queue.depth >= clients - 2)  # the rest are being translated
        translated_at_hang_up = counting.sentences
        for connection in connections:
            connection.close()
        start = time.monotonic()
        answer = exchange(port, request_bytes(body=translate_body(["a b"])))
        waited = time.monotonic() - start
        wait_for(lambda: health(port)["sentences_dropped"] + counting.sentences == sent + 1)
        assert health(port)["sentences_translated"] == counting.sentences
    assert answer.status == 200 and waited < 5.0, waited  # before: 26 s of abandoned work
    heavy_translated = counting.sentences - 1
    assert heavy_translated <= translated_at_hang_up + 2 * 16  # the chunks then running
    assert heavy_translated <= sent // 4
    assert not problems(caplog)
    assert sum("hung up while it waited" in r.getMessage() for r in caplog.records) >= clients - 2
    fault_figures.add("serve_hang_up_sentences_sent", sent)
    fault_figures.add("serve_hang_up_sentences_translated", heavy_translated)


@pytest.mark.attack("serve")
def test_a_request_past_its_deadline_is_a_504_and_its_work_stops(engine):
    """32 sentences in chunks of 4, each chunk 0.25 s: 2 s of work, a deadline of 1 s."""
    counting = CountingEngine(engine, pause_s=0.25)
    with served(counting, SearchSettings(batch_size=4), timeout_s=1.0) as (port, _):
        start = time.monotonic()
        answer = exchange(port, request_bytes(body=translate_body(["a b c"] * 32)))
        took = time.monotonic() - start
        at_answer = counting.sentences
        time.sleep(1.0)  # four chunks' time
        after = counting.sentences
        dropped = health(port)["sentences_dropped"]
    assert answer.status == 504 and answer.json() == {"error": "no translation within 1 s"}
    assert 0.9 <= took < 4.0, took
    assert after <= at_answer + 4 and after < 32  # the chunk running at the deadline at most
    assert dropped == 32 - after


@pytest.mark.attack("serve")
def test_a_request_still_queued_at_its_deadline_is_never_translated(engine):
    """The worker is held on a first request while the second one's deadline passes."""
    gate = threading.Event()
    counting = CountingEngine(engine, gate=gate)
    with served(counting, timeout_s=1.0) as (port, service):
        with socket.create_connection((HOST, port), timeout=10) as first:
            first.sendall(request_bytes(body=translate_body(["a b c"] * 4)))
            wait_for(lambda: counting.calls == 1)  # the worker holds it
            second = exchange(port, request_bytes(body=translate_body(["j i h"] * 4)))
            queued_after = service.queue.depth
            gate.set()
            first_answer = read_answer(first)
        time.sleep(0.3)
        dropped = health(port)["sentences_dropped"]
    assert second.status == 504 and queued_after == 0
    assert first_answer.status in (200, 504)  # its deadline passed while it was held
    assert "j i h" not in counting.seen and dropped == 4


# ---------------------------------------------------------------- who may ask


FOREIGN_HOSTS = [
    "evil.example", "evil.example:{port}", "127.0.0.1.nip.io:{port}", "localhost.evil.example",
    "[2001:db8::1]:{port}", "localhost:{port}@evil.example", "localhost.", None,
]  # fmt: skip


@pytest.mark.attack("serve")
@pytest.mark.parametrize("host", FOREIGN_HOSTS)
def test_a_foreign_host_is_refused(engine, host):
    """A page that re-pointed its own name at 127.0.0.1 (DNS rebinding) reads nothing: not
    the page, not a translation."""
    counting = CountingEngine(engine)
    with served(counting) as (port, _):
        name = None if host is None else host.format(port=port)
        http = "HTTP/1.0" if host is None else "HTTP/1.1"  # HTTP/1.1 requires a Host
        page = exchange(port, request_bytes("/", host=name, method="GET", http=http))
        post = exchange(port, request_bytes(host=name, body=translate_body(["a"]), http=http))
    for answer in (page, post):
        assert answer.status == 400 and answer.headers["content-type"] == "application/json"
        (message,) = answer.json().values()
        assert "Host header" in message and "\n" not in message
        assert answer.headers["connection"] == "close"
    assert counting.calls == 0


@pytest.mark.attack("serve")
def test_the_names_it_answers_to_still_work(engine):
    allowed = allowed_names("127.0.0.1", ["Translate.Example"])
    with served(engine, allowed=allowed) as (port, _):
        hosts = [f"127.0.0.1:{port}", "localhost", f"LocalHost:{port}", f"[::1]:{port}",
                 "[0:0:0:0:0:0:0:1]", "translate.example", f"TRANSLATE.example:{port}"]  # fmt: skip
        statuses = [
            exchange(port, request_bytes("/health", host=host, method="GET")).status
            for host in hosts
        ]
    assert statuses == [200] * len(hosts)


# ---------------------------------------------------------------- what it reads


NOT_JSON_TYPES = [
    "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x", None, "application/json; charset=latin-1",
    "application/json-patch+json", "application/jsonx",
]  # fmt: skip


@pytest.mark.attack("serve")
@pytest.mark.parametrize("content_type", NOT_JSON_TYPES)
def test_a_body_not_sent_as_json_is_a_415(engine, content_type):
    """What a web page may send anywhere without a CORS preflight is not read."""
    counting = CountingEngine(engine)
    body = translate_body(["a b"])
    with served(counting) as (port, _):
        answer = exchange(port, request_bytes(body=body, content_type=content_type))
        good = exchange(port, request_bytes(body=body, content_type="Application/JSON; charset=UTF-8"))  # fmt: skip
    assert answer.status == 415
    (message,) = answer.json().values()
    assert message.startswith("send the body as") and "\n" not in message
    assert good.status == 200 and counting.calls == 1  # only the JSON one was translated


@pytest.mark.attack("serve")
def test_a_client_hanging_up_inside_its_body_is_one_info_line(engine, caplog):
    caplog.set_level(logging.INFO)
    with served(engine) as (port, _):
        whole = request_bytes(body=translate_body(["a b c"] * 20))
        with socket.create_connection((HOST, port), timeout=10) as connection:
            connection.sendall(whole[: len(whole) - 40])
            time.sleep(0.2)
        wait_for(lambda: any("hung up" in r.getMessage() for r in caplog.records), 5)
        time.sleep(0.2)  # anything logged after the line
        after = exchange(port, request_bytes(body=translate_body(["a b"])))
    lines = [r for r in caplog.records if "hung up" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO
    assert lines[0].getMessage().endswith("hung up before its request body ended")
    assert not problems(caplog)
    assert after.status == 200


# ---------------------------------------------------------------- slow clients


def send_half_header(connection: socket.socket) -> None:
    connection.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Ag")


def keep_alive_then_half(connection: socket.socket) -> None:
    connection.sendall(request_bytes("/health", method="GET", content_type=None))
    assert read_answer(connection).status == 200
    send_half_header(connection)


SLOW_HEADERS = {"silent": lambda connection: None, "half a header": send_half_header,
                "after a first answer": keep_alive_then_half}  # fmt: skip


@pytest.mark.attack("serve")
@pytest.mark.parametrize("send", SLOW_HEADERS.values(), ids=SLOW_HEADERS.keys())
def test_headers_not_finished_in_time_close_the_connection(engine, send):
    with served(engine) as (port, _):
        with socket.create_connection((HOST, port), timeout=10) as connection:
            started = time.monotonic()
            send(connection)
            closed = closed_within(connection, READ_TIMEOUT_S + 3)
            closed = None if closed is None else time.monotonic() - started
    assert closed is not None, "still open"
    assert 0.9 * READ_TIMEOUT_S <= closed <= READ_TIMEOUT_S + 1.5, closed


@pytest.mark.attack("serve")
def test_headers_sent_a_byte_at_a_time_do_not_keep_the_connection(engine):
    """Each byte arrives before any idle timeout would fire; the deadline holds anyway."""
    header = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100
    with served(engine) as (port, _):
        with socket.create_connection((HOST, port), timeout=10) as connection:
            started, closed = time.monotonic(), None
            for byte in header:
                try:
                    connection.sendall(bytes([byte]))
                except OSError:
                    closed = time.monotonic() - started
                    break
                if closed_within(connection, 0.2) is not None:
                    closed = time.monotonic() - started
                    break
    assert closed is not None and closed <= READ_TIMEOUT_S + 1.5, closed


@pytest.mark.attack("serve")
def test_a_body_not_finished_in_time_is_a_408_and_closes(engine):
    counting = CountingEngine(engine)
    with served(counting) as (port, _):
        whole = request_bytes(body=translate_body(["a b c"] * 20))
        with socket.create_connection((HOST, port), timeout=10) as connection:
            connection.sendall(whole[: len(whole) - 40])
            started = time.monotonic()
            answer = read_answer(connection)
            took = time.monotonic() - started
            closed = closed_within(connection, 2.0)
    assert answer.status == 408
    assert answer.json() == {"error": f"the body did not arrive within {READ_TIMEOUT_S:g} s"}
    assert took <= READ_TIMEOUT_S + 1.5 and closed is not None and counting.calls == 0


# ---------------------------------------------------------------- the command


@pytest.mark.attack("serve")
@pytest.mark.faults  # starts a server process: several seconds
def test_the_command_refuses_foreign_hosts_json_as_text_and_slow_headers(engine):
    arguments = [str(engine.path), "--threads", "1", "--read-timeout-s", "1",
                 "--allowed-host", "translate.example"]  # fmt: skip
    with running_server(arguments) as server:
        port = int(server.url.rsplit(":", 1)[1])
        body = translate_body(["a b"])
        foreign = exchange(port, request_bytes(body=body, host=f"evil.example:{port}"))
        added = exchange(port, request_bytes(body=body, host="translate.example"))
        as_text = exchange(port, request_bytes(body=body, content_type="text/plain"))
        with socket.create_connection((HOST, port), timeout=10) as connection:
            send_half_header(connection)
            closed = closed_within(connection, 4.0)
    assert (foreign.status, added.status, as_text.status) == (400, 200, 415)
    assert added.json()["translations"][0]["source"] == "a b"
    assert closed is not None and closed <= 2.5
