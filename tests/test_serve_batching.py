"""The service's queue and limits (`seq2seq.serve.request_queue`, `seq2seq.serve.limits`), with
a stand-in for the model: batches never overflow, jobs are answered with their own slice,
chunk by chunk, a cancelled or withdrawn job is dropped (queued: at once; running: before
its next chunk), so is the rest of a job past its deadline, a failure reaches only the job
that causes it, and the limits are checked when made. Standard library only: runs without
the `serve` extra."""

from __future__ import annotations

import threading
import time

import pytest

from seq2seq.serve.limits import Limits, LimitsError, request_problem
from seq2seq.serve.request_queue import BatchQueue, DeadlinePassed, QueueClosed, QueueFull


class Recorder:
    """A `process` that upper-cases items, records each batch and holds the first one
    until `release` is set; an item "boom" makes it raise."""

    def __init__(self):
        self.batches: list[tuple[object, list[str]]] = []
        self.started, self.release = threading.Event(), threading.Event()

    def __call__(self, key, items):
        self.batches.append((key, list(items)))
        self.started.set()
        assert self.release.wait(10)
        if "boom" in items:
            raise RuntimeError("boom")
        return [item.upper() for item in items]


def held_queue(max_queue: int = 8, max_batch: int = 4) -> tuple[BatchQueue, Recorder]:
    """A started queue whose worker is holding a first job ("first")."""
    recorder = Recorder()
    queue = BatchQueue(recorder, max_queue, max_batch, max_wait_s=0.05)
    queue.start()
    queue.submit("k", ["first"])
    assert recorder.started.wait(10)
    return queue, recorder


def test_batches_fill_up_to_max_batch_and_a_job_that_would_overflow_waits():
    queue, recorder = held_queue(max_batch=4)
    futures = [queue.submit("k", items).future for items in (["a", "b"], ["c"], ["d", "e"], ["f"])]
    recorder.release.set()
    results = [future.result(10) for future in futures]
    queue.stop(10)
    assert results == [["A", "B"], ["C"], ["D", "E"], ["F"]]
    assert [items for _, items in recorder.batches] == [["first"], ["a", "b", "c"], ["d", "e", "f"]]


def test_jobs_are_grouped_by_key_in_order_of_arrival():
    queue, recorder = held_queue()
    futures = [queue.submit(key, [item]).future for key, item in [(2, "a"), (1, "b"), (2, "c")]]
    recorder.release.set()
    assert [future.result(10) for future in futures] == [["A"], ["B"], ["C"]]
    queue.stop(10)
    assert recorder.batches[1:] == [(2, ["a", "c"]), (1, ["b"])]


def test_a_failure_reaches_only_its_own_job_and_the_worker_goes_on():
    queue, recorder = held_queue()
    futures = [queue.submit("k", [item]).future for item in ("a", "boom", "c")]
    recorder.release.set()
    assert futures[0].result(10) == ["A"] and futures[2].result(10) == ["C"]
    with pytest.raises(RuntimeError, match="boom"):
        futures[1].result(10)
    assert queue.submit("k", ["d"]).future.result(10) == ["D"]
    queue.stop(10)


def test_a_cancelled_job_is_dropped_unrun():
    queue, recorder = held_queue()
    gone, kept = queue.submit("k", ["gone"]).future, queue.submit("k", ["kept"]).future
    assert gone.cancel()
    recorder.release.set()
    assert kept.result(10) == ["KEPT"]
    queue.stop(10)
    assert all("gone" not in items for _, items in recorder.batches)


def test_a_full_queue_and_a_stopped_one_refuse_jobs():
    queue, recorder = held_queue(max_queue=2)
    waiting = [queue.submit("k", ["a"]).future, queue.submit("k", ["b"]).future]
    with pytest.raises(QueueFull, match=r"the queue is full \(2 requests waiting\)"):
        queue.submit("k", ["c"])
    recorder.release.set()
    queue.stop(10)  # the jobs already queued are answered first
    assert [future.result(0) for future in waiting] == [["A"], ["B"]]
    with pytest.raises(QueueClosed):
        queue.submit("k", ["d"])


def test_chunks_hold_at_most_chunk_size_items_and_each_job_gets_its_own_results():
    recorder = Recorder()
    recorder.release.set()
    queue = BatchQueue(recorder, 8, 8, max_wait_s=0.05, chunk_size=lambda key: 3)
    jobs = [queue.submit("k", items) for items in (["a", "b"], ["c", "d", "e"], ["f"])]
    queue.start()
    assert [job.future.result(10) for job in jobs] == [["A", "B"], ["C", "D", "E"], ["F"]]
    queue.stop(10)
    assert [items for _, items in recorder.batches] == [["a", "b", "c"], ["d", "e", "f"]]
    assert (queue.counts.processed, queue.counts.dropped, queue.counts.chunks) == (6, 0, 2)


def test_a_withdrawn_queued_job_leaves_the_queue_at_once_and_is_never_run():
    queue, recorder = held_queue(max_queue=2)
    gone, kept = queue.submit("k", ["gone", "too"]), queue.submit("k", ["kept"])
    assert queue.withdraw(gone) == 2 and queue.depth == 1
    queue.submit("k", ["room"])  # its place is free again
    recorder.release.set()
    assert kept.future.result(10) == ["KEPT"] and gone.future.cancelled()
    queue.stop(10)
    assert all("gone" not in items for _, items in recorder.batches)
    assert queue.counts.dropped == 2 and queue.withdraw(kept) == 0


def test_a_job_withdrawn_while_running_stops_before_its_next_chunk():
    recorder = Recorder()
    queue = BatchQueue(recorder, 8, 8, max_wait_s=0.0, chunk_size=lambda key: 2)
    queue.start()
    job = queue.submit("k", ["a", "b", "c", "d", "e", "f"])
    assert recorder.started.wait(10)  # the first chunk is running
    assert queue.withdraw(job) == 6  # none of its items is done yet
    recorder.release.set()
    later = queue.submit("k", ["g"])
    assert later.future.result(10) == ["G"]
    queue.stop(10)
    assert [items for _, items in recorder.batches] == [["a", "b"], ["g"]]
    assert queue.counts.dropped == 4  # the running chunk was finished


def test_the_rest_of_a_job_past_its_deadline_is_dropped():
    recorder = Recorder()
    queue = BatchQueue(recorder, 8, 8, max_wait_s=0.0, chunk_size=lambda key: 2)
    queue.start()
    job = queue.submit("k", ["a", "b", "c", "d"], deadline=time.monotonic() + 0.2)
    assert recorder.started.wait(10)
    time.sleep(0.3)
    recorder.release.set()
    with pytest.raises(DeadlinePassed, match=r"2 item\(s\) not done in time"):
        job.future.result(10)
    queued_late = queue.submit("k", ["x"], deadline=time.monotonic() - 1)
    with pytest.raises(DeadlinePassed):
        queued_late.future.result(10)
    queue.stop(10)
    assert [items for _, items in recorder.batches] == [["a", "b"]]
    assert queue.counts.dropped == 3


def test_a_process_giving_the_wrong_number_of_results_is_an_error():
    queue = BatchQueue(lambda key, items: items[:-1], 4, 4, 0.0)
    queue.start()
    with pytest.raises(RuntimeError, match=r"1 result\(s\) for 2 item\(s\)"):
        queue.submit("k", ["a", "b"]).future.result(10)
    queue.stop(10)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("max_chars", 0, "max_chars must be an integer from 1 to 100,000, got 0"),
     ("max_queue", 2.5, "max_queue must be an integer from 1 to 100,000, got 2.5"),
     ("max_batch", True, "max_batch must be an integer from 1 to 65,536, got True"),
     ("max_wait_ms", -1, "max_wait_ms must be a number from 0 to 1000, got -1"),
     ("timeout_s", float("nan"), "timeout_s must be a number from 0.001 to 3600, got nan")],
)  # fmt: skip
def test_limits_out_of_range_are_refused_when_made(field, value, message):
    with pytest.raises(LimitsError) as raised:
        Limits(**{field: value})
    assert str(raised.value) == message and raised.value.name == field


def test_request_problem_names_the_first_limit_passed():
    limits = Limits(max_chars=3, max_sentences=2, max_beam=4)
    assert request_problem(["abc", "a"], 4, limits) is None
    assert request_problem([], 1, limits) == "sentences: give at least one sentence"
    assert request_problem(["abc", " "], 1, limits).startswith("sentences[1]: an empty sentence")
    assert request_problem(["", "abcd"], 1, limits).startswith("sentences[0]: an empty sentence")
    assert request_problem(["a"] * 3, 1, limits).startswith("sentences: 3 sentences; at most 2")
    assert request_problem(["a", "我爱中国"], 1, limits).startswith("sentences[1]: 4 characters")
    assert request_problem(["a"], 5, limits) == "beam_size: 5; at most 4"
    assert Limits(max_sentences=2, max_chars=3).max_body_bytes >= 2 * len('"\\ud83d\\ude00"' * 3)
