"""Compare the training-loss curves of two runs (bf16 autocast against float32).

    python scripts/gpu_compare_losses.py RUN_BF16 RUN_FP32 [--window 25] [--threshold 0.05]

Smooths each run's `metrics.jsonl` loss curve with a trailing moving average of `--window`
logged steps and prints the largest relative difference of the two. Exit code 0 when it is
at most `--threshold`, 1 above it (or a NaN, or too few shared steps), 2 for a file that
cannot be read. Why smooth, and why 5 %: `seq2seq.study.loss_curves`.
"""

import argparse
import sys
from pathlib import Path

from seq2seq.study.loss_curves import DEFAULT_THRESHOLD, DEFAULT_WINDOW, check

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("candidate", type=Path, help="run folder of the bf16 run")
parser.add_argument("reference", type=Path, help="run folder of the float32 run")
parser.add_argument("--window", type=int, default=DEFAULT_WINDOW, help="logged steps averaged")
parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                    help="largest relative difference accepted (default 0.05)")  # fmt: skip
args = parser.parse_args()
sys.exit(check(args.candidate, args.reference, args.window, args.threshold))
