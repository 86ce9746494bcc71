"""`make bench`: how fast training and decoding run here, appended to the benchmark log (tools/bench/LOG.md).

    python scripts/bench.py                                  # the default sections (~10-15 min)
    python scripts/bench.py --quick --out /tmp/bench.md      # a tiny smoke run (~1 min)
    python scripts/bench.py --checkpoint RUN/checkpoints/best.pt --run-dir RUN

The sections of the entry and how each is measured: `tools.bench.speed`.
"""

from __future__ import annotations

import _workshop  # noqa: F401  (puts the repository root, and tools/, on sys.path)

# isort: split

import argparse
import sys
from pathlib import Path

from seq2seq.cli.checked_options import (
    MAX_COUNT,
    OneLineParser,
    check_output_files,
    count,
    device_or_auto,
    threads,
    whole,
)
from tools.bench.entry import save_entry
from tools.bench.speed import FULL_DEFAULTS, PRESETS, BenchOptions, build_entry


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--quick", action="store_true", help="tiny: 2 presets, few steps, 100 sentences")
    add("--presets", nargs="+", choices=PRESETS, help=f"default: all of {', '.join(PRESETS)}")
    add("--threads", type=threads, help="torch threads (default: torch's, all cores)")
    add("--steps", type=count, help=f"updates per measurement (default {FULL_DEFAULTS['steps']})")
    add(
        "--reps",
        type=count,
        help=f"measurements per preset, median reported (default {FULL_DEFAULTS['reps']})",
    )
    add(
        "--warmup",
        type=whole(0, MAX_COUNT),
        help=f"untimed updates first (default {FULL_DEFAULTS['warmup']})",
    )
    add("--max-tokens", type=count, help="override data.max_tokens (default: the preset's)")
    add("--compile", action="store_true", help="also each preset with trainer.compile=true")
    add("--checkpoint", type=Path, action="append", help="decode with it (repeatable)")
    add("--skip-training", action="store_true", help="only the ceiling, decoding, quality")
    add("--sentences", type=count, help="test sentences to decode (default: all 1000)")
    add("--run-dir", type=Path, help="a default_cpu run folder, for time to quality")
    add("--device", type=device_or_auto, default="cpu", help="cpu | cuda | auto")
    add("--out", type=Path, default=Path("tools/bench/LOG.md"), help="the file to append to")
    add("--profile-out", type=Path, default=Path("benchmarks/profile_default_cpu.txt"))
    add("--dropout", action="store_true", help="also default_cpu's update time per dropout site")
    add("--matmul-bound", action="store_true",
        help="also each preset's update products timed alone: the MFU it could reach")  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = vars(parser.parse_args(argv))
    out = args.pop("out")
    check_output_files(parser, ("--out", out))  # before the measurements
    args["checkpoints"] = args.pop("checkpoint") or []
    lines = build_entry(BenchOptions(**args))
    if save_entry(out, lines, "bench.py"):
        return 2
    print(f"\nappended to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
