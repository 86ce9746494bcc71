"""The fault-injection suite: every test here is one attack on the trainer.

Mark each test (or parameter case) with its kind of attack, `@pytest.mark.attack("checkpoint")`;
the categories are the sections of RELIABILITY.md. Quick attacks run in `make test`; the long
ones (repeated kill/resume trials, fuzzing with thousands of inputs) are marked `faults` too
and run only in `make faults`.

When `SEQ2SEQ_FAULTS_REPORT` names a file (as `make faults` does), each attack's outcome and
every figure a test adds through the `fault_figures` fixture are appended to it as JSON
lines, and `scripts/faults_report.py` turns them into the tables of RELIABILITY.md.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPORT_ENV = "SEQ2SEQ_FAULTS_REPORT"


def _append(row: dict) -> None:
    path = os.environ.get(REPORT_ENV)
    if not path:
        return
    with Path(path).open("a", encoding="utf-8") as stream:
        stream.write(json.dumps(row, ensure_ascii=False) + "\n")


class FaultFigures:
    """Counters a test adds to the report: `fault_figures.add("kill_resume_trials", 1)`."""

    def __init__(self, test_id: str):
        self.test_id = test_id

    def add(self, name: str, value: float) -> None:
        _append({"figure": name, "value": value, "test": self.test_id})


@pytest.fixture
def fault_figures(request) -> FaultFigures:
    return FaultFigures(request.node.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    marker = item.get_closest_marker("attack")
    # One row per attack: its call, or a set-up that failed before the call could run.
    counted = report.when == "call" or (report.when == "setup" and report.failed)
    if marker is None or not counted:
        return
    _append(
        {
            "attack": item.nodeid,
            "category": marker.args[0],
            "behaved": report.passed,
            "skipped": report.skipped,
        }
    )
