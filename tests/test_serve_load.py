"""The load test's statistics and its guards (`tools.serve_load`); the load test itself
runs against a real server in `scripts/serve_load.py`."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from tools.serve_load import (
    LoadError,
    Summary,
    check_loopback,
    load_test,
    markdown_table,
    percentile,
    summarise,
)


def test_percentile_interpolates_between_ranks_as_numpy_does():
    values = [random.Random(3).uniform(0, 2) for _ in range(101)] + [0.5, 7.0]
    for q in (0, 1, 50, 95, 99, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([4.0, 1.0, 3.0, 2.0], 99) == pytest.approx(3.97)
    assert percentile([0.2], 95) == 0.2
    assert math.isnan(percentile([], 50))
    with pytest.raises(ValueError, match="give 0 to 100"):
        percentile([1.0], 101)


def test_summarise_counts_errors_and_throughput_of_successes():
    summary = summarise(8, [0.1, 0.2, 0.3, 0.4], errors=1, seconds=2.0)
    assert (summary.concurrency, summary.requests, summary.errors) == (8, 5, 1)
    assert summary.throughput == 2.0  # 4 answered sentences in 2 s
    assert summary.p50_ms == pytest.approx(250.0) and summary.p99_ms == pytest.approx(397.0)


def test_markdown_table():
    rows = [Summary(1, 10, 0, 1.0, 10.0, 90.4, 120.0, 130.6, 512.3),
            Summary(32, 10, 2, 1.0, 8.0, 1.0, 2.0, 3.0, None)]  # fmt: skip
    table = markdown_table(rows).splitlines()
    assert table[0].startswith("| concurrency | requests | errors | sentences/s | p50 ms")
    assert table[2] == "| 1 | 10 | 0 | 10.0 | 90 | 120 | 131 | 512 |"
    assert table[3].endswith("| n/a |")


@pytest.mark.parametrize(
    "url", ["http://10.0.0.2:8000", "https://127.0.0.1:8000", "http://example.org"]
)
def test_only_loopback_is_load_tested(url):
    with pytest.raises(LoadError, match="only runs against http://127.0.0.1"):
        load_test(url, ["a"])


def test_loopback_urls_and_bounds():
    assert check_loopback("http://127.0.0.1:8123") == ("127.0.0.1", 8123)
    assert check_loopback("http://localhost") == ("localhost", 80)
    with pytest.raises(LoadError, match="must be positive"):
        load_test("http://127.0.0.1:1", ["a"], requests=0)
    with pytest.raises(LoadError, match="no sentences"):
        load_test("http://127.0.0.1:1", [])
