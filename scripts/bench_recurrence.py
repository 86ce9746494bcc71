"""The RNN encoder's recurrence in training on the CPU: PyTorch's packed module against
`recur`, forward and backward, in one process (`tools.bench.recurrence_speed`).

    python scripts/bench_recurrence.py                   # GRU and LSTM, 3 shapes: ~3 min
    python scripts/bench_recurrence.py --cells gru --shapes 273x15 --reps 3

Every shape holds about 4,096 source tokens by default. Prints the float32 matmul ceiling,
then per cell and shape the medians over the reps and the median of the per-rep ratios.
"""

from __future__ import annotations

import _workshop  # noqa: F401  (puts the repository root, and tools/, on sys.path)

# isort: split

import argparse
import statistics

import torch

from seq2seq.lab.matmul_ceiling import ceiling_section
from tools.bench.recurrence_speed import MODULES, measure


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cells", nargs="+", choices=sorted(MODULES), default=["gru", "lstm"])
    parser.add_argument("--shapes", nargs="+", default=["273x15", "100x40", "40x100"])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=4, help="passes averaged in one rep")
    parser.add_argument("--threads", type=int, default=2)
    return parser


def parse_shape(text: str) -> tuple[int, int]:
    """'BxS' -> (B, S); ValueError naming the flag otherwise."""
    try:
        batch, steps = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--shapes takes BxS, e.g. 273x15, got {text!r}") from None
    if batch < 1 or steps < 4:
        raise ValueError(f"--shapes needs B >= 1 and S >= 4, got {text!r}")
    return batch, steps


def main() -> None:
    args = build_parser().parse_args()
    torch.set_num_threads(args.threads)
    shapes = [parse_shape(text) for text in args.shapes]
    ceiling_lines, best = ceiling_section(5, torch.device("cpu"))
    print("\n".join(ceiling_lines) + f"\n\nBest: {best:.1f} GFLOP/s, {args.threads} threads\n")
    print("| cell | B × S | packed module ms | recur ms | speed-up |\n|---|---|---|---|---|")
    for cell in args.cells:
        for batch, steps in shapes:
            times = measure(cell, batch, steps, args.reps, args.steps)
            old, new = times["packed module"], times["recur"]
            ratio = statistics.median(a / b for a, b in zip(old, new))
            print(
                f"| {cell} | {batch} × {steps} | {1e3 * statistics.median(old):.1f} | "
                f"{1e3 * statistics.median(new):.1f} | {ratio:.2f}× |",
                flush=True,
            )


if __name__ == "__main__":
    main()
