"""Batching across clients: a bounded queue of requests and one worker thread that merges them.

Each request is a `Job`: a list of items (sentences), a key (the search settings) and a
deadline. The worker takes the first waiting job, then keeps taking jobs until the batch
holds `max_batch` items or `max_wait_s` has passed since the first (a job that would
overflow the batch stays first in the queue for the next one), and groups the jobs by key
in order of arrival. A group is processed in chunks of at most `chunk_size(key)` items,
`process(key, items)` once per chunk with the items of one or more jobs in order; a job is
answered through its future, with its own results, as soon as its last item is done.

Work nobody awaits is dropped: `withdraw(job)` (a client that hung up, an answer past its
deadline) removes a queued job from the queue at once; a job already taken is marked, and
the worker, which looks at every job between chunks, translates nothing more of it, nor of
a job past its deadline (its future then holds `DeadlinePassed`). So a withdrawn job costs
at most the chunk that was running when it was withdrawn. `counts` says how many items
were processed and how many dropped.

When `process` raises, the error is logged and, for a chunk of several jobs, each job's
part is run again alone, so that only the job that fails gets the error; its future holds
the exception. The queue holds at most `max_queue` jobs: `submit` raises QueueFull beyond
that, and QueueClosed once `stop` was called; `stop` lets the worker finish what is queued.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
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


class DeadlinePassed(RuntimeError):
    """A job's deadline passed before its last item was processed; the rest was dropped."""


class Withdrawn(RuntimeError):
    """A job withdrawn while the worker held it; nobody awaits this error."""


@dataclass(eq=False)
class Job:
    """One request: items processed together with every job of the same key."""

    key: Hashable
    items: list[Any]
    deadline: float = math.inf  # time.monotonic() after which its work is dropped
    future: Future = field(default_factory=Future)  # resolves to one result per item
    results: list[Any] = field(default_factory=list)  # of its first len(results) items
    withdrawn: bool = False  # set by `BatchQueue.withdraw` once the worker holds it

    @property
    def left(self) -> int:
        """Items not processed yet."""
        return len(self.items) - len(self.results)


@dataclass
class Counts:
    """Items processed and dropped since the queue was made, and chunks processed."""

    processed: int = 0
    dropped: int = 0
    chunks: int = 0


@dataclass
class Part:
    """Items `start:stop` of a job, within one chunk."""

    job: Job
    start: int
    stop: int

    @property
    def items(self) -> list[Any]:
        return self.job.items[self.start : self.stop]


class BatchQueue:
    """The bounded queue and its worker thread (module docstring)."""

    def __init__(
        self, process: Process, max_queue: int, max_batch: int, max_wait_s: float,
        chunk_size: Callable[[Hashable], int] | None = None,
    ):  # fmt: skip
        self.process, self.max_queue = process, max_queue
        self.max_batch, self.max_wait_s = max_batch, max_wait_s
        self.chunk_size = chunk_size or (lambda key: max_batch)
        self.counts = Counts()
        self._jobs: deque[Job] = deque()
        self._changed = threading.Condition()  # guards _jobs, _closed and counts
        self._closed = False
        self._worker = threading.Thread(target=self._run, name="seq2seq-serve-worker", daemon=True)

    @property
    def depth(self) -> int:
        """Jobs waiting for the worker."""
        return len(self._jobs)

    def start(self) -> None:
        self._worker.start()

    def stop(self, timeout: float | None = None) -> None:
        """Take no more jobs, let the worker finish those already queued, and wait for it."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        if self._worker.is_alive():
            self._worker.join(timeout)

    def submit(self, key: Hashable, items: list[Any], deadline: float = math.inf) -> Job:
        """Queue a job; QueueFull or QueueClosed when it cannot be taken."""
        job = Job(key, list(items), deadline)
        with self._changed:
            if self._closed:
                raise QueueClosed("the service is stopping")
            if not job.items:
                job.future.set_result([])
                return job
            if len(self._jobs) >= self.max_queue:
                raise QueueFull(f"the queue is full ({self.max_queue} requests waiting)")
            self._jobs.append(job)
            self._changed.notify_all()
        return job

    def withdraw(self, job: Job) -> int:
        """Drop what is left of a job nobody awaits; the number of items dropped (0 for a
        job already answered). A queued job leaves the queue; the worker drops the rest of
        one it holds before its next chunk."""
        with self._changed:
            if job in self._jobs:
                self._jobs.remove(job)
                job.future.cancel()
                self.counts.dropped += len(job.items)
                return len(job.items)
            if job.future.done() or job.withdrawn:
                return 0
            job.withdrawn = True
            return job.left

    # ------------------------------------------------------------ the worker

    def _run(self) -> None:
        while (jobs := self._next_batch()) is not None:
            groups: dict[Hashable, list[Job]] = {}
            for job in jobs:
                groups.setdefault(job.key, []).append(job)
            for key, group in groups.items():
                self._run_group(key, group)

    def _next_batch(self) -> list[Job] | None:
        """The jobs of the next batch (module docstring); None once stopped and empty."""
        with self._changed:
            while not self._jobs:
                if self._closed:
                    return None
                self._changed.wait()
            batch: list[Job] = []
            size, until = 0, time.monotonic() + self.max_wait_s
            while True:
                size += self._take_fitting(batch, size)
                left = until - time.monotonic()
                if size >= self.max_batch or self._jobs or self._closed or left <= 0:
                    return batch
                self._changed.wait(left)

    def _take_fitting(self, batch: list[Job], size: int) -> int:
        """Move queued jobs into `batch` while they fit (the first always does); the items
        taken. A job cancelled while queued is dropped. Called holding the lock."""
        taken = 0
        while self._jobs:
            if batch and size + taken + len(self._jobs[0].items) > self.max_batch:
                break
            job = self._jobs.popleft()
            if job.future.set_running_or_notify_cancel():
                batch.append(job)
                taken += len(job.items)
            else:
                self.counts.dropped += len(job.items)
        return taken

    def _run_group(self, key: Hashable, jobs: list[Job]) -> None:
        """Process one group chunk by chunk, looking at every job before each chunk."""
        size = max(1, self.chunk_size(key))
        while jobs := [job for job in jobs if self._still_wanted(job)]:
            self._run_parts(key, chunk_parts(jobs, size))

    def _still_wanted(self, job: Job) -> bool:
        """False for a job answered, withdrawn or past its deadline (whose rest is dropped)."""
        if job.future.done():
            return False
        late = time.monotonic() >= job.deadline
        if not (job.withdrawn or late):
            return True
        with self._changed:
            self.counts.dropped += job.left
        if late:
            job.future.set_exception(DeadlinePassed(f"{job.left} item(s) not done in time"))
        else:
            job.future.set_exception(Withdrawn("withdrawn"))
        return False

    def _run_parts(self, key: Hashable, parts: list[Part]) -> None:
        """Process one chunk and hand each job its results; on an error, each part alone."""
        items = [item for part in parts for item in part.items]
        try:
            results = self._processed(key, items)
        except Exception as error:
            log.exception("translating a batch of %d sentence(s) failed", len(items))
            if len(parts) == 1:
                parts[0].job.future.set_exception(error)
                return
            for part in parts:
                self._run_parts(key, [part])
            return
        start = 0
        for part in parts:
            job, count = part.job, part.stop - part.start
            job.results.extend(results[start : start + count])
            start += count
            if not job.left:
                job.future.set_result(job.results)

    def _processed(self, key: Hashable, items: list[Any]) -> list[Any]:
        results = list(self.process(key, items))
        if len(results) != len(items):
            raise RuntimeError(f"{len(results)} result(s) for {len(items)} item(s)")
        with self._changed:
            self.counts.processed += len(items)
            self.counts.chunks += 1
        return results


def chunk_parts(jobs: list[Job], size: int) -> list[Part]:
    """The next chunk: the unprocessed items of `jobs` in order, at most `size` of them."""
    parts: list[Part] = []
    room = size
    for job in jobs:
        if room == 0:
            break
        start = len(job.results)
        count = min(job.left, room)
        parts.append(Part(job, start, start + count))
        room -= count
    return parts
