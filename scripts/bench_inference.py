"""`make bench-inference`: decoding speed and BLEU of every engine, in one run on one machine.

    python scripts/bench_inference.py --model transformer=RUN/checkpoints/best.pt \\
        --model gru=RUN2/checkpoints/best.pt --baseline 02b4f14
    python scripts/bench_inference.py --model t=RUN/checkpoints/best.pt --sentences 50 \\
        --reps 1 --threads 1 --out /tmp/inference.md                          # a smoke run

What is measured and how: `tools.bench.engines`. `--baseline REV` adds the rows of the
project's search at commit REV, checked out as a git worktree below --work and removed
afterwards. A Transformer checkpoint is also exported to CTranslate2 (float32 and int8)
when the `export` extra is installed.
"""

from __future__ import annotations

import _workshop  # noqa: F401  (puts the repository root, and tools/, on sys.path)

# isort: split

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from seq2seq.cli.checked_options import OneLineParser, check_output_files, count, threads
from seq2seq.export import ExportError
from seq2seq.export.ctranslate2 import export_ctranslate2
from seq2seq.output_folders import OutputPlaceError
from tools.bench.engines import (
    build_entry,
    ceilings,
    engines_for,
    measure_model,
    test_set,
)
from tools.bench.entry import save_entry

ROOT = Path(__file__).resolve().parents[1]


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--model", action="append", required=True, metavar="NAME=CHECKPOINT",
        help="a checkpoint to measure, under a short name (repeat for several)")  # fmt: skip
    add("--baseline", metavar="REV", help="also measure the project's search at this commit")
    add("--threads", type=threads, nargs="+", default=[1, 2], help="thread counts (default 1 2)")
    add("--sentences", type=count, default=1000, help="test sentences per model (default 1000)")
    add("--reps", type=count, default=3, help="passes per measurement; the median is reported")
    add("--data-root", type=Path, default=ROOT / "data", help="where the prepared data lives")
    add("--out", type=Path, default=ROOT / "tools" / "bench" / "LOG.md", help="the file to add the entry to")
    return parser


def parsed_models(parser: argparse.ArgumentParser, specs: list[str]) -> dict[str, Path]:
    models = {}
    for spec in specs:
        name, _, path = spec.partition("=")
        if not name or not path or not Path(path).is_file():
            parser.error(f"--model {spec}: give NAME=CHECKPOINT with an existing file")
        models[name] = Path(path)
    return models


def exported(checkpoint: Path, folder: Path) -> Path | None:
    """A float32 CTranslate2 export of the checkpoint; None (with a line saying why) when the
    model cannot be exported or the extra is missing."""
    try:
        return export_ctranslate2(checkpoint, folder, "float32", force=True)
    except (ExportError, OutputPlaceError) as error:  # an older folder there: not replaced
        print(f"{checkpoint}: no CTranslate2 rows: {error}", file=sys.stderr)
        return None


def baseline_tree(rev: str, work: Path) -> Path:
    tree = work / f"baseline-{rev}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--force",
                    str(tree), rev], check=True, capture_output=True)  # fmt: skip
    return tree


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    models = parsed_models(parser, args.model)
    check_output_files(parser, ("--out", args.out))  # before the measurements
    if args.sentences < 1 or args.reps < 1 or min(args.threads) < 1:
        parser.error("--sentences, --reps and --threads must be at least 1")
    with tempfile.TemporaryDirectory(prefix="bench-inference-") as folder:
        work = Path(folder)
        baseline = (
            None if args.baseline is None else (args.baseline, baseline_tree(args.baseline, work))
        )
        try:
            found_ceilings = ceilings(args.threads)
            rows = []
            for name, checkpoint in models.items():
                export = exported(checkpoint, work / f"ct2-{name}")
                engines = engines_for(checkpoint, ROOT, baseline, export)
                test = test_set(checkpoint, args.sentences, args.data_root, work)
                rows += measure_model(name, engines, args.threads, test, args.reps, work)
        finally:
            if baseline is not None:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                str(baseline[1])], check=False, capture_output=True)  # fmt: skip
    entry = build_entry(models, rows, found_ceilings, args.sentences, args.reps, args.baseline)
    return save_entry(args.out, entry, "bench_inference.py")


if __name__ == "__main__":
    raise SystemExit(main())
