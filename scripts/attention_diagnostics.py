"""How attention and recurrent gates look on real sentences: entropy, saturation, score scale.

    python scripts/attention_diagnostics.py \\
        --init "+experiment=compare_gru attention=dot" "+experiment=compare_gru attention=scaled_dot"
    python scripts/attention_diagnostics.py --checkpoint RUN/checkpoints/best.pt --json out.json

What is measured, and on which pairs: `seq2seq.lab.attention_diagnostics`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from seq2seq.cli.checked_options import OneLineParser, check_output_files, threads, whole
from seq2seq.config.search_settings import MAX_BATCH
from seq2seq.lab.attention_diagnostics import diagnose_sources, markdown
from seq2seq.output_folders import OutputPlaceError, write_output_file


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--init", nargs="*", default=[], help="quoted train overrides, one model each"
    )
    parser.add_argument("--checkpoint", nargs="*", default=[], help="checkpoint files")
    parser.add_argument("--pairs", type=whole(1, 10**7), default=256, help="valid pairs per model")
    parser.add_argument("--batch-size", type=whole(1, MAX_BATCH), default=32)
    parser.add_argument("--threads", type=threads, default=1)
    parser.add_argument("--json", type=Path, help="also write the results here")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.init and not args.checkpoint:
        parser.error("give --init and/or --checkpoint")
    check_output_files(parser, ("--json", args.json))  # before the models are trained
    torch.set_num_threads(args.threads)
    results = diagnose_sources(args.init, args.checkpoint, args.pairs, args.batch_size)
    print(markdown(results))
    if args.json:
        try:
            write_output_file(args.json, json.dumps(results, indent=2) + "\n", "--json")
        except OutputPlaceError as error:
            print(f"attention_diagnostics: {error}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
