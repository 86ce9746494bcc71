"""The helpers the command lines share: one-line errors, the search and plugin options, the
checkpoint loaded as a translator, and input files read as UTF-8 lines.

* `one_line`: an error's message on one line, as every command prints it.
* `search_arguments`, `checked_settings`: the checkpoint argument, one option per
  `SearchSettings` field (`--beam-size`, ...), `--device`, `--quantization` and `--plugins`
  (`seq2seq-translate`, `seq2seq-evaluate`, `seq2seq-serve`); `plugin_argument` alone
  (`seq2seq-align`, `seq2seq-export`).
* `load_translator`: the plugins imported and the checkpoint loaded, or one error line.
* `read_text_lines`: the lines of a UTF-8 input file, each bounded in length; `InputError`
  names the option, the file and the line (or the encoding of UTF-16 or UTF-32 text).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Collection, Iterable, Iterator
from dataclasses import fields
from pathlib import Path
from typing import get_type_hints

from seq2seq.checkpoint import CheckpointError
from seq2seq.cli.checked_options import device
from seq2seq.config.build import ConfigError
from seq2seq.config.search_settings import SearchSettings, SearchSettingsError
from seq2seq.files import opened_for_reading
from seq2seq.plugins import PluginError, import_plugins
from seq2seq.quantization import QUANTIZATIONS, QuantizationError
from seq2seq.search.translator import Translator
from seq2seq.text_encoding import TextEncodingError, check_stream

MAX_INPUT_LINE = 1 << 20  # bytes of one input line (a sentence is a few hundred at most)


class InputError(ValueError):
    """An input file that cannot be read as UTF-8 text; the message names file and line."""


def one_line(error: Exception) -> str:
    """An error message on one line (a multi-line cause joined with '; ')."""
    return "; ".join(line.strip() for line in str(error).splitlines() if line.strip())


def search_arguments(parser: argparse.ArgumentParser, omit: Collection[str] = ()) -> None:
    """Options shared by seq2seq-translate and seq2seq-evaluate: the checkpoint, one option
    per `SearchSettings` field not in `omit` (`--beam-size` for `beam_size`, with the field's
    type, default and help) and `--device`."""
    parser.add_argument("checkpoint", type=Path, help="a .pt checkpoint written by seq2seq-train")
    types = get_type_hints(SearchSettings)
    for setting in fields(SearchSettings):
        if setting.name not in omit:
            parser.add_argument(
                option_name(setting.name),
                type=types[setting.name],
                default=setting.default,
                help=f"{setting.metadata['help']} (default %(default)s)",
            )
    parser.add_argument("--device", type=device, default="cpu", help="cpu, cuda, cuda:N")
    parser.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        help="weights to decode with: int8 quantises a checkpoint's linear and recurrent "
        "layers dynamically (CPU only) or runs an export in int8 (default: float32 for a "
        "checkpoint, the precision an export was written in)",
    )
    plugin_argument(parser)


def plugin_argument(parser: argparse.ArgumentParser) -> None:
    """`--plugins SPEC`, once per plugin: what a checkpoint trained with plugins needs."""
    parser.add_argument(
        "--plugins",
        action="append",
        default=[],
        metavar="SPEC",
        help="import a plugin before loading (a module name, a .py file or a folder; repeat "
        "for several): a checkpoint trained with plugins loads only with the same ones",
    )


def option_name(setting: str) -> str:
    """The command-line option of a `SearchSettings` field: `beam_size` → `--beam-size`."""
    return "--" + setting.replace("_", "-")


def checked_settings(parser: argparse.ArgumentParser, args: argparse.Namespace) -> SearchSettings:
    """The search settings of the options, or one error line and exit code 2 (`--device`
    is checked while parsing, `seq2seq.cli.checked_options.device`)."""
    try:
        return settings_from(args)
    except SearchSettingsError as error:
        parser.error(f"{option_name(error.field)} {error.problem}")


def settings_from(args: argparse.Namespace) -> SearchSettings:
    """`SearchSettings` of the parsed options; a field without an option keeps its default."""
    options = vars(args)
    names = [setting.name for setting in fields(SearchSettings)]
    return SearchSettings(**{name: options[name] for name in names if name in options})


def load_translator(args: argparse.Namespace, program: str) -> Translator | None:
    """Set up logging, import the --plugins (relative to the current folder) and load the
    checkpoint; None (after one error line) if it fails."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        import_plugins(getattr(args, "plugins", None) or [])
        quantization = getattr(args, "quantization", None) or "float32"  # seq2seq-align: none
        return Translator.load(args.checkpoint, args.device, quantization)
    except (CheckpointError, ConfigError, PluginError, QuantizationError) as error:
        print(f"{program}: {one_line(error)}", file=sys.stderr)
        return None


def read_text_lines(path: Path, option: str) -> list[str]:
    """The lines of a UTF-8 file; InputError naming the option, the file and the line (or
    the encoding of a UTF-16 or UTF-32 file)."""
    try:
        with opened_for_reading(path) as handle:  # a silent FIFO is refused, not waited on
            return decode_lines(handle, str(path))
    except OSError as error:
        raise InputError(f"{option} {path}: {error.strerror or error}") from error


def decode_lines(raw: Iterable[bytes], name: str) -> list[str]:
    """UTF-8 lines without their line ends (a UTF-8 byte-order mark dropped); InputError
    naming the first undecodable line. A buffered stream's start is checked first: UTF-16 or
    UTF-32 text is one InputError naming its encoding (`seq2seq.text_encoding`)."""
    try:
        skip = check_stream(raw, name)
    except TextEncodingError as error:
        raise InputError(str(error)) from error
    lines = []
    for number, line in enumerate(bounded_lines(raw, name), 1):
        try:
            lines.append(line[skip if number == 1 else 0 :].decode("utf-8").rstrip("\r\n"))
        except UnicodeDecodeError as error:
            raise InputError(f"{name} line {number}: not valid UTF-8 ({error.reason})") from error
    return lines


def bounded_lines(raw: Iterable[bytes], name: str) -> Iterator[bytes]:
    """The lines of a stream, each read at most `MAX_INPUT_LINE` + 1 bytes at a time: a
    longer one (a binary file, 10 GB of zeros, a file without line ends) is InputError
    naming it, never held whole. Any other iterable of lines is passed through."""
    readline = getattr(raw, "readline", None)
    if readline is None:
        yield from raw
        return
    number = 0
    while line := readline(MAX_INPUT_LINE + 1):
        number += 1
        if len(line) > MAX_INPUT_LINE:
            raise InputError(
                f"{name} line {number}: longer than {MAX_INPUT_LINE:,} bytes "
                "(a sentence a line is expected; is it a text file?)"
            )
        yield line
