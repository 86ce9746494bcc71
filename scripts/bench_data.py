"""`make bench-data`: preparation and training start-up from 26k to 5 million pairs.

    python scripts/bench_data.py                     # Tatoeba, 250k, 1M, 5M pairs: ~40 min
    python scripts/bench_data.py --sizes 0 100000 --out /tmp/data.md     # a smoke run

What is measured and how: `tools.bench.data_scale`. The commands run in this repository.
"""

from __future__ import annotations

import _workshop  # noqa: F401  (puts the repository root, and tools/, on sys.path)

# isort: split

import argparse
from pathlib import Path

from seq2seq.cli.checked_options import OneLineParser, whole
from seq2seq.cli.data import MAX_SYNTH_PAIRS
from seq2seq.output_folders import OutputPlaceError, check_output_file
from tools.bench.data_scale import DEFAULT_SIZES, build_entry, claim_work, measure_sizes
from tools.bench.entry import save_entry

ROOT = Path(__file__).resolve().parents[1]


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sizes", type=whole(0, MAX_SYNTH_PAIRS), nargs="+", default=list(DEFAULT_SIZES),
        help="pairs per synthetic corpus; 0: the data config's own corpus",
    )  # fmt: skip
    parser.add_argument(
        "--updates", type=whole(1, 10**6), default=20, help="training updates per size"
    )
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "data_scale")
    parser.add_argument("--out", type=Path, default=ROOT / "tools" / "bench" / "LOG.md")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if any(size < 0 for size in args.sizes) or args.updates < 1:
        raise SystemExit("--sizes must be >= 0 and --updates >= 1")
    try:  # the work folder and the page's folder, before ~40 minutes of work
        args.work = claim_work(args.work)
        check_output_file(args.out, "--out")
    except OutputPlaceError as error:
        build_parser().error(str(error))
    results = measure_sizes(args.sizes, args.work, args.updates, ROOT)
    if save_entry(args.out, build_entry(args.updates, results), "bench_data.py"):
        return 2
    print(f"appended to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
