"""`make bench-inference` (scripts/bench_inference.py): every engine on a toy Transformer.

A two-update toy Transformer is measured at one thread on a few test sentences: the
project's search at HEAD (a git worktree) and now, int8, and CTranslate2 when installed.
The entry must hold one row per engine and search with its rate, its ratio to the first
engine and its BLEU, and the machine's matmul ceiling.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TOY_TRANSFORMER, compose_config

from seq2seq.runs.assemble import train_and_test
from tools.bench.engines import Row, engines_for, table

ROOT = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\| toy \| (?P<engine>[^|]+) \| 1 \| (?P<search>greedy|beam 5) \| [\d.]+ "
                 r"\| \d+ \| (?P<ratio>[\d.]+) \| (?P<bleu>[\d.]+) \|$")  # fmt: skip


@pytest.mark.slow  # five worker processes and an export: about 30 s on 2 cores
@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the git checkout (--baseline)")
def test_bench_inference_measures_every_engine(tmp_path):
    data = tmp_path / "data"
    train_and_test(compose_config(TOY_TRANSFORMER + [f"data.root={data}"]), tmp_path / "run")
    out = tmp_path / "bench.md"
    done = subprocess.run(
        [sys.executable, "scripts/bench_inference.py", "--model",
         f"toy={tmp_path / 'run' / 'checkpoints' / 'best.pt'}", "--baseline", "HEAD",
         "--threads", "1", "--sentences", "6", "--reps", "1", "--data-root", str(data),
         "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    text = out.read_text(encoding="utf-8")
    assert "make bench-inference" in text and re.search(r"ceiling, this run: [\d.]+ GFLOP/s", text)
    rows = [match.groupdict() for line in text.splitlines() if (match := ROW.match(line))]
    engines = ["PyTorch HEAD", "PyTorch", "PyTorch int8"]
    if importlib.util.find_spec("ctranslate2") is not None:
        engines += ["CTranslate2 float32", "CTranslate2 int8"]
    assert [(row["engine"].strip(), row["search"]) for row in rows] == [
        (engine, search) for engine in engines for search in ("greedy", "beam 5")
    ]
    assert [row["ratio"] for row in rows[:2]] == ["1.00", "1.00"]  # the reference rows
    worktrees = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"],
                               capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "bench-inference-" not in worktrees  # the baseline's worktree is removed


def test_engines_put_the_reference_first_and_ctranslate2_only_with_an_export(tmp_path):
    checkpoint, root, old = tmp_path / "best.pt", tmp_path / "root", tmp_path / "old"
    labels = [e.label for e in engines_for(checkpoint, root, ("abc1234", old), tmp_path / "ct2")]
    assert labels == ["PyTorch abc1234", "PyTorch", "PyTorch int8",
                      "CTranslate2 float32", "CTranslate2 int8"]  # fmt: skip
    plain = engines_for(checkpoint, root, None, None)
    assert [(e.label, e.tree, e.quantization) for e in plain] == [
        ("PyTorch", root, "float32"), ("PyTorch int8", root, "int8")]  # fmt: skip


def test_table_ratio_is_over_the_first_engine_of_the_same_threads_and_search():
    rows = [Row("m", "before", 1, 1, 10.0, 100.0, 20.0), Row("m", "before", 1, 5, 5.0, 40.0, 21.0),
            Row("m", "now", 1, 1, 20.0, 250.0, 20.0), Row("m", "now", 1, 5, 6.0, 60.0, 21.0),
            Row("m", "before", 2, 1, 15.0, 200.0, 20.0), Row("m", "now", 2, 1, 30.0, 300.0, 20.0)]  # fmt: skip
    ratios = [line.split("|")[7].strip() for line in table(rows)[2:]]
    assert ratios == ["1.00", "1.00", "2.50", "1.50", "1.00", "1.50"]


def test_a_failed_engine_gets_a_row_without_figures():
    nan = float("nan")
    lines = table(
        [Row("m", "before", 1, 1, 10.0, 100.0, 20.0), Row("m", "int8", 1, 1, nan, nan, nan)]
    )
    assert lines[-1] == "| m | int8 | 1 | greedy | failed | — | — | — |"
