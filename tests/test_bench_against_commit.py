"""`scripts/bench_against_commit.py`: its table of medians and per-round speed-ups, and its
refusals, without running a measurement."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_against_commit.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("bench_against_commit", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(case: str, old: list[float], new: list[float]) -> list[dict]:
    """Rounds in turn, as the script records them; 100 GFLOP per update."""
    found = []
    for before, after in zip(old, new, strict=True):
        found.append(
            {"case": case, "tree": "abc123", "step_s": before, "gflops_per_s": 100 / before}
        )
        found.append({"case": case, "tree": "now", "step_s": after, "gflops_per_s": 100 / after})
    return found


def test_the_table_has_each_trees_median_and_the_median_of_the_per_round_ratios(script):
    measured = rows("gru", [1.0, 0.9, 2.0], [0.5, 0.9, 1.0])  # ratios 2.0, 1.0, 2.0
    lines = script.table(measured, best_ceiling=200.0, baseline="abc123")
    assert lines[2] == "| gru | abc123 | 1.000 | 50.0% | — |"  # median 1.0 s; 100 GFLOP/s
    assert lines[3] == "| gru | now | 0.900 | 55.6% | 2.00× |"  # not 1.0 / 0.9 = 1.11×


def test_a_case_without_a_preset_is_refused(script, capsys):
    with pytest.raises(SystemExit) as stopped:
        script.main(["--baseline", "HEAD", "--case", "only-a-label"])
    assert stopped.value.code == 2
    assert "a label and a preset" in capsys.readouterr().err


def test_a_case_measured_now_only_has_one_row_and_no_speed_up(script):
    measured = rows("base", [1.0, 1.0], [0.5, 0.5])
    measured += [{"case": "subwords", "tree": "now", "step_s": s, "gflops_per_s": 100 / s}
                 for s in (0.6, 0.8)]  # fmt: skip
    lines = script.table(measured, best_ceiling=200.0, baseline="abc123")
    assert lines[2:] == [
        "| base | abc123 | 1.000 | 50.0% | — |",
        "| base | now | 0.500 | 100.0% | 2.00× |",
        "| subwords | now | 0.700 | 72.9% | — |",  # medians of 0.6, 0.8 s and 166.7, 125 GFLOP/s
    ]
