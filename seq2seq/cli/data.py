"""`seq2seq-data [prepare] data=<name> [data.key=value ...]`: prepare a corpus, print its summary.

A thin Hydra shell over `seq2seq.data.prepare.prepare`; `prepare` is the default command,
so the word is optional. The config is `configs/data_only.yaml` with one `configs/data/*.yaml`
(installed as the package `seq2seq.configs`; add your own with `--config-dir DIR`).

`seq2seq-data synth PAIRS OUTPUT [--data NAME|FILE.yaml] [--root DIR]` writes a synthetic
corpus of PAIRS pairs built from a data config's corpus (`seq2seq.data.synth`: every pair
repeated with its copy number appended to both sides), to measure preparation at scale;
prepare it with `data.source.url=file://<OUTPUT> data.source.member="" data.source.sha256=null
data.name=...`.

`seq2seq-data verify data=<name> [data.name=... data.root=...]` reads every file of every
preparation recorded in `<root>/prepared/<name>/` whole and compares its sha256 with the
record (`seq2seq.data.record.verify_files`): what the cheaper check done at each start, a
size and a hash of sampled blocks, cannot see. It prints one line per record; a damaged
file is reported in one line naming it (exit code 2): the next preparation with
data.rebuild=true (the default) prepares it again. The corpus is not read.

A download and the reading of a corpus show a progress bar on stderr in a terminal or a
notebook, never in a pipe, a log or CI (`seq2seq.progress_bars`); `--no-progress` (any
place on the command line, any command) turns it off, as `SEQ2SEQ_PROGRESS=0` does.

Exit codes: 0 done; 2 an error about the input in one line, no traceback (exit code 2 as
`seq2seq-train`, the line on stderr as `seq2seq-evaluate`): a data config value, the corpus
file or its split, a download or a pinned hash, a vocabulary size the training text cannot
give, a damaged prepared file (with data.rebuild=false, or found by `verify`). A key Hydra
cannot compose (a misspelt one) is Hydra's own short error, exit code 1.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import hydra
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from seq2seq.cli.checked_options import OneLineParser, whole
from seq2seq.cli.hydra_places import check_config_folders, run_hydra_app
from seq2seq.config.data_presets import PresetError, data_preset, one_line
from seq2seq.config.schema import register_configs
from seq2seq.configs import SEARCH_PATH
from seq2seq.data.corpus import CorpusError
from seq2seq.data.fetch import FetchError, fetch, folder_lock
from seq2seq.data.prepare import prepare
from seq2seq.data.record import (
    OlderRecordError,
    PreparationRecord,
    read_record,
    stale_reasons,
    verify_files,
)
from seq2seq.data.settings import DataConfig
from seq2seq.data.synth import source_lines, write_synthetic
from seq2seq.output_folders import OutputPlaceError, check_output_file
from seq2seq.progress_bars import NO_PROGRESS_HELP, switch_off_in

COMMAND = "prepare"
SYNTH_COMMAND = "synth"
VERIFY_COMMAND = "verify"
NO_PROGRESS = "--no-progress"
PROGRAM = "seq2seq-data"
USER_ERROR_EXIT = 2
MAX_SYNTH_PAIRS = 10**9  # synth PAIRS: as many as the largest public parallel corpora hold
# Errors of prepare() about its input, reported in one line: the corpus file or its split
# (CorpusError, and the tokenizer's VocabularySizeError, a CorpusError), a download or a
# pinned hash (FetchError). A bad config value is caught in `data_config`.
PREPARE_ERRORS = (CorpusError, FetchError)


@hydra.main(version_base="1.3", config_path=SEARCH_PATH, config_name="data_only")
def prepare_app(cfg: DictConfig) -> None:
    data_cfg = data_config(cfg.data)
    try:
        prepared = prepare(data_cfg)
    except PREPARE_ERRORS as error:
        user_error(error)
    print(format_summary(prepared.summary, prepared.folder))


@hydra.main(version_base="1.3", config_path=SEARCH_PATH, config_name="data_only")
def verify_app(cfg: DictConfig) -> None:
    data_cfg = data_config(cfg.data)
    folder = Path(data_cfg.root) / "prepared" / data_cfg.name
    records = sorted(folder.glob("prepared_*.json"))
    if not records:
        user_error(FileNotFoundError(f"no preparation recorded in {folder}: nothing to verify"))
    damaged = []
    with folder_lock(folder):  # no preparation rewrites a file while it is read
        for path in records:
            line, found = verify_record(folder, path)
            print(line)
            damaged += found
    if damaged:
        user_error(
            ValueError(
                f"damaged prepared file{'s' if len(damaged) > 1 else ''}: {'; '.join(damaged)}; "
                "the next preparation with data.rebuild=true (the default) prepares "
                f"{'them' if len(damaged) > 1 else 'it'} again from the corpus"
            )
        )


def verify_record(folder: Path, path: Path) -> tuple[str, list[str]]:
    """The line `verify` prints for one record, and its damaged files as `path (reason)`."""
    started = time.perf_counter()
    try:
        record = read_record(path)
        stale = stale_reasons(folder, record)
    except OlderRecordError:
        return f"{path.name}: an older record without hashes; prepared again when used", []
    except (OSError, ValueError, TypeError) as error:
        return f"{path.name}: unreadable ({one_line(error)}); prepared again when used", []
    if stale:
        return f"{path.name}: stale ({stale}); prepared again when used", []
    found = [f"{folder / name} ({reason})" for name, reason in verify_files(folder, record)]
    seconds = time.perf_counter() - started
    files = f"{len(record.files)} files, {_distinct_bytes(folder, record) / 1e6:,.1f} MB"
    files += f" (hard links once), sha256 in {seconds:.3f} s"
    return f"{path.name}: {files}: {f'{len(found)} damaged' if found else 'intact'}", found


def _distinct_bytes(folder: Path, record: PreparationRecord) -> int:
    """The bytes of the recorded files, a file under two names (a hard link) counted once."""
    sizes = {}
    for name in record.files:
        try:
            status = (folder / name).stat()
        except OSError:
            continue
        sizes[status.st_dev, status.st_ino] = status.st_size
    return sum(sizes.values())


def data_config(node: DictConfig) -> DataConfig:
    """The composed `data` section as a checked DataConfig; a bad value is a user error
    (DataConfig's ValueError naming the key, or an interpolation OmegaConf cannot resolve)."""
    try:
        return DataConfig.from_mapping(OmegaConf.to_container(node, resolve=True))
    except (ValueError, OmegaConfBaseException) as error:
        user_error(error)


def user_error(error: Exception) -> NoReturn:
    """One line on stderr, then exit code 2: no traceback."""
    print(f"{PROGRAM}: {one_line(error)}", file=sys.stderr)
    raise SystemExit(USER_ERROR_EXIT) from error


def format_summary(summary: dict[str, Any], folder: Path | None = None) -> str:
    """The summary as a two-column table, keys written with spaces."""
    rows = [(key.replace("_", " "), _format_value(value)) for key, value in summary.items()]
    if folder is not None:
        rows.append(("folder", str(folder)))
    width = max(len(label) for label, _ in rows)
    rule = "-" * (width + 2 + max(len(value) for _, value in rows))
    lines = [rule, *(f"{label:<{width}}  {value}" for label, value in rows), rule]
    return "\n".join(lines)


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def synth_main(argv: list[str]) -> None:
    """`seq2seq-data synth PAIRS OUTPUT [--data NAME] [--root DIR]` (module docstring)."""
    parser = OneLineParser(
        prog=f"{PROGRAM} {SYNTH_COMMAND}",
        description="Write a synthetic corpus: the corpus of a data config repeated, each "
        "copy's number appended to both sentences, so that nothing deduplicates.",
    )
    parser.add_argument("pairs", type=whole(1, MAX_SYNTH_PAIRS), help="number of pairs to write")
    parser.add_argument("output", type=Path, help="the tab-separated file to write")
    parser.add_argument("--data", default="tatoeba_zh_en", help="data config of the source")
    parser.add_argument("--root", default="data", help="where raw/ is (data.root)")
    parser.add_argument(NO_PROGRESS, action="store_true", help=NO_PROGRESS_HELP)  # `main` took it
    args = parser.parse_args(argv)
    try:
        check_output_file(args.output, "OUTPUT")  # before the corpus is fetched and read
        cfg = DataConfig.from_mapping({**data_preset(args.data), "root": args.root})
        if cfg.source_name != "tabular":
            raise PresetError(
                f"--data {args.data}: a tab-separated corpus config is needed (data.source."
                f"name=tabular), not data.source.name={cfg.source_name}"
            )
        corpus = cfg.source_options
        path = fetch(corpus.url, corpus.member or None, root=Path(cfg.root), sha256=corpus.sha256)
        lines = source_lines(
            path, corpus.member or None, corpus.src_column, corpus.tgt_column, corpus.num_columns
        )
        write_output(args.output, lines, args.pairs, corpus)
    except (ValueError, FetchError, OSError) as error:  # PresetError, CorpusError: ValueErrors
        user_error(error)
    print(
        f"wrote {args.pairs:,} pairs ({len(lines):,} source pairs, numbered copies) to {args.output}"
    )


def write_output(output: Path, lines: list[list[str]], pairs: int, corpus: Any) -> None:
    """`write_synthetic` (whole or not at all) in the columns of `corpus` (the tabular
    source's options); an OSError is one line naming OUTPUT."""
    try:
        write_synthetic(output, lines, pairs, corpus.src_column, corpus.tgt_column)
    except OSError as error:
        raise OutputPlaceError(
            f"OUTPUT {output}: cannot be written ({error.strerror or error})"
        ) from error


def main() -> None:
    """Console entry point: `synth`, or `prepare` (the word optional) under Hydra."""
    take_no_progress(sys.argv)
    if len(sys.argv) > 1 and sys.argv[1] == SYNTH_COMMAND:
        synth_main(sys.argv[2:])
        return
    command = COMMAND
    if len(sys.argv) > 1 and sys.argv[1] in (COMMAND, VERIFY_COMMAND):
        command = sys.argv.pop(1)
    check_config_folders(sys.argv[1:], PROGRAM)
    register_configs(["data"])  # the data schema only: no model is imported
    run_hydra_app(verify_app if command == VERIFY_COMMAND else prepare_app, PROGRAM)


def take_no_progress(argv: list[str]) -> None:
    """`--no-progress`, anywhere in `argv` (which Hydra would refuse), taken out of it and
    turned into `SEQ2SEQ_PROGRESS=0` for this process: the bars are deep in the
    preparation, which Hydra's config does not reach."""
    if NO_PROGRESS in argv[1:]:
        argv[1:] = [arg for arg in argv[1:] if arg != NO_PROGRESS]
        switch_off_in(os.environ)


if __name__ == "__main__":
    main()
