"""Draw one sentence's alignment from several runs side by side (e.g. an attention sweep).

    python scripts/compare_alignments.py multirun/default/2026-11-29_14-00-00
    python scripts/compare_alignments.py outputs/a/RUN1 outputs/b/RUN2 --sentence "我爱中国。"
    python scripts/compare_alignments.py multirun/... --reference "I love China." --out cmp.png

Every run folder holding `checkpoints/best.pt` (searched recursively) gives one panel: the
last attention layer's head mean, titled by the settings in which the runs differ; a run
with an alignment layer (`alignment=layer`) gives a second panel, in the row below: the
layer's head mean over the same output. Runs that differ only in `trainer.seed` give one
panel, of the lowest seed (`--all-seeds`: every run). By default each model translates the
sentence greedily; with `--reference` all are teacher-forced on it. `--tensorboard DIR` also
logs the image there. The work is done by `seq2seq.study.alignments.runs_figure`.
"""

import sys
from pathlib import Path

from seq2seq.checkpoint import CheckpointError
from seq2seq.cli.checked_options import OneLineParser, check_output_files, device
from seq2seq.output_folders import OutputPlaceError, writing_file
from seq2seq.study.alignments import runs_figure
from seq2seq.training.logger import RunLogger
from seq2seq.visualise.heatmap import figure_to_rgb

parser = OneLineParser(description=__doc__.split("\n")[0])
parser.add_argument("runs", nargs="+", type=Path, help="run folders or a multirun folder")
parser.add_argument("--sentence", help="source sentence (default: the first probe)")
parser.add_argument("--reference", help="teacher-force this translation in every run")
parser.add_argument("--out", type=Path, default=Path("alignment_comparison.png"))
parser.add_argument("--tensorboard", type=Path, help="also log the image in DIR/tensorboard")
parser.add_argument("--device", type=device, default="cpu")
parser.add_argument("--all-seeds", action="store_true", help="one panel per run, not per configuration")
args = parser.parse_args()
check_output_files(parser, ("--out", args.out))  # before the checkpoints are loaded
try:
    figure = runs_figure(args.runs, args.device, args.sentence, args.reference, args.all_seeds)
except (FileNotFoundError, CheckpointError, ValueError) as error:
    sys.exit(f"compare_alignments: {error}")
try:
    with writing_file(args.out, "--out") as temporary:  # whole or not at all
        figure.savefig(temporary, dpi=120, format=args.out.suffix.lstrip(".") or "png")
except OutputPlaceError as error:
    sys.exit(f"compare_alignments: {error}")
if args.tensorboard:
    logger = RunLogger(args.tensorboard)
    logger.image("alignment/comparison", figure_to_rgb(figure), 0)
    logger.close()
print(args.out)
