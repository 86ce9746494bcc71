"""Train variants of `make train`'s model for the same compute and compare their valid BLEU.

    python scripts/levers.py --jobs 2 base warmup_200 tokens_1024     # named levers
    python scripts/levers.py --seeds 1234 1235 r3_base r3_guided      # round 3, two seeds each
    python scripts/levers.py --list                                     # what there is
    python scripts/levers.py --table multirun/levers/DATE               # table of a finished set

The levers, their budgets and the table: `tools.bench.levers`.
"""

from __future__ import annotations

import _workshop  # noqa: F401  (puts the repository root, and tools/, on sys.path)

# isort: split

import argparse
import sys
import time
from pathlib import Path

from tools.bench.levers import LEVERS, listing, seeded_table, table, train_all


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("levers", nargs="*", help="lever names (default: all)")
    parser.add_argument("--tflop", type=float, default=40.0, help="training TFLOP per lever")
    parser.add_argument("--jobs", type=int, default=1, help="levers trained at once")
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=(), help="train each lever with each seed"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("multirun/levers") / time.strftime("%Y-%m-%d")
    )
    parser.add_argument("--list", action="store_true", help="print the levers and exit")
    parser.add_argument("--table", type=Path, help="print the table of a finished set and exit")
    return parser


def tables(out: Path) -> list[str]:
    """The table of single runs (rounds 1-2) and of runs with several seeds (round 3)."""
    single = table(out) if any((path / "results.json").is_file() for path in out.iterdir()) else []
    return single + (seeded_table(out) if any(out.glob("*/seed_*/results.json")) else [])


def main() -> int:
    parser = build_parser()
    args = parser.parse_args()
    if args.list or args.table:
        print("\n".join(listing() if args.list else tables(args.table)))
        return 0
    unknown = [name for name in args.levers if name not in LEVERS]
    if unknown:
        parser.error(f"unknown levers {unknown}; --list shows them")
    chosen = [LEVERS[name] for name in args.levers] if args.levers else list(LEVERS.values())
    train_all(chosen, args.tflop, args.out, args.jobs, tuple(args.seeds))
    print("\n".join(tables(args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
