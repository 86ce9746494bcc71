"""`make bench-data` (tools.bench.process_memory, tools.bench.data_scale): the memory of a
process tree, a measured run stopped at a log line, the stage times from log timestamps, the
summary rows. Fast: no corpus is prepared and nothing is trained."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from seq2seq.cli.data import format_summary
from tools.bench import data_scale
from tools.bench.process_memory import Measured, descendants, run_measured, tree_memory

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/smaps_rollup").exists(), reason="needs Linux /proc/<pid>/smaps_rollup"
)


def test_tree_memory_counts_a_child_holding_memory():
    before_rss, before_pss = tree_memory(os.getpid())
    held = 200 * 2**20
    child = subprocess.Popen(
        [sys.executable, "-c", f"x = b'1' * {held}; print('held', flush=True); input()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout.readline().strip() == "held"
        assert child.pid in descendants(os.getpid())
        rss, pss = tree_memory(os.getpid())
    finally:
        child.communicate("\n")
    assert rss - before_rss > 0.9 * held
    assert pss - before_pss > 0.9 * held
    assert pss <= rss


def test_run_measured_stops_at_the_line_and_times_it(tmp_path):
    printer = (
        "import time\n"
        "for step in range(1, 10**6):\n"
        "    print(f'update {step}/1000', flush=True)\n"
        "    time.sleep(0.05)\n"
    )
    started = time.perf_counter()
    measured = run_measured(
        [sys.executable, "-c", printer], tmp_path / "log.txt", stop_when=re.compile(r"update 5/")
    )
    assert time.perf_counter() - started < 60
    assert measured.returncode == -15  # SIGTERM, sent after the fifth line
    assert measured.lines[0][1] == "update 1/1000"
    assert any(line == "update 5/1000" for _, line in measured.lines)
    first = data_scale.first_update_seconds(measured)
    assert first is not None and 0 < first <= measured.seconds
    assert measured.peak_rss > 0 and measured.peak_pss > 0
    assert (tmp_path / "log.txt").read_text().startswith("update 1/1000\n")


def test_stage_seconds_are_the_gaps_between_the_ending_lines():
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
    stages = data_scale.stage_seconds(Measured(lines=arrivals))
    assert stages == pytest.approx(
        {
            "read, clean, split": 12.5,
            "sentencepiece (zh)": 2.5,
            "sentencepiece (en)": 1.0,
            "encode train": 24.0,
            "encode valid + test": 1.0,
        }
    )


def test_summary_values_are_read_from_the_cli_table():
    table = format_summary({"lines_read": 5_000_000, "train_size": 4_997_123, "name": "x"})
    measured = Measured(lines=[(0.0, line) for line in table.splitlines()])
    assert data_scale.summary_value(measured, "lines read") == 5_000_000
    assert data_scale.summary_value(measured, "train size") == 4_997_123
    assert data_scale.summary_value(measured, "valid size") is None


def test_a_synthetic_size_reads_its_own_plain_file_into_its_own_folders(tmp_path):
    overrides = data_scale.corpus_overrides(250_000, tmp_path / "work", tmp_path / "repo")
    assert overrides == [
        "data=tatoeba_zh_en",
        "data.name=tatoeba_zh_en_250000",
        f"data.root={tmp_path / 'work' / 'data'}",
        f"data.source.url=file://{tmp_path / 'work' / 'synth_250000.txt'}",
        "data.source.member=",  # a plain file, not a zip member
        "data.source.sha256=null",  # generated here: no pinned hash
    ]
