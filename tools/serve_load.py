"""The load test: single-sentence requests at several concurrencies, against loopback only.

At each concurrency C, C client threads (each with its own keep-alive connection) send
`POST /translate` requests of one sentence each, cycling through the given sentences, until
`requests` have been sent or `seconds` have passed (no request starts after that; one in
flight may take up to the client timeout), so a level always stops by itself. Reported per
level: sentences/s over the level's wall time, latency percentiles p50/p95/p99 (linear
interpolation between the nearest ranks, as `numpy.percentile` does by default) of the
successful requests, the errors (a status other than 200, or no answer), and the server's
peak resident memory after the level (its own `GET /health`: the peak since it started).
"""

from __future__ import annotations

import http.client
import json
import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from seq2seq.serve.process import get_json

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class LoadError(ValueError):
    """A load test that cannot run as asked (a URL off this machine, no sentences)."""


@dataclass(frozen=True)
class Summary:
    """One level of the load test."""

    concurrency: int
    requests: int  # sent, errors included
    errors: int
    seconds: float
    throughput: float  # successful sentences per second
    p50_ms: float
    p95_ms: float
    p99_ms: float
    peak_rss_mib: float | None = None


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), linear between the nearest ranks; nan when empty."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q}: give 0 to 100")
    ordered = sorted(values)
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarise(concurrency: int, latencies: Sequence[float], errors: int, seconds: float) -> Summary:
    """The statistics of one level: `latencies` in seconds of the successful requests."""

    def ms(q: float) -> float:
        return percentile(latencies, q) * 1000

    throughput = len(latencies) / seconds if seconds > 0 else math.nan
    return Summary(concurrency, len(latencies) + errors, errors, seconds, throughput,
                   ms(50), ms(95), ms(99))  # fmt: skip


def check_loopback(url: str) -> tuple[str, int]:
    """(host, port) of an http URL on this machine; LoadError for any other."""
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname not in LOOPBACK:
        raise LoadError(f"{url}: the load test only runs against http://127.0.0.1 (loopback)")
    return parts.hostname, parts.port or 80


class Client:
    """One thread's keep-alive connection; `post` returns the HTTP status (0: no answer)."""

    def __init__(self, host: str, port: int, timeout: float):
        self.connection = http.client.HTTPConnection(host, port, timeout=timeout)

    def post(self, body: bytes) -> int:
        try:
            self.connection.request("POST", "/translate", body,
                                    {"Content-Type": "application/json"})  # fmt: skip
            response = self.connection.getresponse()
            response.read()
            return response.status
        except (OSError, http.client.HTTPException):
            self.connection.close()  # reconnects on the next request
            return 0


class Level:
    """The shared counters of one level: which request is next, and what came back."""

    def __init__(self, bodies: list[bytes], requests: int, seconds: float):
        self.bodies, self.requests = bodies, requests
        self.deadline = time.monotonic() + seconds
        self.lock = threading.Lock()
        self.sent, self.errors = 0, 0
        self.latencies: list[float] = []

    def next_body(self) -> bytes | None:
        with self.lock:
            if self.sent >= self.requests or time.monotonic() >= self.deadline:
                return None
            self.sent += 1
            return self.bodies[self.sent % len(self.bodies)]

    def record(self, status: int, seconds: float) -> None:
        with self.lock:
            if status == 200:
                self.latencies.append(seconds)
            else:
                self.errors += 1

    def drive(self, client: Client) -> None:
        while (body := self.next_body()) is not None:
            start = time.perf_counter()
            status = client.post(body)
            self.record(status, time.perf_counter() - start)


def request_bodies(sentences: Sequence[str], options: dict[str, Any]) -> list[bytes]:
    if not sentences:
        raise LoadError("no sentences to send")
    return [json.dumps({"sentences": [s], **options}).encode("utf-8") for s in sentences]


def run_level(
    url: str, bodies: list[bytes], concurrency: int, requests: int, seconds: float,
    timeout: float = 30.0,
) -> Summary:  # fmt: skip
    """One level (module docstring), the server's peak memory read after it."""
    host, port = check_loopback(url)
    level = Level(bodies, requests, seconds)
    clients = [Client(host, port, timeout) for _ in range(concurrency)]
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(level.drive, clients))
    elapsed = time.perf_counter() - start
    summary = summarise(concurrency, level.latencies, level.errors, elapsed)
    peak = get_json(url + "/health").get("peak_rss_mib")
    return Summary(**{**summary.__dict__, "peak_rss_mib": peak})


def load_test(
    url: str,
    sentences: Sequence[str],
    concurrencies: Sequence[int] = (1, 8, 32),
    requests: int = 200,
    seconds: float = 60.0,
    options: dict[str, Any] | None = None,
    warmup: int = 4,
) -> list[Summary]:
    """Every level in turn, after `warmup` untimed requests; `options` go into each request
    (`{"beam_size": 5}`; default: the server's own settings)."""
    check_loopback(url)
    if requests < 1 or seconds <= 0 or any(c < 1 for c in concurrencies):
        raise LoadError("requests, seconds and every concurrency must be positive")
    bodies = request_bodies(sentences, options or {})
    if warmup:
        run_level(url, bodies, 1, warmup, seconds)
    return [run_level(url, bodies, c, requests, seconds) for c in concurrencies]


def markdown_table(summaries: Sequence[Summary]) -> str:
    """The levels as a Markdown table."""
    lines = ["| concurrency | requests | errors | sentences/s | p50 ms | p95 ms | p99 ms "
             "| server peak RSS MiB |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for s in summaries:
        rss = "n/a" if s.peak_rss_mib is None else f"{s.peak_rss_mib:.0f}"
        lines.append(f"| {s.concurrency} | {s.requests} | {s.errors} | {s.throughput:.1f} | "
                     f"{s.p50_ms:.0f} | {s.p95_ms:.0f} | {s.p99_ms:.0f} | {rss} |")  # fmt: skip
    return "\n".join(lines)
