"""`seq2seq-align-baseline`: a statistical word aligner (eflomal), scored on the gold set.

    seq2seq-align-baseline --data-dir data/prepared/tatoeba_zh_en --src zh --tgt en
    seq2seq-align-baseline --data-dir DIR --src zh --tgt en --part valid test \\
        --symmetrise forward reverse intersection grow-diag-final-and --json results.json
    seq2seq-align-baseline --data-dir DIR --src zh --tgt en --part test --out test.align

eflomal learns from `DIR/train.SRC` and `DIR/train.TGT` with the gold pairs of the parts
asked for appended (as the corpus writes them), aligns everything in one run, both
directions, and the links of the gold pairs, symmetrised and carried onto the gold words,
are scored like any attention's (`seq2seq.align.statistical`): precision, recall and AER
(Och & Ney 2003) per part and symmetrisation. `--out` writes the links (Pharaoh, gold word
indices) of one part and one symmetrisation; `--json` the scores. Every problem with the
options, the files or the aligner is one error line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from seq2seq.align.gold import PARTS
from seq2seq.align.pharaoh import write_links
from seq2seq.align.statistical import (
    MODELS,
    SYMMETRISATIONS,
    BaselineError,
    BaselineResult,
    EflomalSettings,
    eflomal_version,
    evaluate_baseline,
    gold_parts,
)
from seq2seq.cli.checked_options import OneLineParser, check_output_files, number, whole
from seq2seq.cli.common import InputError, one_line, read_text_lines
from seq2seq.config.value_checks import thread_limit
from seq2seq.output_folders import OutputPlaceError, writing_file

PROGRAM = "seq2seq-align-baseline"
ALL = "all"
MAX_ITERATIONS = 100.0  # --iterations: a hundred times eflomal's own schedule
MAX_PAIRS = 10**12  # --max-train: beyond any corpus


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROGRAM, description=__doc__.split("\n")[0])
    parser.add_argument(
        "--data-dir", type=Path, required=True, help="a prepared corpus: train.SRC, train.TGT"
    )
    parser.add_argument("--src", required=True, help="source language code, e.g. zh")
    parser.add_argument("--tgt", required=True, help="target language code, e.g. en")
    parser.add_argument(
        "--part", nargs="+", choices=PARTS, default=["test"], help="gold parts (default test)"
    )
    parser.add_argument(
        "--symmetrise",
        nargs="+",
        choices=(*SYMMETRISATIONS, ALL),
        default=["grow-diag-final-and"],
        help="how to combine the two directions (default grow-diag-final-and; all: every one)",
    )
    parser.add_argument(
        "--model", type=int, choices=sorted(MODELS), default=3,
        help="eflomal's model: 1 IBM 1, 2 HMM, 3 HMM with fertility (default)",
    )  # fmt: skip
    parser.add_argument(
        "--samplers", type=whole(1, thread_limit()), default=3,
        help="Gibbs samplers, run at once (default 3)",
    )  # fmt: skip
    parser.add_argument(
        "--iterations", type=number(0, MAX_ITERATIONS, low_open=True), default=1.0,
        help="eflomal's iterations × this (default 1)",
    )  # fmt: skip
    parser.add_argument(
        "--split-punctuation",
        action="store_true",
        help="cut punctuation off the words the aligner reads (city. → city .)",
    )
    parser.add_argument(
        "--max-train", type=whole(1, MAX_PAIRS), default=None,
        help="use only the first N training pairs",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, help="write the links of the one part and symmetrisation here"
    )
    parser.add_argument("--json", type=Path, help="write the scores here as JSON")
    return parser


def methods_of(args: argparse.Namespace) -> list[str]:
    """The symmetrisations asked for, in SYMMETRISATIONS order, each once."""
    wanted = set(SYMMETRISATIONS) if ALL in args.symmetrise else set(args.symmetrise)
    return [method for method in SYMMETRISATIONS if method in wanted]


def option_problem(args: argparse.Namespace, methods: list[str]) -> str | None:
    """What is wrong with the options, or None."""
    if args.out is not None and (len(set(args.part)) > 1 or len(methods) > 1):
        return "--out writes one part and one symmetrisation: give one of each"
    return None


def read_training(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The training split's two sides (the first --max-train pairs); InputError when a file
    is missing or unreadable or their line counts differ."""
    paths = [args.data_dir / f"train.{args.src}", args.data_dir / f"train.{args.tgt}"]
    sources, targets = (read_text_lines(path, "--data-dir") for path in paths)
    if len(sources) != len(targets):
        raise InputError(
            f"--data-dir: {paths[0]} has {len(sources)} lines but {paths[1]} {len(targets)}"
        )
    if args.max_train is not None:
        sources, targets = sources[: args.max_train], targets[: args.max_train]
    return sources, targets


def shown(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def report(result: BaselineResult, settings: EflomalSettings, args: argparse.Namespace) -> None:
    """One line about the run, then one line per part and symmetrisation."""
    print(
        f"eflomal {eflomal_version()} (model {settings.model}: {MODELS[settings.model]}) on "
        f"{result.train_pairs:,} training pairs + {result.gold_pairs} gold pairs "
        f"({args.src}→{args.tgt}{', punctuation split' if args.split_punctuation else ''}): "
        f"{result.seconds:.1f} s"
    )
    width = max(len(method) for counts in result.counts.values() for method in counts)
    for part, counts in result.counts.items():
        for method, count in counts.items():
            print(
                f"{part:5}  {method:{width}}  precision {shown(count.precision)}  "
                f"recall {shown(count.recall)}  AER {shown(count.aer)}  "
                f"({count.proposed} links, {count.sentences} pairs)"
            )


def as_json(result: BaselineResult, settings: EflomalSettings, args: argparse.Namespace) -> dict:
    return {
        "aligner": "eflomal",
        "version": eflomal_version(),
        "settings": {
            "model": settings.model,
            "samplers": settings.samplers,
            "rel_iterations": settings.rel_iterations,
            "null_prior": settings.null_prior,
            "split_punctuation": args.split_punctuation,
        },
        "src": args.src,
        "tgt": args.tgt,
        "data_dir": str(args.data_dir),
        "train_pairs": result.train_pairs,
        "gold_pairs": result.gold_pairs,
        "seconds": round(result.seconds, 2),
        "scores": {
            part: {method: count.scores() for method, count in counts.items()}
            for part, counts in result.counts.items()
        },
    }


def write_file(path: Path, option: str, write) -> None:
    """Call `write(stream)` on a temporary beside `path`, renamed over it once complete
    (`seq2seq.output_folders.writing_file`); InputError naming `option` and the path when
    it cannot be written."""
    try:
        with writing_file(path, option) as temporary:
            with temporary.open("w", encoding="utf-8") as stream:
                write(stream)
    except OutputPlaceError as error:
        raise InputError(str(error)) from error


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    methods = methods_of(args)
    problem = option_problem(args, methods)
    if problem is not None:
        parser.error(problem)
    check_output_files(parser, ("--out", args.out), ("--json", args.json))
    parts = list(dict.fromkeys(args.part))
    try:
        settings = EflomalSettings(args.model, args.samplers, args.iterations)
    except ValueError as error:
        parser.error(str(error))
    try:
        gold = gold_parts(args.src, args.tgt, parts)
        sources, targets = read_training(args)
        result = evaluate_baseline(
            sources, targets, gold, args.src, args.tgt, methods, settings, args.split_punctuation
        )
        report(result, settings, args)
        if args.out is not None:
            write_file(
                args.out, "--out", lambda out: write_links(out, result.links[parts[0]][methods[0]])
            )
        if args.json is not None:
            document = as_json(result, settings, args)
            write_file(
                args.json, "--json", lambda out: out.write(json.dumps(document, indent=2) + "\n")
            )
    except (InputError, BaselineError) as error:
        parser.error(one_line(error))
    return 0


if __name__ == "__main__":
    sys.exit(main())
