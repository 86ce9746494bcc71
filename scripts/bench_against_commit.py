"""Seconds per update of presets at an earlier commit and now, measured in turn in one run.

    python scripts/bench_against_commit.py --baseline 00efd01 --rounds 5 \\
        --case gru gru_additive --case dropout default_cpu encoder.dropout=0.1 \\
        --case-now subwords default_cpu trainer.subword_nbest=64

Each case (a label, a preset and its overrides) is measured on both trees: the commit, checked
out as a git worktree in a temporary folder, and this checkout. Every measurement is a fresh
process (`tools.bench.training_speed`: 5 untimed updates, then the median of 5 reps of 8
updates, 2 threads by default) reading this checkout's prepared data; the cases and trees take
turns within every round, so a slow minute of a shared machine hits them alike. The float32
matmul ceiling is measured before and after the rounds. Prints one JSON line per measurement,
then a Markdown table: per case and tree the median step seconds over the rounds, MFU against
the best ceiling, and the speed-up of now over the commit (the median of the per-round ratios).
A `--case-now` is measured on this checkout only, in the same rounds (for an option the commit
does not have: its cost is read against a `--case` of the same preset without it).
"""

from __future__ import annotations

import _workshop  # noqa: F401  (puts the repository root, and tools/, on sys.path)

# isort: split

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MEASURE = """
import json, sys, tempfile
from pathlib import Path
try:
    from seq2seq.runs.compose import preset_config
    from tools.bench.training_speed import StepCounts, measure_training
except ImportError:  # a tree from before the workshop left the package (issue 47)
    from seq2seq.bench.presets import preset_config
    from seq2seq.bench.training_speed import StepCounts, measure_training
from seq2seq.runs.assemble import assemble_trainer
threads, preset, *overrides = sys.argv[1:]
cfg = preset_config(preset, int(threads), "cpu", None, False, overrides)
with tempfile.TemporaryDirectory() as run_dir:
    trainer = assemble_trainer(cfg, Path(run_dir), observe=False)
    found = measure_training(trainer, StepCounts(warmup=5, reps=5, steps=8))
print(json.dumps({"step_s": found["step_seconds"], "gflops_per_s": found["gflops_per_s"]}))
"""

CEILING = """
import json, sys, torch
try:
    from seq2seq.lab.matmul_ceiling import ceiling_section
except ImportError:  # a tree from before issue 47
    from seq2seq.bench.ceiling import ceiling_section
torch.set_num_threads(int(sys.argv[1]))
print(json.dumps(ceiling_section(20, torch.device("cpu"))[1]))
"""


def worktree(rev: str, folder: Path) -> Path:
    """The commit checked out at `folder`, its package able to find its configs."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--force",
                    str(folder), rev], check=True, capture_output=True)  # fmt: skip
    (folder / "seq2seq" / "configs").symlink_to(folder / "configs")
    return folder


def in_tree(tree: Path, threads: int, code: str, *arguments: str) -> dict | float:
    """Run `code` in a fresh process that imports `seq2seq` from `tree`; its last JSON line."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": str(threads)}
    command = [sys.executable, "-c", code, *arguments]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tree)
    if done.returncode:
        raise SystemExit(f"{tree}: {' '.join(arguments)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(rows: list[dict], best_ceiling: float, baseline: str) -> list[str]:
    """Per case: each tree's median step seconds and MFU, and now's median speed-up."""
    lines = ["| case | tree | step s (median) | MFU | speed-up over the commit |",
             "|---|---|---|---|---|"]  # fmt: skip
    for case in dict.fromkeys(row["case"] for row in rows):
        mine = {tree: [r for r in rows if (r["case"], r["tree"]) == (case, tree)]
                for tree in (baseline, "now")}  # fmt: skip
        pairs = zip(*mine.values(), strict=True) if mine[baseline] else []  # none: a --case-now
        ratios = [old["step_s"] / new["step_s"] for old, new in pairs]
        for tree, measured in mine.items():
            if not measured:
                continue
            step = statistics.median(r["step_s"] for r in measured)
            mfu = statistics.median(r["gflops_per_s"] for r in measured) / best_ceiling
            speed_up = f"{statistics.median(ratios):.2f}×" if tree == "now" and ratios else "—"
            lines.append(f"| {case} | {tree} | {step:.3f} | {100 * mfu:.1f}% | {speed_up} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", required=True, help="the earlier commit")
    parser.add_argument("--case", nargs="+", action="append", required=True,
                        metavar=("LABEL PRESET", "OVERRIDE"))  # fmt: skip
    parser.add_argument("--case-now", nargs="+", action="append", default=[],
                        metavar=("LABEL PRESET", "OVERRIDE"),
                        help="a case measured on this checkout only")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    cases = [(case, True) for case in args.case] + [(case, False) for case in args.case_now]
    if any(len(case) < 2 for case, _ in cases) or args.rounds < 1 or args.threads < 1:
        parser.error("each --case needs a label and a preset; --rounds and --threads >= 1")
    data = f"data.root={ROOT / 'data'}"
    with tempfile.TemporaryDirectory(prefix="bench-commit-") as folder:
        base = worktree(args.baseline, Path(folder) / "tree")
        try:
            trees = {args.baseline: base, "now": ROOT}
            ceilings = [in_tree(ROOT, args.threads, CEILING, str(args.threads))]
            rows = []
            for _ in range(args.rounds):
                for (label, preset, *overrides), on_both in cases:
                    for name, tree in trees.items() if on_both else [("now", ROOT)]:
                        found = in_tree(tree, args.threads, MEASURE, str(args.threads), preset,
                                        *overrides, data)  # fmt: skip
                        rows.append({"case": label, "tree": name, **found})
                        print(json.dumps(rows[-1]), flush=True)
            ceilings.append(in_tree(ROOT, args.threads, CEILING, str(args.threads)))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
                           check=False, capture_output=True)  # fmt: skip
    print(f"\nfloat32 matmul ceiling ({args.threads} threads): "
          f"{ceilings[0]:.1f} before, {ceilings[1]:.1f} after (GFLOP/s)\n")  # fmt: skip
    print("\n".join(table(rows, max(ceilings), args.baseline)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
