"""`seq2seq-align`: word alignments from a checkpoint's attention, and their AER.

    seq2seq-align CHECKPOINT --src test.zh --tgt test.en > test.align
    seq2seq-align CHECKPOINT --src test.zh --tgt test.en --gold test.gold [-o test.align]
    seq2seq-align CHECKPOINT --src S --tgt T --layer 0 --head 2 --extract threshold
    seq2seq-align ZH_EN.pt --reverse EN_ZH.pt --src test.zh --tgt test.en [--symmetrise M]
    seq2seq-align --score test.align --gold test.gold      # score any aligner's output

One Pharaoh line per pair (`0-0 1-2`: source word - target word, from 0), from the
model's attention while it reads the target (teacher forcing). With --gold the precision,
recall and AER (Och & Ney 2003) are printed and the links are written only to -o. Every
problem with the options, the files or the checkpoint is one error line on stderr and
exit code 2.

The links are over the words of --src and --tgt as given (`seq2seq.align.words`), while the
model reads each side as it was trained (`seq2seq.align.extract.as_the_model_reads`):
pre-segmented Chinese (`他 很 忙 。`) without its spaces, English that splits punctuation
off (`He is busy .`) with it written against its word; the model's pieces are matched to
the given words by characters, as `valid/aer` reads the gold set.

--reverse names a model of the other direction (its source language is CHECKPOINT's target
language, and the other way round; any other model is refused). The links of both are
combined with --symmetrise: intersection, union, grow-diag, grow-diag-final,
grow-diag-final-and, or harmonic (the default: the best on the valid gold), the harmonic
mean of the two word attention matrices, then extracted (`seq2seq.align.symmetric` has the
definitions and the measurement). --extract applies to both models.

Without --layer or --head each checkpoint aligns with its own default, named in one line on
stderr: its separate alignment layer (`alignment=layer`: an attention trained to align that
predicts nothing, read after the decoder has read each target piece), else the head it was
trained to align with (`alignment=guided`), else the layer and head that training found
best on the valid gold pairs (stored in the checkpoint), else the last layer's head mean
(`seq2seq.align.defaults`). --layer or --head applies to both models and reads the
translation attention, as --attention does with the default head.

A checkpoint trained with plugins loads only with the same `--plugins SPEC` (once per
plugin), as for seq2seq-translate.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from seq2seq.align.defaults import default_settings
from seq2seq.align.extract import EXTRACTIONS, AlignmentError, AlignSettings, align_pairs
from seq2seq.align.gold import GoldPair
from seq2seq.align.model_aer import aligned_gold
from seq2seq.align.pharaoh import Links, check_links_fit, parse_lines, write_links
from seq2seq.align.symmetric import DEFAULT_SYMMETRISATION, SYMMETRISATIONS, symmetric_pairs
from seq2seq.align.words import words
from seq2seq.cli.checked_options import OneLineParser, check_output_files, device
from seq2seq.cli.common import (
    InputError,
    load_translator,
    one_line,
    plugin_argument,
    read_text_lines,
)
from seq2seq.metrics.aer import AlignmentCounts, corpus_counts
from seq2seq.output_folders import OutputPlaceError, writing_file

PROGRAM = "seq2seq-align"


UNSET = object()  # --head not given (None already means the head mean); not a string, as
# argparse would convert a string default with the option's type


def head_choice(value: str) -> int | None:
    """`--head`: an index from 0, or `mean` (None) for the mean over the heads."""
    if value == "mean":
        return None
    if not value.isdigit():
        raise argparse.ArgumentTypeError(
            f"expected a head index (0, 1, ...) or mean, got {value!r}"
        )
    return int(value)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROGRAM, description=__doc__.split("\n")[0])
    parser.add_argument(
        "checkpoint", type=Path, nargs="?", help="a .pt checkpoint (not with --score)"
    )
    parser.add_argument("--src", type=Path, help="source sentences, one per line")
    parser.add_argument("--tgt", type=Path, help="their translations, one per line")
    parser.add_argument("--gold", type=Path, help="gold links (i-j sure, i-j-P or ipj possible)")
    parser.add_argument("--one-based", action="store_true", help="the gold file counts from 1")
    parser.add_argument("--score", type=Path, help="score this Pharaoh file against --gold")
    parser.add_argument(
        "--layer",
        type=int,
        default=None,
        help="attention layer from 0, negative from the end (default: the checkpoint's own "
        "choice, see below)",
    )
    parser.add_argument(
        "--head",
        type=head_choice,
        default=UNSET,
        help="head index or mean (default: the checkpoint's own choice)",
    )
    parser.add_argument(
        "--attention",
        action="store_true",
        help="read the translation attention even when the model has an alignment layer "
        "(as --layer or --head do)",
    )
    parser.add_argument("--extract", choices=EXTRACTIONS, default="argmax", help="default argmax")
    parser.add_argument("--threshold", type=float, default=0.3, help="for --extract threshold")
    parser.add_argument(
        "--reverse",
        type=Path,
        metavar="CKPT",
        help="a checkpoint of the other direction, whose links are combined with these",
    )
    parser.add_argument(
        "--symmetrise",
        choices=SYMMETRISATIONS,
        metavar="METHOD",
        help=f"with --reverse: {', '.join(SYMMETRISATIONS)} "
        f"(default {DEFAULT_SYMMETRISATION}, the best on the valid gold)",
    )
    parser.add_argument("-o", "--output", type=Path, help="write the links here (default stdout)")
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")
    parser.add_argument("--device", type=device, default="cpu", help="cpu, cuda, cuda:N")
    plugin_argument(parser)
    return parser


def mode_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the combination of options, or None."""
    if args.score is not None:
        if any(getattr(args, name) is not None for name in ("checkpoint", "src", "tgt", "reverse")):
            return "--score scores an existing file: give no checkpoint, --reverse, --src or --tgt"
        return None if args.gold is not None else "--score needs --gold"
    if args.checkpoint is None:
        return "give a checkpoint with --src and --tgt, or --score FILE with --gold"
    if args.src is None or args.tgt is None:
        return "a checkpoint needs --src and --tgt"
    if args.symmetrise is not None and args.reverse is None:
        return "--symmetrise combines two directions: give the other one with --reverse"
    return None


def read_parallel(*files: tuple[str, Path]) -> list[list[str]]:
    """The lines of each (option, path), files that hold one line per pair; InputError
    naming every file and its line count when the counts differ."""
    texts = [read_text_lines(path, option) for option, path in files]
    if len({len(lines) for lines in texts}) > 1:
        raise InputError(", ".join(
            f"{option} {path} has {len(lines)} lines" for (option, path), lines in zip(files, texts)
        ))  # fmt: skip
    return texts


def parse_alignment(lines: list[str], option: str, path: Path, one_based: bool) -> list[Links]:
    """The links of a Pharaoh file's lines; InputError naming the file, line and token."""
    try:
        return parse_lines(lines, f"{option} {path}", one_based=one_based)
    except ValueError as error:
        raise InputError(str(error)) from error


def check_gold_fits(gold: list[Links], sources: list[str], targets: list[str], path: Path) -> None:
    for number, (links, source, target) in enumerate(zip(gold, sources, targets), 1):
        try:
            check_links_fit(
                links, len(words(source)), len(words(target)), f"--gold {path} line {number}"
            )
        except ValueError as error:
            raise InputError(str(error)) from error


def shown(value: float | None) -> str:
    """A score with four decimals; n/a when it is undefined (a zero denominator)."""
    return "n/a" if value is None else f"{value:.4f}"


def report(counts: AlignmentCounts, as_json: bool) -> None:
    """Precision, recall and AER on stdout, as text or JSON (undefined: n/a, null)."""
    if as_json:
        print(json.dumps(counts.scores(), indent=2))
        return
    print(f"precision {shown(counts.precision)}  recall {shown(counts.recall)}  "
          f"AER {shown(counts.aer)}")  # fmt: skip
    print(
        f"{counts.sentences} pairs: {counts.proposed} links proposed, "
        f"{counts.sure} sure and {counts.possible} possible gold links"
    )


def score_file(args: argparse.Namespace) -> int:
    """`--score HYP --gold GOLD`: AER of an existing alignment file."""
    proposed, gold = read_parallel(("--score", args.score), ("--gold", args.gold))
    counts = corpus_counts(
        parse_alignment(proposed, "--score", args.score, one_based=False),
        parse_alignment(gold, "--gold", args.gold, args.one_based),
    )
    report(counts, args.json)
    return 0


def read_inputs(args: argparse.Namespace) -> tuple[list[str], list[str], list[Links] | None]:
    """--src, --tgt and the --gold links (None without), one line per pair each."""
    files = [("--src", args.src), ("--tgt", args.tgt)]
    if args.gold is not None:
        files.append(("--gold", args.gold))
    sources, targets, *gold_lines = read_parallel(*files)
    if not gold_lines:
        return sources, targets, None
    gold = parse_alignment(gold_lines[0], "--gold", args.gold, args.one_based)
    check_gold_fits(gold, sources, targets, args.gold)
    return sources, targets, gold


def write_output(path: Path, links: list[Links]) -> bool:
    """Write the links to `path` whole or not at all; False (after one error line naming
    it) when it cannot be written."""
    try:
        with writing_file(path, "--output") as temporary:
            with temporary.open("w", encoding="utf-8") as stream:
                write_links(stream, links)
    except OutputPlaceError as error:
        print(f"{PROGRAM}: {error}", file=sys.stderr)
        return False
    return True


def checkpoint_links(
    args: argparse.Namespace,
    settings: AlignSettings,
    sources: list[str],
    targets: list[str],
    gold: list[Links] | None,
    notes: list[str],
) -> tuple[list[Links], AlignmentCounts | None] | None:
    """Links of each pair from the checkpoint, symmetrised with --reverse's, and their
    counts against `gold` when given (one model's: `seq2seq.align.model_aer.aligned_gold`,
    the reading of every gold set); None (after one error line) when a checkpoint cannot be
    loaded. What each model aligned with, when the user did not say, is added to `notes`."""
    translator = load_translator(args, PROGRAM)
    if translator is None:
        return None
    forward_settings = model_settings(args, settings, translator, args.checkpoint, notes)
    if args.reverse is None and gold is not None:
        return aligned_gold(
            translator, list(map(GoldPair, sources, targets, gold)), forward_settings
        )
    if args.reverse is None:
        return align_pairs(translator, sources, targets, forward_settings), None
    other = argparse.Namespace(checkpoint=args.reverse, device=args.device, plugins=args.plugins)
    reverse = load_translator(other, PROGRAM)
    if reverse is None:
        return None
    method = args.symmetrise or DEFAULT_SYMMETRISATION
    reverse_settings = model_settings(args, settings, reverse, args.reverse, notes)
    links = symmetric_pairs(
        translator, reverse, sources, targets, method, forward_settings, reverse_settings
    )
    return links, None if gold is None else corpus_counts(links, gold)


def model_settings(
    args: argparse.Namespace,
    settings: AlignSettings,
    translator,
    path: Path,
    notes: list[str],
) -> AlignSettings:
    """`settings` when the user named a layer or a head; else the checkpoint's own default
    (its alignment layer unless --attention, its guided head, the head chosen on the valid
    gold, or the last layer's head mean: `seq2seq.align.defaults`) with the user's
    extraction, noted for stderr."""
    if args.layer is not None or args.head is not UNSET:
        return settings
    found = default_settings(translator, use_layer=not args.attention)
    notes.append(f"{PROGRAM}: {path}: aligned with {found.description}")
    return replace(found.settings, extract=settings.extract, threshold=settings.threshold)


def align_with_checkpoint(args: argparse.Namespace, settings: AlignSettings) -> int:
    """Links of --src and --tgt from the checkpoint's attention (and --reverse's); scored
    with --gold. The settings each model used, when the user named none, are said on
    stderr once the links are written (an error stays one line)."""
    sources, targets, gold = read_inputs(args)
    notes: list[str] = []
    found = checkpoint_links(args, settings, sources, targets, gold, notes)
    if found is None:
        return 2
    links, counts = found
    if args.output is not None and not write_output(args.output, links):
        return 2
    if args.output is None and gold is None:
        write_links(sys.stdout, links)
    if counts is not None:
        report(counts, args.json)
    for note in notes:
        print(note, file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = mode_problem(args)
    if problem is not None:
        parser.error(problem)
    check_output_files(parser, ("--output", args.output))
    try:
        settings = AlignSettings(
            -1 if args.layer is None else args.layer,
            None if args.head is UNSET else args.head,
            args.extract,
            args.threshold,
        )
    except ValueError as error:
        parser.error(str(error))
    try:
        return score_file(args) if args.score is not None else align_with_checkpoint(args, settings)
    except InputError as error:
        parser.error(str(error))
    except AlignmentError as error:
        print(f"{PROGRAM}: {one_line(error)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
