"""The GPU section of the benchmark log (tools/bench/LOG.md): training throughput on one CUDA device.

    python scripts/gpu_bench.py                         # default_cpu, bf16 and float32
    python scripts/gpu_bench.py --peak-tflops 989 --max-tokens 2048 8192 --out /tmp/gpu.md
    python scripts/gpu_bench.py data.root=/data/seq2seq    # Hydra overrides for every row

What each row measures and how MFU is counted: `tools.bench.gpu`.
"""

from __future__ import annotations

import _workshop  # noqa: F401  (puts the repository root, and tools/, on sys.path)

# isort: split

import argparse
import sys
from pathlib import Path

import torch

from seq2seq.cli.checked_options import check_output_files
from tools.bench.entry import save_entry
from tools.bench.gpu import PRESETS, entry_lines, gpu_facts, known_peak, measure_all
from tools.bench.speed import PRESETS as ALL_PRESETS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), choices=ALL_PRESETS)
    parser.add_argument("--max-tokens", nargs="+", type=int, default=[0, 8192],
                        help="data.max_tokens per row; 0 = the preset's (default: 0 8192)")  # fmt: skip
    parser.add_argument("--peak-tflops", type=float, help="the GPU's dense bf16 peak, TFLOP/s")
    parser.add_argument("--out", type=Path, default=Path("tools/bench/LOG.md"))
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. data.root=/data")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_output_files(parser, ("--out", args.out))  # before the measurements
    if not torch.cuda.is_available():
        print("gpu_bench: no CUDA device (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    gpu = gpu_facts()
    peak = ("--peak-tflops", args.peak_tflops) if args.peak_tflops else known_peak(gpu["name"])
    lines = entry_lines(gpu, measure_all(args.presets, args.max_tokens, args.overrides), peak)
    if save_entry(args.out, lines, "gpu_bench"):
        return 2
    print(f"\nappended to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
