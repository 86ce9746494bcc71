"""`make bench-peer`: this project against JoeyNMT 2.3.0, measured back to back here.

    python scripts/bench_peer.py                       # 2 shapes × 2 frameworks × 4 min, ~35 min
    python scripts/bench_peer.py --minutes 0.3 --sentences 20 --log-every 2 \\
        --warmup-updates 2 --decode-reps 1 --out /tmp/peer.md     # a smoke run, ~5 min

What it does, step by step, and the differences that remain: `seq2seq.bench.peer`.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from seq2seq.bench.entry import append_entry
from seq2seq.bench.peer.benchmark_entry import build_entry
from seq2seq.bench.peer.processes import PeerOptions, check_options
from seq2seq.bench.peer.shared_settings import SHAPES

ROOT = Path(__file__).resolve().parents[1]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    add("--minutes", type=float, default=4.0, help="training time per framework and shape")
    add("--threads", type=int, default=2, help="torch threads on both sides")
    add("--sentences", type=int, default=1000, help="test sentences to decode (default all)")
    add("--log-every", type=int, default=10, help="updates per logged throughput interval")
    add("--warmup-updates", type=int, default=20, help="intervals ending here are left out")
    add("--decode-reps", type=int, default=3, help="decoding passes, the median is reported")
    add("--matmul-reps", type=int, default=10)
    add("--peer-venv", type=Path, default=Path(".peer/joeynmt"))
    add("--work-dir", type=Path, help="default: bench/peer/<date_time>")
    add("--out", type=Path, default=Path("BENCHMARKS.md"), help="the file to append to")
    return parser


def options_from(args: argparse.Namespace) -> PeerOptions:
    stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    work_dir = (args.work_dir or Path("bench/peer") / stamp).absolute()
    return check_options(PeerOptions(**(vars(args) | {"work_dir": work_dir, "root": ROOT})))


def main(argv: list[str] | None = None) -> int:
    options = options_from(build_parser().parse_args(argv))
    lines = build_entry(options)
    append_entry(options.out, lines)  # the same file format as `make bench`
    print("\n".join(lines))
    print(f"\nappended to {options.out}; runs, logs and checkpoints in {options.work_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
