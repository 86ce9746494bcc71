"""scripts/bench_data.py (`make bench-data`): the memory of a process tree, a measured run
stopped at a log line, the stage times from log timestamps, the summary rows. Fast: no
corpus is prepared and nothing is trained."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from seq2seq.cli.data import format_summary
from tests.helpers import script_module

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/smaps_rollup").exists(), reason="needs Linux /proc/<pid>/smaps_rollup"
)


@pytest.fixture(scope="module")
def bench_data():
    """scripts/bench_data.py as a module."""
    return script_module("bench_data")


def test_tree_memory_counts_a_child_holding_memory(bench_data):
    before_rss, before_pss = bench_data.tree_memory(os.getpid())
    held = 200 * 2**20
    child = subprocess.Popen(
        [sys.executable, "-c", f"x = b'1' * {held}; print('held', flush=True); input()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout.readline().strip() == "held"
        assert child.pid in bench_data.descendants(os.getpid())
        rss, pss = bench_data.tree_memory(os.getpid())
    finally:
        child.communicate("\n")
    assert rss - before_rss > 0.9 * held
    assert pss - before_pss > 0.9 * held
    assert pss <= rss


def test_run_measured_stops_at_the_line_and_times_it(bench_data, tmp_path):
    printer = (
        "import time\n"
        "for step in range(1, 10**6):\n"
        "    print(f'update {step}/1000', flush=True)\n"
        "    time.sleep(0.05)\n"
    )
    started = time.perf_counter()
    measured = bench_data.run_measured(
        [sys.executable, "-c", printer], tmp_path / "log.txt", stop_when=re.compile(r"update 5/")
    )
    assert time.perf_counter() - started < 60
    assert measured.returncode == -15  # SIGTERM, sent after the fifth line
    assert measured.lines[0][1] == "update 1/1000"
    assert any(line == "update 5/1000" for _, line in measured.lines)
    first = bench_data.first_update_seconds(measured)
    assert first is not None and 0 < first <= measured.seconds
    assert measured.peak_rss > 0 and measured.peak_pss > 0
    assert (tmp_path / "log.txt").read_text().startswith("update 1/1000\n")


def test_stage_seconds_are_the_gaps_between_the_ending_lines(bench_data):
    arrivals = [  # (seconds after the launch, line)
        (2.0, "downloading file:///x/cmn-eng.zip"),
        (12.5, "split 9 clean pairs of cmn-eng.zip: train 5, valid 2, test 2, duplicates 0"),
        (15.0, "trained the subword model p/spm_zh_0123.model"),
        (16.0, "reusing the subword model p/spm_en_4567.model"),
        (40.0, "encoded the train split into q"),
        (40.5, "encoded the valid split into q"),
        (41.0, "encoded the test split into q"),
        (41.2, "-----"),
    ]
    stages = bench_data.stage_seconds(bench_data.Measured(lines=arrivals))
    assert stages == pytest.approx(
        {
            "read, clean, split": 12.5,
            "sentencepiece (zh)": 2.5,
            "sentencepiece (en)": 1.0,
            "encode train": 24.0,
            "encode valid + test": 1.0,
        }
    )


def test_summary_values_are_read_from_the_cli_table(bench_data):
    table = format_summary({"lines_read": 5_000_000, "train_size": 4_997_123, "name": "x"})
    measured = bench_data.Measured(lines=[(0.0, line) for line in table.splitlines()])
    assert bench_data._summary_value(measured, "lines read") == 5_000_000
    assert bench_data._summary_value(measured, "train size") == 4_997_123
    assert bench_data._summary_value(measured, "valid size") is None
