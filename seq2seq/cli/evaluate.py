"""`seq2seq-evaluate`: translate and score with sacrebleu, from a checkpoint.

    seq2seq-evaluate CHECKPOINT                       # the test split of its corpus
    seq2seq-evaluate CHECKPOINT --split valid --data-root data
    seq2seq-evaluate CHECKPOINT --data tatoeba_zh_en  # name the corpus config yourself
    seq2seq-evaluate CHECKPOINT --src test.zh --ref test.en -o test.hyp

BLEU uses sacrebleu's `zh` tokeniser when the target is Chinese and `13a` otherwise,
through the same function as validation (`seq2seq.metrics.corpus_scores`).

Which data a split comes from is the user's choice, not the checkpoint's: a checkpoint may
come from someone else, and its data section could name any URL to download and any
folder to write to. So in split mode the corpus is described by one of the project's own
data configs (`configs/data/<NAME>.yaml`: `--data NAME`, or a YAML file of your own: `--data FILE.yaml`, by default the config whose name
is the checkpoint's `data.name`, refused when there is none), its files go below
`--data-root` (default `data`, relative to the current folder), and from the checkpoint
only the validated numbers and choices that decide the split and the subwords are taken
(seed, split sizes, `max_pairs`, vocabulary sizes and model type, toy sizes: see
`seq2seq.config.data_presets.CHECKPOINT_DATA_FIELDS`), so that the evaluated split is the one the model was trained
beside. Its URL, member, languages, columns and root are never used; the languages of the
config must equal the checkpoint's, and the tokenisers prepared from the data must equal
the ones stored in the checkpoint, else one clear error (exit code 2).

A checkpoint trained with plugins loads only with the same `--plugins SPEC` (once per
plugin), as for seq2seq-translate.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from seq2seq.cli.checked_options import OneLineParser
from seq2seq.cli.common import (
    InputError,
    checked_settings,
    load_translator,
    one_line,
    read_text_lines,
    search_arguments,
)
from seq2seq.config.build import plain
from seq2seq.config.data_presets import PresetError, split_data_config
from seq2seq.config.search_settings import SearchSettings
from seq2seq.data.corpus import CorpusError
from seq2seq.data.fetch import FetchError
from seq2seq.data.prepare import prepare
from seq2seq.metrics import corpus_scores
from seq2seq.output_folders import OutputPlaceError, check_output_file, write_output_file
from seq2seq.search.translator import Translator


class EvaluationError(ValueError):
    """The data to evaluate on cannot be prepared or does not fit the checkpoint."""


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="seq2seq-evaluate", description=__doc__.split("\n")[0])
    search_arguments(parser, omit=("n_best",))  # the best hypothesis is scored
    parser.add_argument("--split", choices=("valid", "test"), default="test")
    parser.add_argument("--data", help="data config of the split (configs/data/NAME.yaml; "
                        "default: the one named as the checkpoint's data.name)")  # fmt: skip
    parser.add_argument("--data-root", type=Path, default=Path("data"),
                        help="folder for raw/ and prepared/ (default: data)")  # fmt: skip
    parser.add_argument("--src", type=Path, help="source file (with --ref) instead of a split")
    parser.add_argument("--ref", type=Path, help="reference file, one line per source line")
    parser.add_argument(
        "-o", "--output", type=Path, help="hypotheses file (default: beside the checkpoint)"
    )
    parser.add_argument("--ter", action="store_true", help="also report TER")
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")
    return parser


def split_pairs(args: argparse.Namespace, translator: Translator) -> tuple[list[str], list[str]]:
    """Source and reference lines of a split, prepared from the user's data config."""
    config = split_data_config(plain(translator.config.data), args.data, args.data_root)
    try:
        data = prepare(config)
    except (FetchError, CorpusError, ValueError, OSError) as error:
        raise EvaluationError(f"preparing the data {config.name!r}: {one_line(error)}") from error
    for side in ("src", "tgt"):
        prepared = getattr(data, f"{side}_tokenizer").to_bytes()
        if prepared != getattr(translator, f"{side}_tokenizer").to_bytes():
            raise EvaluationError(
                f"the {side} tokeniser prepared from the data config {config.name!r} differs "
                "from the checkpoint's: check --data and --data-root"
            )
    split = getattr(data, args.split)
    return list(split.src_lines), list(split.tgt_lines)


def file_pairs(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """Source and reference lines from --src and --ref, checked to have equal lengths."""
    return read_pairs(args.src, args.ref)


def read_pairs(
    source: Path, reference: Path, names: tuple[str, str] = ("--src", "--ref")
) -> tuple[list[str], list[str]]:
    """Source and reference lines of two UTF-8 files, checked to have equal lengths;
    InputError naming each file by `names` (the options here, the arguments of
    `seq2seq.api.evaluate`), and the line that cannot be read."""
    sources = read_text_lines(source, names[0])
    references = read_text_lines(reference, names[1])
    if len(sources) != len(references):
        raise InputError(
            f"{names[0]} {source} has {len(sources)} lines, "
            f"{names[1]} {reference} has {len(references)}"
        )
    return sources, references


def scored_translations(
    translator: Translator,
    sources: Sequence[str],
    references: Sequence[str],
    settings: SearchSettings,
    ter: bool = False,
) -> tuple[list[str], dict[str, float | str]]:
    """The best translation of each source, and their corpus scores against the references
    (`seq2seq.metrics.corpus_scores`: BLEU, chrF and, with `ter`, TER, each with its
    sacrebleu signature): what seq2seq-evaluate and `seq2seq.api.evaluate` report."""
    hypotheses = [translation.text for translation in translator.translate(sources, settings)]
    lang = translator.tgt_tokenizer.lang
    return hypotheses, corpus_scores(hypotheses, list(references), lang, ter=ter)


def hypotheses_file(args: argparse.Namespace) -> Path:
    """--output, else a file beside the checkpoint named after the split (or `files`)."""
    return args.output or args.checkpoint.with_suffix(f".{args.src and 'files' or args.split}.hyp")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    settings = checked_settings(parser, args)
    if (args.src is None) != (args.ref is None):
        parser.error("--src and --ref go together")
    output = hypotheses_file(args)
    try:
        check_output_file(output, "--output")  # before the model loads
        pair = file_pairs(args) if args.src is not None else None
    except (InputError, OutputPlaceError) as error:
        parser.error(str(error))
    translator = load_translator(args, "seq2seq-evaluate")
    if translator is None:
        return 2
    try:
        sources, references = pair or split_pairs(args, translator)
    except (EvaluationError, PresetError) as error:
        print(f"seq2seq-evaluate: {one_line(error)}", file=sys.stderr)
        return 2
    hypotheses, scores = scored_translations(translator, sources, references, settings, args.ter)
    try:
        write_output_file(output, "\n".join(hypotheses) + "\n", "--output")
    except OutputPlaceError as error:
        print(f"seq2seq-evaluate: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(scores, ensure_ascii=False, indent=2))
    else:
        for name in ("bleu", "chrf", "ter"):
            if name in scores:
                print(f"{name.upper():5s} {scores[name]:6.2f}  {scores[name + '_signature']}")
        print(f"hypotheses: {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
