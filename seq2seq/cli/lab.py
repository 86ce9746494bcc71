"""`seq2seq-lab`: run the attention lab's experiments (`seq2seq.lab`).

    seq2seq-lab --list                      # the experiments and their claims
    seq2seq-lab vanishing_gradients         # one experiment at its default size
    seq2seq-lab all --out docs/lab          # every experiment (make lab)
    seq2seq-lab masks --quick               # the seconds-sized version the tests run
    seq2seq-lab --pages --out docs/lab      # the pages again from the records, nothing run

Each experiment writes its figures and `finding.json` into OUT/NAME/ and its pages to
OUT/NAME.md and OUT/NAME.zh.md (Chinese), prints what it found, and `OUT/index.md` (and
`index.zh.md`) lists every finding so far. `--pages` writes every page and the indexes
again from the records in OUT, running nothing (after a change to an experiment's texts). Trained
models are kept in --runs and reused by later calls and by other experiments. In a terminal
or a notebook a progress bar on stderr counts the experiments done, with the time left
(`--no-progress`, or `SEQ2SEQ_PROGRESS=0`, turns it and the runs' data bars off). Exit code 0
when every experiment ran, 1 when one failed (the others still run), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from seq2seq.cli.checked_options import OneLineParser, device_or_auto, seed, threads_or_all, whole
from seq2seq.cli.common import one_line
from seq2seq.lab.catalogue import experiments
from seq2seq.lab.experiment import Experiment, LabContext
from seq2seq.lab.page import (
    LabRun,
    Machine,
    rewrite_pages,
    this_machine,
    write_index,
    write_page,
)
from seq2seq.output_folders import OutputPlaceError, check_output_place, place_error
from seq2seq.plugins import PluginError, import_plugins
from seq2seq.progress_bars import NO_PROGRESS_HELP, progress_bar, switch_off_in

log = logging.getLogger("seq2seq.lab")
MAX_STEPS = 10**9  # --max-steps: a smoke test's bound, far beyond any experiment


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="seq2seq-lab", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="experiments to run, or `all`")
    parser.add_argument("--list", action="store_true", help="list the experiments and stop")
    parser.add_argument("--pages", action="store_true",
                        help="write the pages (English and Chinese) and indexes of --out again "
                        "from their records; nothing runs")  # fmt: skip
    parser.add_argument("--quick", action="store_true",
                        help="the seconds-sized version (toy data, a few updates)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=None,
                        help="pages and figures (default: outputs/lab, or outputs/lab-quick)")  # fmt: skip
    parser.add_argument("--runs", type=Path, default=None,
                        help="trained models, reused (default: outputs/lab/runs, or "
                        "outputs/lab-quick/runs)")  # fmt: skip
    parser.add_argument(
        "--data-root", type=Path, default=Path("data"), help="data.root of the runs"
    )
    parser.add_argument("--seed", type=seed, default=1234, help="the first training seed")
    parser.add_argument("--device", type=device_or_auto, default="cpu",
                        help="cpu, cuda, cuda:N or auto")  # fmt: skip
    parser.add_argument("--threads", type=threads_or_all, default=0,
                        help="torch threads; 0 = all cores")  # fmt: skip
    parser.add_argument("--max-steps", type=whole(1, MAX_STEPS), default=None, metavar="N",
                        help="a smoke test of the default size: every training run stops "
                        "after N updates (the figures then mean nothing)")  # fmt: skip
    parser.add_argument("--plugins", action="append", default=[], metavar="SPEC",
                        help="import this plugin first: its scores and regions join the "
                        "experiments that range over them; repeatable")  # fmt: skip
    parser.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)
    return parser


def chosen(parser: argparse.ArgumentParser, names: Sequence[str]) -> list[Experiment]:
    known = experiments()
    if not names:
        parser.error("name an experiment (or `all`); `seq2seq-lab --list` lists them")
    if list(names) == ["all"]:
        return list(known.values())
    unknown = [name for name in names if name not in known]
    if unknown:
        parser.error(f"no experiment {', '.join(unknown)}; the experiments: {', '.join(known)}")
    return [known[name] for name in names]


def listing() -> str:
    return "\n".join(f"{e.name:<22} {e.title}" for e in experiments().values())


def run_one(
    experiment: Experiment, context: LabContext, out_root: Path, machine: Machine, bar: Any
) -> bool:
    """Run one experiment, print its finding and write its page; False if it failed. What
    it prints goes past `bar` (the lab's progress bar, cleared and drawn again around it)."""
    with bar.external_write_mode():
        print(f"== {experiment.name}: {experiment.title}", flush=True)
    started = time.perf_counter()
    try:
        finding = experiment.run(context)
    except Exception as error:  # one experiment's failure must not stop the others
        log.debug("%s", traceback.format_exc())
        with bar.external_write_mode():
            print(f"seq2seq-lab: {experiment.name} failed: {one_line(error)}", file=sys.stderr)
        return False
    seconds = time.perf_counter() - started
    run = LabRun(experiment, finding, seconds, machine, context.quick, tuple(context.models))
    try:
        page = write_page(out_root, run)
    except OSError as error:
        with bar.external_write_mode():
            print(f"seq2seq-lab: {one_line(place_error(error, out_root))}", file=sys.stderr)
        return False
    except (KeyError, TypeError, ValueError) as error:  # the record and English page are written
        with bar.external_write_mode():
            print(f"seq2seq-lab: {experiment.name}: its Chinese page was not written: "
                  f"{one_line(error)}", file=sys.stderr)  # fmt: skip
        return False
    with bar.external_write_mode():
        print(finding.summary.strip())
        print(f"({seconds:.1f} s; figures in {context.out_dir}, page {page})\n", flush=True)
    return True


def pages_again(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """`--pages`: the pages of every recorded experiment in --out, written again."""
    if args.names:
        parser.error("--pages rewrites every page of --out: name no experiment")
    out_root = args.out or Path("outputs/lab-quick" if args.quick else "outputs/lab")
    if not out_root.is_dir():
        parser.error(f"--pages: {out_root} is not a folder of lab pages (--out)")
    try:
        pages = rewrite_pages(out_root, list(experiments().values()))
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"seq2seq-lab: --pages: {one_line(error)}", file=sys.stderr)
        sys.exit(1)
    print(f"{len(pages)} experiments' pages written again in {out_root}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list:
        print(listing())
        return
    if args.pages:
        pages_again(parser, args)
        return
    if args.threads < 0:
        parser.error(f"--threads must be at least 0, got {args.threads}")
    if args.max_steps is not None and args.max_steps < 1:
        parser.error(f"--max-steps must be at least 1, got {args.max_steps}")
    selected = chosen(parser, args.names)
    try:
        import_plugins(args.plugins)
    except PluginError as error:
        parser.error(one_line(error))
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    outputs = Path("outputs/lab-quick" if args.quick else "outputs/lab")
    out_root, runs = args.out or outputs, args.runs or outputs / "runs"
    for place in (out_root, runs):  # before any experiment runs, not after hours of them
        try:
            check_output_place(place)
        except OutputPlaceError as error:
            parser.error(one_line(error))
    machine = this_machine(args.threads)
    if args.no_progress:
        switch_off_in(os.environ)  # the bars of the runs' downloads and corpus reading too
    ok = True
    with progress_bar(len(selected), unit="experiment", enabled=not args.no_progress) as bar:
        for experiment in selected:
            bar.set_description(experiment.name)
            context = LabContext(
                out_dir=out_root / experiment.name, runs_dir=runs, data_root=args.data_root,
                quick=args.quick, seed=args.seed, device=args.device, threads=args.threads,
                max_steps=args.max_steps,
            )  # fmt: skip
            ok &= run_one(experiment, context, out_root, machine, bar)
            bar.update()
    try:
        write_index(out_root, list(experiments().values()))
    except OSError as error:
        print(f"seq2seq-lab: {one_line(place_error(error, out_root))}", file=sys.stderr)
        ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
