"""Draw one sentence's alignment from several runs side by side (e.g. an attention sweep).

    python scripts/compare_alignments.py multirun/default/2026-11-29_14-00-00
    python scripts/compare_alignments.py outputs/a/RUN1 outputs/b/RUN2 --sentence "我爱中国。"
    python scripts/compare_alignments.py multirun/... --reference "I love China." --out cmp.png

Every run folder holding `checkpoints/best.pt` (searched recursively) gives one panel: the
last attention layer's head mean, titled by the settings in which the runs differ
(attention score / region / heads, encoder...). Runs that differ only in `trainer.seed`
(`make compare` trains each configuration with several seeds) give one panel, of the
lowest seed; `--all-seeds` draws every run. By default each model translates the
sentence greedily; with `--reference` all models are teacher-forced on that translation,
so every panel has the same rows. `--tensorboard DIR` also logs the image there.
The work is done by `seq2seq.runs.alignments`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from seq2seq.checkpoint import CheckpointError
from seq2seq.runs.alignments import collect_panels
from seq2seq.runs.reading import BEST_CHECKPOINT, find_checkpoints, one_per_configuration
from seq2seq.training.logger import RunLogger
from seq2seq.visualise.heatmap import draw_comparison, figure_to_rgb


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders or a multirun folder")
    parser.add_argument("--sentence", help="source sentence (default: the first probe)")
    parser.add_argument("--reference", help="teacher-force this translation in every run")
    parser.add_argument("--out", type=Path, default=Path("alignment_comparison.png"))
    parser.add_argument("--tensorboard", type=Path, help="also log the image in DIR/tensorboard")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--all-seeds", action="store_true", help="one panel per run, not per configuration"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = build_parser().parse_args(argv)
    checkpoints = find_checkpoints(args.runs)
    if not args.all_seeds:
        runs = one_per_configuration([checkpoint.parent.parent for checkpoint in checkpoints])
        checkpoints = [run / BEST_CHECKPOINT for run in runs]
    try:
        sentence, panels = collect_panels(checkpoints, args.device, args.sentence, args.reference)
    except (CheckpointError, ValueError) as error:
        raise SystemExit(f"compare_alignments: {error}") from error
    if not panels:
        raise SystemExit("none of the runs has attention weights to compare")
    mode = "teacher-forced" if args.reference else "greedy"
    figure = draw_comparison(panels, f"{sentence}  ({mode}; last layer, mean of heads)")
    figure.savefig(args.out, dpi=120)
    if args.tensorboard:
        logger = RunLogger(args.tensorboard)
        logger.image("alignment/comparison", figure_to_rgb(figure), 0)
        logger.close()
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
