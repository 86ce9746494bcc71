"""Batching across clients: a bounded queue of requests and one worker thread that merges them.

Each request is a `Job`: a list of items (sentences) and a key (the search settings); a job
is never split. The worker takes the first waiting job, then keeps taking jobs until the
batch holds `max_batch` items or `max_wait_s` has passed since the first (a job that would
overflow the batch waits for the next one), groups the jobs by key in order of arrival and
calls `process(key, items)` once per group with the items of all its jobs, in order. Then
it answers every job through its future, with its own slice of the results.

When `process` raises, the error is logged and, for a group of several jobs, each job is
run again alone, so that only the job that fails gets the error; its future holds the
exception. A job whose future was cancelled before the worker took it (a client that gave
up) is dropped unrun. The queue holds at most `max_queue` jobs: `submit` raises QueueFull
beyond that, and QueueClosed once `stop` was called.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)
Process = Callable[[Hashable, list[Any]], Sequence[Any]]  # (key, items) → one result per item


class QueueFull(RuntimeError):
    """The queue already holds its `max_queue` jobs."""


class QueueClosed(RuntimeError):
    """The queue is stopping and takes no more jobs."""


@dataclass(eq=False)
class Job:
    """One request: items translated together with every job of the same key."""

    key: Hashable
    items: list[Any]
    future: Future = field(default_factory=Future)  # resolves to one result per item


_STOP = object()  # put on the queue by `stop`: the worker ends when it gets there


class BatchQueue:
    """The bounded queue and its worker thread (module docstring)."""

    def __init__(self, process: Process, max_queue: int, max_batch: int, max_wait_s: float):
        self.process, self.max_batch, self.max_wait_s = process, max_batch, max_wait_s
        self._queue: queue.Queue = queue.Queue(maxsize=max_queue)
        self._held: Job | None = None  # taken, but left for the next batch
        self._closed = threading.Event()
        self._worker = threading.Thread(target=self._run, name="seq2seq-serve-worker", daemon=True)

    @property
    def depth(self) -> int:
        """Jobs waiting for the worker."""
        return self._queue.qsize()

    def start(self) -> None:
        self._worker.start()

    def stop(self, timeout: float | None = None) -> None:
        """Take no more jobs, let the worker finish those already queued, and wait for it."""
        if not self._closed.is_set():
            self._closed.set()
            self._queue.put(_STOP)
        if self._worker.is_alive():
            self._worker.join(timeout)

    def submit(self, key: Hashable, items: list[Any]) -> Future:
        """Queue a job; its future. QueueFull or QueueClosed when it cannot be taken."""
        if self._closed.is_set():
            raise QueueClosed("the service is stopping")
        job = Job(key, list(items))
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            raise QueueFull(f"the queue is full ({self._queue.maxsize} requests waiting)") from None
        return job.future

    # ------------------------------------------------------------ the worker

    def _run(self) -> None:
        while True:
            first = self._held or self._queue.get()
            self._held = None
            if first is _STOP:
                return
            jobs, stop = self._collect(first)
            self._answer([job for job in jobs if job.future.set_running_or_notify_cancel()])
            if stop:
                return

    def _collect(self, first: Job) -> tuple[list[Job], bool]:
        """The jobs of one batch, starting with `first`, and whether the stop mark came."""
        jobs, size = [first], len(first.items)
        deadline = time.monotonic() + self.max_wait_s
        while size < self.max_batch:
            try:
                job = self._queue.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                break
            if job is _STOP:
                return jobs, True
            if size + len(job.items) > self.max_batch:
                self._held = job
                break
            jobs.append(job)
            size += len(job.items)
        return jobs, False

    def _answer(self, jobs: list[Job]) -> None:
        groups: dict[Hashable, list[Job]] = {}
        for job in jobs:
            groups.setdefault(job.key, []).append(job)
        for key, group in groups.items():
            self._run_group(key, group)

    def _run_group(self, key: Hashable, jobs: list[Job]) -> None:
        """Process one group and answer its jobs; on an error, each job alone (docstring)."""
        items = [item for job in jobs for item in job.items]
        try:
            results = self._processed(key, items)
        except Exception as error:
            log.exception("translating a batch of %d sentence(s) failed", len(items))
            if len(jobs) == 1:
                jobs[0].future.set_exception(error)
                return
            for job in jobs:
                self._run_group(key, [job])
            return
        start = 0
        for job in jobs:
            job.future.set_result(results[start : start + len(job.items)])
            start += len(job.items)

    def _processed(self, key: Hashable, items: list[Any]) -> list[Any]:
        results = list(self.process(key, items))
        if len(results) != len(items):
            raise RuntimeError(f"{len(results)} result(s) for {len(items)} item(s)")
        return results
