"""`make bench-peer`: this project against JoeyNMT 2.3.0 and OpenNMT-py 3.5.1, back to back here.

    python scripts/bench_peer.py                       # 2 shapes × 3 frameworks × 4 min, ~55 min
    python scripts/bench_peer.py --peers opennmt       # ours and OpenNMT-py only
    python scripts/bench_peer.py --minutes 0.3 --sentences 20 --log-every 2 \\
        --warmup-updates 2 --decode-reps 1 --out /tmp/peer.md     # a smoke run, ~5 min
    python scripts/bench_peer.py --quality 15 20 --quality-minutes 30   # and time to quality:
        # + 2 shapes × 3 frameworks × (30 min + scoring 30 checkpoints), ~4 h more

What it does, step by step, and the differences that remain: `tools.bench.peer`.
"""

from __future__ import annotations

import _workshop  # noqa: F401  (puts the repository root, and tools/, on sys.path)

# isort: split

import argparse
import datetime
import sys
from pathlib import Path

from seq2seq.cli.checked_options import (
    MAX_COUNT,
    OneLineParser,
    check_output_files,
    count,
    number,
    threads,
    whole,
)
from tools.bench.entry import save_entry
from tools.bench.peer.benchmark_entry import build_entry
from tools.bench.peer.peer_options import PeerOptions, check_options
from tools.bench.peer.shared_settings import PEERS, SHAPES

ROOT = Path(__file__).resolve().parents[1]


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    add("--peers", nargs="+", choices=list(PEERS), default=list(PEERS), help="the peer toolkits")
    add(
        "--minutes",
        type=number(0, 24 * 60, low_open=True),
        default=4.0,
        help="training time per framework and shape",
    )
    add("--threads", type=threads, default=2, help="torch threads on both sides")
    add("--sentences", type=count, default=1000, help="test sentences to decode (default all)")
    add("--log-every", type=count, default=10, help="updates per logged throughput interval")
    add(
        "--warmup-updates",
        type=whole(0, MAX_COUNT),
        default=20,
        help="intervals ending here are left out",
    )
    add("--decode-reps", type=count, default=3, help="decoding passes, the median is reported")
    add("--matmul-reps", type=count, default=10)
    add(
        "--peer-root",
        type=Path,
        default=Path(".peer"),
        help="each peer's virtual environment is PEER_ROOT/<peer> (made when missing)",
    )
    add(
        "--quality",
        type=number(0, 100, low_open=True),
        nargs="+",
        metavar="BLEU",
        help="time to quality: training minutes of each framework to these greedy valid BLEU "
        "(off when not given)",
    )
    add(
        "--quality-minutes",
        type=number(0, 24 * 60, low_open=True),
        default=30.0,
        help="time to quality: training budget per framework and shape",
    )
    add(
        "--quality-every",
        type=number(0, 24 * 60, low_open=True),
        default=1.0,
        help="time to quality: training minutes between two saved checkpoints",
    )
    add(
        "--quality-sentences",
        type=count,
        default=500,
        help="time to quality: valid pairs every checkpoint is scored on",
    )
    add("--work-dir", type=Path, help="default: bench/peer/<date_time>")
    add("--out", type=Path, default=Path("tools/bench/LOG.md"), help="the file to append to")
    return parser


def options_from(args: argparse.Namespace) -> PeerOptions:
    stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    work_dir = (args.work_dir or Path("bench/peer") / stamp).absolute()
    fixed = {"work_dir": work_dir, "root": ROOT, "peer_root": args.peer_root.absolute()}
    return check_options(PeerOptions(**(vars(args) | fixed)))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    options = options_from(parser.parse_args(argv))
    check_output_files(parser, ("--out", options.out))  # before the measurements
    lines = build_entry(options)
    if save_entry(options.out, lines, "bench_peer.py"):  # the same file format as `make bench`
        return 2
    print(f"\nappended to {options.out}; runs, logs and checkpoints in {options.work_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
