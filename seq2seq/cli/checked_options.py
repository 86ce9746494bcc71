"""The checks of the command-line values every command shares, made while the options are
parsed, so that a bad value stops a command before it makes a folder, loads a model or
starts a thread.

Each check is an argparse `type=`: declaring `--threads` with `type=threads` is all a
command does, and a bad value is one line through `OneLineParser` with exit code 2:

    seq2seq-lab: error: argument --threads: must be an integer from 0 (all cores) to 8 (4 per
    core of this machine's 2), got '100000'

- `threads`, `threads_or_all`: a torch thread count, at most `THREADS_PER_CORE` per core of
  this machine (`seq2seq.config.value_checks.thread_limit`, which `trainer.threads` shares):
  `torch.set_num_threads(100000)` ends the process in a segmentation fault;
- `device`, `device_or_auto`: cpu, cuda or cuda:N, and CUDA only where it exists
  (`check_device`);
- `port`: 1 to 65535; `seed`: what numpy accepts (0 to 2^32 - 1); `count`: 1 to 10^9;
- `whole(low, high)`, `number(low, high)`: any other count or amount with a range.

Output files (`--html PAGE`, `-o FILE`, ...) are checked after parsing, before the work,
by `check_output_files` (`seq2seq.output_folders.check_output_file`).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import torch

from seq2seq.config.value_checks import MAX_SEED, threads_problem
from seq2seq.output_folders import OutputPlaceError, check_output_file

MAX_PORT = 65535
MAX_COUNT = 10**9  # `count`: above any number of steps, sentences or repetitions asked for


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr (no usage block), exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def check_device(name: str, *, auto: bool = False) -> str | None:
    """What is wrong with `--device NAME` on this machine, or None; `auto` (CUDA when there
    is a GPU, else the CPU) is accepted where the command says so."""
    if auto and name == "auto":
        return None
    names = "auto, cpu, cuda, cuda:N" if auto else "cpu, cuda, cuda:N"
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError, ValueError):
        return f"--device {name!r} is not a device name ({names})"
    if device.type == "cpu":
        return None
    if device.type != "cuda":
        return f"--device {name!r}: only cpu and cuda are supported"
    if not torch.cuda.is_available():
        return f"--device {name!r}: no CUDA device is available on this machine"
    if device.index is not None and device.index >= torch.cuda.device_count():
        return f"--device {name!r}: this machine has {torch.cuda.device_count()} CUDA device(s)"
    return None


def device(text: str) -> str:
    """`type=` of `--device`: cpu, cuda or cuda:N, present on this machine."""
    return _checked_device(text, auto=False)


def device_or_auto(text: str) -> str:
    """`type=` of a `--device` that also takes `auto`."""
    return _checked_device(text, auto=True)


def _checked_device(text: str, *, auto: bool) -> str:
    problem = check_device(text, auto=auto)
    if problem is not None:
        # argparse writes "argument --device: " before the message
        raise argparse.ArgumentTypeError(problem.removeprefix("--device "))
    return text


def threads(text: str) -> int:
    """`type=` of `--threads`: at least 1, at most `thread_limit()`."""
    return _thread_count(text, all_cores=False)


def threads_or_all(text: str) -> int:
    """`type=` of a `--threads` where 0 means every core (torch's default)."""
    return _thread_count(text, all_cores=True)


def _thread_count(text: str, *, all_cores: bool) -> int:
    value = _integer(text)
    problem = threads_problem(value, all_cores=all_cores)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{problem}, got {text!r}")
    return value


def whole(low: int, high: int) -> Callable[[str], int]:
    """`type=` of a whole number in [low, high]: `type=whole(1, 10**9)`."""

    def parse(text: str) -> int:
        value = _integer(text)
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"must be an integer from {low:,} to {high:,}, got {text!r}"
            )
        return value

    parse.__name__ = "integer"
    return parse


def number(low: float, high: float, *, low_open: bool = False) -> Callable[[str], float]:
    """`type=` of a finite number in [low, high] (`low_open`: (low, high])."""
    left = "(" if low_open else "["

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        too_low = value <= low if low_open else value < low
        if not math.isfinite(value) or too_low or value > high:
            raise argparse.ArgumentTypeError(
                f"must be a number in {left}{low:g}, {high:g}], got {text!r}"
            )
        return value

    parse.__name__ = "number"
    return parse


port = whole(1, MAX_PORT)
seed = whole(0, MAX_SEED)
count = whole(1, MAX_COUNT)  # steps, repetitions, sentences, pairs: anything counted


def _integer(text: str) -> int | None:
    """The whole number `text` writes (digits, an optional sign), else None."""
    try:
        return int(text.strip(), 10)
    except ValueError:
        return None


def check_output_files(parser: argparse.ArgumentParser, *outputs: tuple[str, Path | None]) -> None:
    """Each (option, path) output file given, checked before the work starts
    (`seq2seq.output_folders.check_output_file`); one error line and exit code 2 otherwise."""
    for option, path in outputs:
        if path is None:
            continue
        try:
            check_output_file(path, option)
        except OutputPlaceError as error:
            parser.error(str(error))
