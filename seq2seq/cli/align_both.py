"""`seq2seq-align-both`: the symmetrised word links of two models of opposite directions.

Both models are trained here or reused, and the links are scored on the gold pairs.

    seq2seq-align-both runs/both --train                    # make train's recipe, zh→en and en→zh
    seq2seq-align-both runs/both --train trainer.max_steps=600 --symmetrise grow-diag-final-and
    seq2seq-align-both runs/both                            # align with the models already there
    seq2seq-align-both runs/both --src my.zh --tgt my.en [--gold my.align] [-o my.align]
    seq2seq-align-both runs/both data=tatoeba_en_zh         # en→zh the forward direction

OUT_DIR holds one run folder per direction, named by its languages: OUT_DIR/zh_en and
OUT_DIR/en_zh. With --train each missing model is trained as `seq2seq-train OVERRIDE ...
hydra.run.dir=OUT_DIR/<src>_<tgt> trainer.resume=auto` trains it, through that command's own
entry in this process (`seq2seq.cli.train.main`: its checks, Hydra's composition, run
folder, `.hydra/` record and log), with `+experiment=default_cpu` first unless the overrides
name an experiment. The forward direction takes the data preset the overrides compose (the
experiment's when they name none: tatoeba_zh_en); the reverse direction the preset of the
other direction, found by its name (`<corpus>_<src>_<tgt>` ↔ `<corpus>_<tgt>_<src>`:
tatoeba_zh_en ↔ tatoeba_en_zh), with the same other overrides. A direction whose
`checkpoints/best.pt` is there is not trained again (said on stderr), unless its run stopped
before the end (`last.pt` without `results.json`): that run goes on. Without --train both
`best.pt` must be there; OUT_DIR/<src>_<tgt>/checkpoints/best.pt may be any checkpoint of
that direction.

The links are those of --src and --tgt when given, else of the forward direction's test
split (prepared from the data config the overrides compose, its tokenisers checked against
the checkpoint's): one Pharaoh line per pair, source word - target word of the forward
direction from 0, written to -o (default OUT_DIR/test.<method>.align, for --src my.zh
OUT_DIR/my.zh.<method>.align). Each model reads with its
own default (`seq2seq.align.defaults`: its alignment layer, else its guided or chosen head,
else the last layer's head mean; --attention: never the layer), or with --layer L and
--head H (index or mean) both read that layer and head of their translation attention, as
`seq2seq-align --layer --head` does (the row for the comparison names them); the two are combined
by --symmetrise as `seq2seq-align FORWARD.pt --reverse REVERSE.pt --symmetrise METHOD`
combines them (`seq2seq.align.symmetric`; default harmonic, the lowest AER on the valid
gold; grow-diag-final-and and the others are options).

Scores: with --gold, of the links of --src and --tgt; without --src, on the hand-aligned
gold test pairs of the language pair when it has some (`seq2seq.align.gold`: 200 zh–en
pairs): precision, recall and AER on stdout (--json: as JSON; the training's log and
everything else go to stderr, so stdout holds the scores alone), and a row for the
comparison in OUT_DIR/test.<method>.aer.json (`make compare
BASELINE_AER=OUT_DIR/test.<method>.aer.json`, the format of `seq2seq.study.aer_rows`).

--rounds R refines the links R times, as Zenkel et al. 2020 train their alignment layer again
on its own symmetrised links (guided alignment training) and Chen et al. 2020 refine theirs:
round r's two models, in OUT_DIR/round<r>/<src>_<tgt>, are trained as round 0's are, guided
(`alignment.training=guided` for a layer) by the links round r − 1's two models give the
kept training pairs, symmetrised and extracted as the final links are (--symmetrise,
--extract, --threshold). Those links are written first, in each direction's own order, to
OUT_DIR/round<r>/train.<src>_<tgt>.align (`data.alignments` of that direction: one line per
line of the prepared train.<src>, empty for a pair data.max_len drops). The overrides must
train an alignment (`alignment=layer` or `alignment=guided`): round 0 as they say (eflomal's
links, or the model's own attention with `alignment.training=unsupervised`), the later
rounds on the links. Each round's links are scored on the hand-aligned valid pairs (stderr);
the last round's models make the links and scores above. A round whose links file is there
is not aligned again; its models are reused or go on as round 0's are.

Every problem with the options, OUT_DIR, the files or a checkpoint is one line on stderr
and exit code 2, before any training where it can be known then; a training that fails
ends the command with seq2seq-train's exit code. Nothing the command did not write is
removed or overwritten. Overrides that would make the two directions share or swap what
they must not (`data.src_lang`, `data.tgt_lang`, `data.name`, `data.alignments`,
`hydra.run.dir`, `trainer.resume`) are refused.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from hydra import compose, initialize_config_module
from hydra.errors import HydraException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from seq2seq.align.extract import EXTRACTIONS, AlignmentError, AlignSettings
from seq2seq.align.gold import has_gold_set
from seq2seq.align.pharaoh import Links
from seq2seq.align.symmetric import (
    DEFAULT_SYMMETRISATION,
    SYMMETRISATIONS,
    symmetric_gold_counts,
    symmetric_pairs,
)
from seq2seq.checkpoint import CheckpointError
from seq2seq.cli import align, train
from seq2seq.cli.checked_options import OneLineParser, device, whole
from seq2seq.cli.common import InputError, load_translator, one_line, plugin_argument
from seq2seq.cli.hydra_places import hydra_message
from seq2seq.config.build import ConfigError
from seq2seq.config.schema import register_configs
from seq2seq.configs import preset_names
from seq2seq.data.corpus import CorpusError
from seq2seq.data.fetch import FetchError
from seq2seq.data.links import stored_rows
from seq2seq.data.prepare import PreparedData, prepare
from seq2seq.metrics.aer import AlignmentCounts, corpus_counts
from seq2seq.output_folders import (
    OutputPlaceError,
    check_output_file,
    check_output_place,
    write_output_file,
)
from seq2seq.runs.assemble import data_config
from seq2seq.runs.folder import RESULTS_NAME, RUN_FOLDER_MARKS
from seq2seq.search.translator import Translator

PROGRAM = "seq2seq-align-both"
DEFAULT_EXPERIMENT = "+experiment=default_cpu"  # make train's recipe
BEST, LAST = Path("checkpoints/best.pt"), Path("checkpoints/last.pt")
# Overrides the command sets itself, or that would make both directions share or swap them
REFUSED_KEYS = ("data.src_lang", "data.tgt_lang", "data.name", "data.alignments",
                "hydra.run.dir", "trainer.resume")  # fmt: skip
ROUND = "round"  # OUT_DIR/round<r>: the models of refinement round r ≥ 1
MAX_ROUNDS = 20  # each round trains two models
OUTPUT_SUFFIXES = (".align", ".json")  # the files this command writes into OUT_DIR


class BothError(ValueError):
    """Bad input to the command; the message names the option, override or path."""


class Stopped(Exception):
    """The command stops with `code`, its reason already said on stderr."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@dataclass(frozen=True)
class Direction:
    """One direction of the pair: its composed training config, its overrides as
    seq2seq-train takes them, and its run folder OUT_DIR/<src>_<tgt>."""

    config: DictConfig
    overrides: list[str]
    run_dir: Path

    @property
    def languages(self) -> tuple[str, str]:
        return str(self.config.data.src_lang), str(self.config.data.tgt_lang)

    @property
    def checkpoint(self) -> Path:
        return self.run_dir / BEST


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROGRAM, description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR",
                        help="the two run folders (<src>_<tgt>) and the links go here")  # fmt: skip
    parser.add_argument("overrides", nargs="*", metavar="OVERRIDE",
                        help="seq2seq-train's overrides, for both directions")  # fmt: skip
    parser.add_argument("--train", action="store_true",
                        help="train the directions whose checkpoints/best.pt is missing")  # fmt: skip
    parser.add_argument("--rounds", type=whole(0, MAX_ROUNDS), default=0, metavar="R",
                        help="refine R times: train both directions again on the symmetrised "
                        "links of the round before (with --train; default 0)")  # fmt: skip
    parser.add_argument("--src", type=Path, help="source sentences (default: the test split)")
    parser.add_argument("--tgt", type=Path, help="their translations, one per line")
    parser.add_argument("--gold", type=Path, help="gold links of --src and --tgt")
    parser.add_argument("--one-based", action="store_true", help="the gold file counts from 1")
    parser.add_argument(
        "--symmetrise",
        choices=SYMMETRISATIONS,
        default=DEFAULT_SYMMETRISATION,
        metavar="METHOD",
        help=f"{', '.join(SYMMETRISATIONS)} (default {DEFAULT_SYMMETRISATION}, the best on "
        "the valid gold)",
    )
    parser.add_argument("--extract", choices=EXTRACTIONS, default="argmax", help="default argmax")
    parser.add_argument("--threshold", type=float, default=0.3, help="for --extract threshold")
    parser.add_argument("--attention", action="store_true",
                        help="read the translation attention even when a model has an "
                        "alignment layer (as --layer or --head do)")  # fmt: skip
    parser.add_argument("--layer", type=int, default=None,
                        help="the translation attention's layer of both models, from 0, "
                        "negative from the end (default: each model's own reading)")  # fmt: skip
    parser.add_argument("--head", type=align.head_choice, default=align.UNSET,
                        help="head index or mean, of both models (default: each model's own "
                        "reading)")  # fmt: skip
    parser.add_argument("-o", "--output", type=Path,
                        help="the links file (default OUT_DIR/test.<method>.align, or "
                        "OUT_DIR/<--src name>.<method>.align)")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")
    parser.add_argument("--device", type=device, default="cpu", help="cpu, cuda, cuda:N")
    plugin_argument(parser)
    return parser


def reading(args: argparse.Namespace) -> AlignSettings:
    """The reading --layer, --head, --extract and --threshold give (ValueError naming a bad
    one): used by both models when --layer or --head is given, else each model's own
    default with the extraction (`seq2seq.cli.align.model_settings`)."""
    return AlignSettings(
        -1 if args.layer is None else args.layer,
        None if args.head is align.UNSET else args.head,
        args.extract,
        args.threshold,
    )


def reading_name(args: argparse.Namespace) -> str:
    """`, layer L head H` for the row of a reading the user named; empty for the defaults."""
    if args.layer is None and args.head is align.UNSET:
        return ""
    settings = reading(args)
    head = "mean" if settings.head is None else settings.head
    return f", layer {settings.layer} head {head}"


def options_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the combination of options or an override, or None."""
    if (args.src is None) != (args.tgt is None):
        return "--src and --tgt go together"
    if args.gold is not None and args.src is None:
        return "--gold scores the links of --src and --tgt: give them too"
    if args.rounds and not args.train:
        return "--rounds trains a model of each direction per round: add --train"
    for override in args.overrides:
        key = override_key(override)
        if key in REFUSED_KEYS:
            return (f"{override}: {key} is set by this command for each direction "
                    "(OUT_DIR/<src>_<tgt>, from the data presets); leave it out")  # fmt: skip
    return None


def override_key(override: str) -> str:
    """The key an override sets: `data` of `data=x`, `+data=x` and `++data=x`."""
    return override.partition("=")[0].lstrip("+~")


# ---------------------------------------------------------------- the two directions


def composed(overrides: list[str]) -> DictConfig:
    """The training config of seq2seq-train's `overrides`, Hydra's choices included
    (`hydra.runtime.choices`); BothError with Hydra's message in one line."""
    register_configs()
    try:
        with initialize_config_module(config_module="seq2seq.configs", version_base="1.3"):
            return compose(config_name="train", overrides=overrides, return_hydra_config=True)
    except (HydraException, OmegaConfBaseException) as error:
        raise BothError(hydra_message(error)) from None


def reverse_preset(preset: str, source: str, target: str) -> str:
    """The data preset of the other direction, by name: `<corpus>_<src>_<tgt>` →
    `<corpus>_<tgt>_<src>` (tatoeba_zh_en → tatoeba_en_zh); BothError when there is none."""
    suffix = f"_{source}_{target}"
    name = preset.removesuffix(suffix) + f"_{target}_{source}"
    if not preset.endswith(suffix) or name not in preset_names("data"):
        raise BothError(
            f"data={preset}: no data preset of the other direction ({target}→{source}); "
            f"this command finds it by name, <corpus>_{source}_{target} ↔ "
            f"<corpus>_{target}_{source} (configs/data/)"
        )
    return name


def directions(
    out_dir: Path, overrides: list[str], links: tuple[Path, Path] | None = None
) -> tuple[Direction, Direction]:
    """The forward direction (the overrides, after `+experiment=default_cpu` unless they name
    an experiment) and the reverse (the same with the other direction's data preset). With
    `links` (a refinement round's files, forward and reverse), each direction is guided by
    its own file (`round_overrides`)."""
    given = list(overrides)
    if not any(override_key(override) == "experiment" for override in given):
        given.insert(0, DEFAULT_EXPERIMENT)
    forward = composed(given)
    source, target = str(forward.data.src_lang), str(forward.data.tgt_lang)
    preset = reverse_preset(str(forward.hydra.runtime.choices.data), source, target)
    others = [override for override in given if override_key(override) != "data"]
    reverse_overrides = [*others, f"data={preset}"]
    if links is not None:
        given = [*given, *round_overrides(forward, links[0])]
        reverse_overrides = [*reverse_overrides, *round_overrides(forward, links[1])]
        forward = composed(given)
    reverse = composed(reverse_overrides)
    found = (str(reverse.data.src_lang), str(reverse.data.tgt_lang))
    if found != (target, source):
        raise BothError(f"data={preset} translates {found[0]}→{found[1]}, not {target}→{source}")
    return (
        Direction(forward, given, out_dir / f"{source}_{target}"),
        Direction(reverse, reverse_overrides, out_dir / f"{target}_{source}"),
    )


def round_overrides(config: DictConfig, links: Path) -> list[str]:
    """What a refinement round adds to the overrides of round 0 (composed as `config`): the
    links file, and guided training for an alignment layer trained unsupervised at round 0;
    BothError when the overrides train no alignment to guide."""
    alignment = config.get("alignment") or {}
    if not (alignment.get("separate") or alignment.get("guided")):
        raise BothError(
            "--rounds trains each round on the links of the round before, through "
            "alignment=layer or alignment=guided: add one of them to the overrides"
        )
    extra = [f"data.alignments={hydra_string(links)}"]
    training = alignment.get("training")
    if alignment.get("separate") and getattr(training, "name", training) != "guided":
        extra.append("alignment.training=guided")
    return extra


def all_rounds(args: argparse.Namespace) -> list[tuple[Direction, Direction]]:
    """The two directions of round 0 (OUT_DIR/<src>_<tgt>) and of each refinement round
    (OUT_DIR/round<r>/<src>_<tgt>, guided by OUT_DIR/round<r>/train.<src>_<tgt>.align)."""
    pair = directions(args.out_dir, args.overrides)
    found = [pair]
    for number in range(1, args.rounds + 1):
        folder = args.out_dir / f"{ROUND}{number}"
        links = tuple(links_file(folder / d.run_dir.name) for d in pair)
        found.append(directions(folder, args.overrides, links))  # type: ignore[arg-type]
    return found


# ---------------------------------------------------------------- OUT_DIR


def check_out_dirs(rounds: Sequence[tuple[Direction, Direction]]) -> None:
    """OUT_DIR and each round's folder in it, checked by `check_out_dir`."""
    folders = [pair[0].run_dir.parent for pair in rounds]
    for number, pair in enumerate(rounds):
        check_out_dir(
            folders[number], [d.run_dir for d in pair], folders[1:] if number == 0 else ()
        )


def check_out_dir(out_dir: Path, folders: Sequence[Path], rounds: Sequence[Path] = ()) -> None:
    """OUT_DIR (or a round's folder) must be a folder that can be written, holding nothing
    but the two run folders, the `rounds`' folders and files this command writes
    (`OUTPUT_SUFFIXES`); each run folder, when it holds anything, a checkpoint or a run's
    marks. BothError naming the path otherwise."""
    try:
        check_output_place(out_dir)
    except OutputPlaceError as error:
        raise BothError(f"OUT_DIR {error}") from None
    if not out_dir.is_dir():
        return
    names = {folder.name for folder in (*folders, *rounds)}
    for entry in sorted(out_dir.iterdir()):
        ours = (
            entry.is_dir()
            if entry.name in names
            else (entry.is_file() and entry.suffix in OUTPUT_SUFFIXES)
        )
        if not ours or entry.is_symlink():
            raise BothError(
                f"OUT_DIR {out_dir} holds {entry.name}, which this command does not write: "
                "give a new or empty folder, or one it wrote"
            )
    for folder in folders:
        if folder.is_dir() and any(folder.iterdir()) and not is_run_folder(folder):
            raise BothError(
                f"{folder} holds files but neither {BEST} nor a run's "
                f"{', '.join(RUN_FOLDER_MARKS)}: give another OUT_DIR"
            )


def is_run_folder(folder: Path) -> bool:
    """A folder a run wrote, or that holds a checkpoint to use."""
    return (folder / BEST).is_file() or any((folder / m).is_file() for m in RUN_FOLDER_MARKS)


def unfinished(direction: Direction) -> bool:
    """A run stopped before its end: `last.pt` without `results.json`, which goes on."""
    run_dir = direction.run_dir
    return (run_dir / LAST).is_file() and not (run_dir / RESULTS_NAME).is_file()


def to_train(pair: Sequence[Direction], training: bool) -> list[Direction]:
    """The directions to train (with --train, saying on stderr which are reused);
    BothError without --train when one has no checkpoint."""
    chosen = []
    for direction in pair:
        if direction.checkpoint.is_file() and not unfinished(direction):
            if training:
                say(f"{direction.run_dir}: {BEST} is there; not trained again")
        elif not training:
            raise BothError(f"{direction.checkpoint}: no checkpoint; add --train to train it")
        else:
            chosen.append(direction)
    return chosen


# ---------------------------------------------------------------- training


@contextmanager
def hydra_entry(argv: list[str]) -> Iterator[None]:
    """`sys.argv` as `argv` inside the block, as Hydra's entry reads its command line, and
    stdout sent to stderr (the training's log and closing lines: this command's stdout is
    its scores alone); the command line and the root logger (which Hydra's job logging
    points at the run's `train.log`) as they were afterwards."""
    saved, root = sys.argv, logging.getLogger()
    handlers, level = list(root.handlers), root.level
    sys.argv = argv
    try:
        with redirect_stdout(sys.stderr):
            yield
    finally:
        sys.argv = saved
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
            handler.close()
        for handler in [h for h in handlers if h not in root.handlers]:
            root.addHandler(handler)
        root.setLevel(level)


def hydra_string(path: Path) -> str:
    """`path` as a quoted value of a Hydra override (any character kept)."""
    return "'" + str(path).replace("\\", "\\\\").replace("'", "\\'") + "'"


def train_direction(direction: Direction) -> int:
    """seq2seq-train's exit code for `OVERRIDES hydra.run.dir=RUN_DIR trainer.resume=auto`,
    run in this process through the command's own entry (`seq2seq.cli.train.main`)."""
    doing = "continuing the stopped run" if unfinished(direction) else "training"
    say(f"{doing} {'→'.join(direction.languages)} in {direction.run_dir}")
    argv = [train.PROGRAM, *direction.overrides,
            f"hydra.run.dir={hydra_string(direction.run_dir)}", "trainer.resume=auto"]  # fmt: skip
    with hydra_entry(argv):
        try:
            train.main()
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
            if code != 0:
                return code
    if not direction.checkpoint.is_file():
        say(f"{direction.run_dir}: the run ended without {BEST}")
        return 2
    return 0


# ---------------------------------------------------------------- aligning


def loaded(args: argparse.Namespace, direction: Direction) -> Translator:
    """The direction's checkpoint, checked to translate its folder's languages."""
    translator = load_translator(
        argparse.Namespace(checkpoint=direction.checkpoint, device=args.device,
                           plugins=args.plugins), PROGRAM)  # fmt: skip
    if translator is None:
        raise Stopped(2)  # load_translator said why
    found = (translator.src_tokenizer.lang, translator.tgt_tokenizer.lang)
    if found != direction.languages:
        raise BothError(
            f"{direction.checkpoint} translates {found[0]}→{found[1]}; the "
            f"{direction.run_dir.name} direction must translate {'→'.join(direction.languages)}"
        )
    return translator


def prepared_test_pairs(
    direction: Direction, translator: Translator
) -> tuple[list[str], list[str]]:
    """The forward direction's test split (`prepared`)."""
    data = prepared(direction, translator)
    return list(data.test.src_lines), list(data.test.tgt_lines)


def prepared(direction: Direction, translator: Translator) -> PreparedData:
    """The direction's data, prepared from its composed data config, whose tokenisers must
    be the checkpoint's."""
    try:
        data = prepare(data_config(direction.config))
    except (ConfigError, FetchError, CorpusError, ValueError, OSError) as error:
        raise BothError(f"preparing the test split: {one_line(error)}") from None
    for side in ("src", "tgt"):
        prepared, stored = (getattr(one, f"{side}_tokenizer") for one in (data, translator))
        if prepared.to_bytes() != stored.to_bytes():
            raise BothError(
                f"{direction.checkpoint}: its {side} tokeniser is not the one the overrides' "
                f"data config prepares: give the overrides it was trained with"
            )
    return data


@dataclass(frozen=True)
class Aligner:
    """The two models and how each reads its attention, combined by `method`."""

    forward: Translator
    reverse: Translator
    forward_settings: AlignSettings
    reverse_settings: AlignSettings
    method: str

    def links(self, sources: Sequence[str], targets: Sequence[str]) -> list[Links]:
        return symmetric_pairs(self.forward, self.reverse, sources, targets, self.method,
                               self.forward_settings, self.reverse_settings)  # fmt: skip


def aligner(args: argparse.Namespace, pair: Sequence[Direction], notes: list[str]) -> Aligner:
    """Both checkpoints loaded, each with its own default reading (noted in `notes`), or
    both with --layer and --head."""
    settings = reading(args)
    models = [loaded(args, direction) for direction in pair]
    readings = [
        align.model_settings(args, settings, model, direction.checkpoint, notes)
        for model, direction in zip(models, pair, strict=True)
    ]
    return Aligner(*models, *readings, args.symmetrise)


def gold_counts(found: Aligner, part: str = "test") -> AlignmentCounts | None:
    """The counts of the symmetrised links of the gold pairs of `part`, None without any."""
    return symmetric_gold_counts(found.forward, found.reverse, found.method,
                                 found.forward_settings, found.reverse_settings, part)  # fmt: skip


def compare_row(
    counts: AlignmentCounts, pair: Sequence[Direction], method: str, read: str = ""
) -> str:
    """The row `seq2seq-compare` reads from a BASELINE_AER file (`seq2seq.study.aer_rows`);
    `read`: how the attention was read when the user named it (`reading_name`)."""
    name = f"symmetrised {method} ({' + '.join('→'.join(d.languages) for d in pair)}{read})"
    row = {"name": name, "test_aer": counts.aer, "precision": counts.precision,
           "recall": counts.recall}  # fmt: skip
    return json.dumps(row, ensure_ascii=False, indent=2) + "\n"


Inputs = tuple[list[str], list[str], list[Links] | None]  # --src, --tgt, --gold (None without)


def align_and_score(
    args: argparse.Namespace, pair: Sequence[Direction], inputs: Inputs | None, output: Path
) -> None:
    """Write the links of the pairs (`inputs`, else the test split) to `output`, and score
    them (with gold links) or the gold test pairs (module docstring)."""
    sources, targets, gold = inputs or (None, None, None)
    notes: list[str] = []
    found = aligner(args, pair, notes)
    if sources is None:
        sources, targets = prepared_test_pairs(pair[0], found.forward)
    links = found.links(sources, targets)
    if not align.write_output(output, links):
        raise Stopped(2)  # write_output said why
    say(f"{len(links)} pairs' links ({args.symmetrise}) written to {output}")
    counts = corpus_counts(links, gold) if gold is not None else None
    if inputs is None:
        counts = gold_counts(found)
        if counts is not None:
            row = args.out_dir / f"test.{args.symmetrise}.aer.json"
            read = reading_name(args) + (f", round {args.rounds}" if args.rounds else "")
            text = compare_row(counts, pair, args.symmetrise, read)
            write_output_file(row, text, "OUT_DIR")
            say(f"the gold test pairs' scores, for make compare BASELINE_AER=: {row}")
    if counts is not None:
        align.report(counts, args.json)
    for note in notes:
        say(note.removeprefix(f"{align.PROGRAM}: "))


def say(message: str) -> None:
    print(f"{PROGRAM}: {message}", file=sys.stderr)


def default_output(args: argparse.Namespace) -> Path:
    """OUT_DIR/test.<method>.align for the test split, OUT_DIR/<--src name>.<method>.align
    for given pairs."""
    pairs = "test" if args.src is None else args.src.name
    return args.out_dir / f"{pairs}.{args.symmetrise}.align"


def align_both(args: argparse.Namespace) -> int:
    """Check everything that can be checked, train what is missing round by round, align
    and score with the last round's models."""
    rounds = all_rounds(args)
    check_out_dirs(rounds)
    output = args.output or default_output(args)
    check_output_file(output, "--output")
    inputs = align.read_inputs(args) if args.src is not None else None  # before any training
    for number, pair in enumerate(rounds):
        missing = to_train(pair, args.train)
        if number > 0 and missing and not all(links_file(d.run_dir).is_file() for d in pair):
            write_training_links(args, rounds[number - 1], pair)
        for direction in missing:
            code = train_direction(direction)
            if code != 0:
                return code
        if args.rounds:
            say_valid_aer(args, pair, number)
    align_and_score(args, rounds[-1], inputs, output)
    return 0


# ---------------------------------------------------------------- refinement rounds


def links_file(run_dir: Path) -> Path:
    """The links the refinement round's direction in `run_dir` is guided by (its
    `data.alignments`): ROUND_FOLDER/train.<src>_<tgt>.align."""
    return run_dir.parent / f"train.{run_dir.name}.align"


def write_training_links(
    args: argparse.Namespace, before: Sequence[Direction], pair: Sequence[Direction]
) -> None:
    """The symmetrised links of the kept training pairs by the models of the round
    `before`, written for each direction of `pair` in its own order: forward (source word
    i, target word j) as `i-j`, reverse as `j-i`; an empty line for each pair data.max_len
    drops."""
    found = aligner(args, before, [])
    data = prepared(before[0], found.forward)
    rows, total = stored_rows(data.train)
    links = found.links(list(data.train.src_lines), list(data.train.tgt_lines))
    every = [Links()] * total
    for row, pair_links in zip(rows.tolist(), links, strict=True):
        every[row] = pair_links
    reverse = [Links.of((j, i) for i, j in one.sure) for one in every]
    pair[0].run_dir.parent.mkdir(parents=True, exist_ok=True)
    for direction, written in zip(pair, (every, reverse), strict=True):
        if not align.write_output(links_file(direction.run_dir), written):
            raise Stopped(2)  # write_output said why
    say(f"{len(links):,} training pairs' links ({args.symmetrise}, {args.extract}) of "
        f"{before[0].run_dir.parent} written for {pair[0].run_dir.parent}")  # fmt: skip


def say_valid_aer(args: argparse.Namespace, pair: Sequence[Direction], number: int) -> None:
    """Round `number`'s symmetrised links scored on the hand-aligned valid pairs, on
    stderr (the rounds are compared on valid, never on test)."""
    if not has_gold_set(*pair[0].languages):
        return
    counts = gold_counts(aligner(args, pair, []), "valid")
    if counts is None:
        return
    say(f"round {number}: AER {counts.aer:.3f} on the {counts.sentences} hand-aligned valid pairs "
        f"(precision {counts.precision:.3f}, recall {counts.recall:.3f})")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_intermixed_args(argv)
    problem = options_problem(args)
    if problem is not None:
        parser.error(problem)
    try:
        reading(args)
    except ValueError as error:
        parser.error(str(error))
    try:
        return align_both(args)
    except (BothError, InputError, OutputPlaceError) as error:
        parser.error(one_line(error))
    except (AlignmentError, CheckpointError) as error:
        print(f"{PROGRAM}: {one_line(error)}", file=sys.stderr)
        return 2
    except Stopped as stopped:
        return stopped.code


if __name__ == "__main__":
    sys.exit(main())
