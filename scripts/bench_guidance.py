"""The cost of guided alignment and of the alignment layer: time per update with and without
them, same batches, same run, beside the machine's float32 matmul ceiling.

    python scripts/bench_guidance.py                                  # default_cpu, gru_additive
    python scripts/bench_guidance.py --preset default_cpu --updates 30 --threads 1

The variants and how they are timed: `tools.bench.guidance`.
"""

from __future__ import annotations

import _workshop  # noqa: F401  (puts the repository root, and tools/, on sys.path)

# isort: split

import argparse
import tempfile
from pathlib import Path

import torch

from seq2seq.lab.matmul_ceiling import ceiling_section
from tools.bench.guidance import PRESETS, measure, report_lines, variant_trainers


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", nargs="+", default=list(PRESETS))
    parser.add_argument("--updates", type=int, default=30, help="timed updates per variant")
    parser.add_argument("--warmup", type=int, default=5, help="untimed updates first")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--override", nargs="*", default=[], help="more Hydra overrides")
    return parser


def main() -> None:
    args = build_parser().parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    ceiling_lines, best = ceiling_section(5, torch.device(args.device))
    print("\n".join(ceiling_lines) + f"\n\nmatmul ceiling: {best:.1f} GFLOP/s, "
          f"{torch.get_num_threads()} thread(s)\n")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-guidance-") as folder:
        for preset in args.preset:
            trainers = variant_trainers(
                preset, args.threads, args.device, args.override, Path(folder)
            )
            medians = measure(trainers, args.warmup, args.updates)
            print("\n".join(report_lines(preset, medians)))


if __name__ == "__main__":
    main()
