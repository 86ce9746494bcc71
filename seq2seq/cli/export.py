"""`seq2seq-export`: a Transformer checkpoint as a CTranslate2 model folder.

    seq2seq-export RUN/checkpoints/best.pt --format ctranslate2 OUT/
    seq2seq-export RUN/checkpoints/best.pt --format ctranslate2 --quantization int8 OUT/
    seq2seq-translate --engine ctranslate2 OUT/ "我爱中国。"

OUT/ holds CTranslate2's model.bin, config.json and vocabularies, the checkpoint's
tokenisers (source.model, target.model) and seq2seq_export.json (`seq2seq.export`). A model
CTranslate2 cannot express (a non-Transformer family, a score other than scaled_dot, a
region other than soft) is refused in one line saying why. OUT is checked before the model is
converted (a folder that can be written; `--force` replaces only an earlier export, never a
folder holding the checkpoint, other files or `.`), and a failed export leaves an earlier
one as it was (`seq2seq.output_folders`). Every error is one line on
stderr and exit code 2. The folder records the attention head `seq2seq-translate
--alignments` reads for the checkpoint and returns its weights (`alignment_head`). Needs the `export` extra: pip install 'seq2seq-attention[export]'.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from seq2seq.align.defaults import default_settings
from seq2seq.align.extract import AlignmentError
from seq2seq.checkpoint import CheckpointError
from seq2seq.cli.checked_options import OneLineParser
from seq2seq.cli.common import one_line, plugin_argument
from seq2seq.config.build import ConfigError
from seq2seq.export import QUANTIZATIONS, AlignmentHead, ExportError, export_ctranslate2
from seq2seq.output_folders import OutputPlaceError
from seq2seq.plugins import PluginError, import_plugins
from seq2seq.search.translator import Translator


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="seq2seq-export", description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", type=Path, help="a .pt checkpoint written by seq2seq-train")
    parser.add_argument("out", type=Path, help="the folder to write the exported model into")
    parser.add_argument("--format", required=True, choices=["ctranslate2"], help="the engine")
    parser.add_argument(
        "--quantization", default="float32", choices=QUANTIZATIONS,
        help="how the weights are stored (default %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an earlier export in OUT (never a folder holding other files)",
    )
    plugin_argument(parser)
    return parser


def alignment_head(translator: Translator) -> AlignmentHead | None:
    """The attention `seq2seq-translate --alignments` reads for this checkpoint
    (`seq2seq.align.defaults`); None (the export then gives no alignments) when it has none."""
    try:
        found = default_settings(translator, use_layer=False)
    except AlignmentError:
        return None
    return AlignmentHead(found.settings.layer, found.settings.head, found.description)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        import_plugins(args.plugins)
        out = export_ctranslate2(
            args.checkpoint, args.out, args.quantization, args.force, alignment_head
        )
    except (CheckpointError, ConfigError, PluginError, ExportError, OutputPlaceError) as error:
        print(f"seq2seq-export: {one_line(error)}", file=sys.stderr)
        return 2
    print(
        f"seq2seq-export: {args.quantization} CTranslate2 model written to {out}", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
