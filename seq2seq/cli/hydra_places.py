"""The run folder of a Hydra app, checked before Hydra makes it and before any work.

Hydra makes `hydra.run.dir` (`hydra.sweep.dir` with `-m`) itself, before our task function
runs, so a folder that names a file, lies under a file or in a read-only folder ends in
Hydra's traceback. `OutputPlaceCheck` is a Hydra callback, named in the app's config
(`configs/train.yaml`, `configs/compare/compare.yaml`, under `hydra.callbacks`), that
checks the place as every output place is checked (`seq2seq.output_folders.
check_output_place`: it exists or can be made, is a folder, takes a new file) once the
config is composed, its interpolations (`${now:...}`) resolved, and refuses a bad one in
one line on stderr with exit code 2, before a folder is made, data is read or a model built:

    seq2seq-train: hydra.run.dir /data/runs/x: cannot write in /data/runs (Read-only file system)

The config folders a user hands Hydra (`--config-dir DIR`, `-cd DIR`, `--config-path`) are
read by Hydra's own loader, which expands aliases and opens files as UTF-8 whatever they
hold (a preset saved as UTF-16 ended in a UnicodeDecodeError traceback). `check_config_folders`
reads each of their YAML files first, within bounds (`seq2seq.bounded_files.read_yaml`:
size, aliases, depth, encoding), through the bounded walk (`seq2seq.folder_walk`), and
refuses the first bad one in one line with exit code 2, before Hydra reads anything. A data
config among them written for the layout before `data.source` (`kind: parallel`, `url:`,
`toy_task:` ...) is refused the same way, the line naming the file, the old key and the new.

An old data key on the command line (`data.toy_train_size=512`, `data.kind=parallel`, as a
run folder's `.hydra/overrides.yaml` holds it) is renamed before Hydra composes
(`seq2seq.config.stored.renamed_override`), with one line on stderr naming the new key:

    seq2seq-train: data.toy_train_size is now data.source.train_size; using it
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from seq2seq.bounded_files import StructuredFileError, read_yaml
from seq2seq.config.stored import renamed_override
from seq2seq.data.settings import moved_key
from seq2seq.folder_walk import walk_folders
from seq2seq.output_folders import OutputPlaceError, check_output_place

USER_ERROR_EXIT = 2
CONFIG_FOLDER_OPTIONS = ("--config-dir", "-cd", "--config-path", "-cp")


FULL_ERROR = "HYDRA_FULL_ERROR"
ONE_LINE_MARK = "SEQ2SEQ_HYDRA_ONE_LINE"  # set with FULL_ERROR by us, not by the user


def run_hydra_app(app: Callable[[], Any], program: str) -> Any:
    """Run the Hydra app `app` so that Hydra's own errors (an override of the wrong type
    `trainer.threads=abc`, an unknown key, a missing preset) are one line on stderr with
    exit code 2, not Hydra's five-line report with exit code 1. Hydra raises them instead of
    reporting them when HYDRA_FULL_ERROR=1; a user who set it gets Hydra's traceback. Old
    data keys on the command line are renamed first (`renamed_overrides`)."""
    sys.argv[1:] = renamed_overrides(sys.argv[1:], program)
    if os.environ.get(FULL_ERROR) == "1" and os.environ.get(ONE_LINE_MARK) != "1":
        return app()
    before = {name: os.environ.get(name) for name in (FULL_ERROR, ONE_LINE_MARK)}
    os.environ[FULL_ERROR] = os.environ[ONE_LINE_MARK] = "1"  # inherited by child runs
    try:
        return app()
    except (HydraException, OmegaConfBaseException) as error:
        print(f"{program}: {hydra_message(error)}", file=sys.stderr)
        raise SystemExit(USER_ERROR_EXIT) from None
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def renamed_overrides(arguments: list[str], program: str) -> list[str]:
    """The command line with each old data key in its current name, one line on stderr
    for each renamed (module docstring)."""
    renamed = []
    for argument in arguments:
        new, said = renamed_override(argument)
        if said is not None:
            print(f"{program}: {said}", file=sys.stderr)
        renamed.append(new)
    return renamed


def hydra_message(error: BaseException) -> str:
    """Hydra's error and the first line of its OmegaConf cause, on one line."""
    parts = [str(error).strip()]
    cause = error.__cause__
    if isinstance(cause, OmegaConfBaseException) and str(cause).strip():
        parts.append(str(cause).strip().splitlines()[0])
    text = ": ".join(dict.fromkeys(" ".join(part.split()) for part in parts if part))
    guided_only = guided_only_key(text)
    if guided_only in LAYER_KEYS:
        return (f"alignment.{guided_only} is a setting of the alignment layer: add "
                "alignment=layer (the default, alignment=none, has no settings)")  # fmt: skip
    if guided_only:
        return (f"alignment.{guided_only} is a setting of guided alignment: add alignment=guided "
                "(the default, alignment=none, has no settings)")  # fmt: skip
    return (text + moved_key_hint(text)) or type(error).__name__


def moved_key_hint(text: str) -> str:
    """`; data.kind is now data.source.name` when Hydra's error is about an old data key
    (a preset found through `hydra.searchpath`, which `check_config_folders` does not read)."""
    found = re.search(r"Key '(\w+)' not in 'DataConfig'", text)
    new = moved_key(found[1]) if found else None
    return f"; data.{found[1]} is now {new}" if new else ""


# The settings of `alignment=layer` alone (weight and loss are both options')
LAYER_KEYS = frozenset(("separate", "training", "layer_heads", "gradient", "query", "embeddings",
                        "teacher_layer", "teacher_heads", "teacher_shift", "labels"))  # fmt: skip


def guided_only_key(text: str) -> str | None:
    """`shift` when Hydra could not set `alignment.shift` because the run has no alignment
    settings (`alignment=none`, the default), else None."""
    found = re.search(r"Could not override 'alignment\.(\w+)'.*is not in struct", text)
    return found[1] if found else None


def config_folders(argv: list[str], keys: tuple[str, ...] = ()) -> list[str]:
    """The folders named by Hydra's `--config-dir`/`-cd`/`--config-path`/`-cp` in `argv`
    (`--config-dir DIR` or `--config-dir=DIR`), and by the overrides `KEY=DIR` of `keys`
    (`config_dir=DIR` of seq2seq-compare); a `pkg://` path is the package's own."""
    found = []
    for index, argument in enumerate(argv):
        option, equals, value = argument.partition("=")
        if option.lstrip("+") in keys and equals:
            found.append(value.strip("'\""))
            continue
        if option not in CONFIG_FOLDER_OPTIONS:
            continue
        if not equals:
            value = argv[index + 1] if index + 1 < len(argv) else ""
        if value and "://" not in value:
            found.append(value)
    return found


def check_config_folders(argv: list[str], program: str, keys: tuple[str, ...] = ()) -> None:
    """Every YAML file of the config folders in `argv` (`config_folders`), read within
    bounds before Hydra reads them; one line on stderr and exit code 2 for the first that
    cannot be read."""
    for folder in config_folders(argv, keys):
        if not Path(folder).is_dir():
            continue  # Hydra says so itself, in one line
        walk = walk_folders(Path(folder))
        files = [file for file in walk.files if file.suffix in (".yaml", ".yml")]
        try:
            for file in files:
                check_data_keys(file, read_yaml(file), in_data_group=file.parent.name == "data")
        except (StructuredFileError, OSError, ValueError) as error:
            message = " ".join(str(error).split()) or type(error).__name__
            print(f"{program}: {message}", file=sys.stderr)
            raise SystemExit(USER_ERROR_EXIT) from None


def check_data_keys(file: Path, values: Any, *, in_data_group: bool) -> None:
    """ValueError naming the file, the key and its new name for an old data key: a key of
    a data config (a file of the `data` group), or of the `data` node of another config."""
    if not isinstance(values, dict):
        return
    data = values if in_data_group else values.get("data")
    for key in data if isinstance(data, dict) else ():
        new = moved_key(str(key))
        if new is not None:
            raise ValueError(
                f"{file}: data.{key} is a key of the data config before data.source; it is "
                f"now {new} (see configs/data/*.yaml)"
            )


class OutputPlaceCheck(Callback):
    """Checks the run folder (`on_run_start`) or the sweep folder (`on_multirun_start`) of
    `program`; `run_key` is how the user sets the run folder (`dir` for seq2seq-compare)."""

    def __init__(self, program: str, run_key: str = "hydra.run.dir") -> None:
        self.program = program
        self.run_key = run_key

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.check(config, "hydra.run.dir", self.run_key)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.check(config, "hydra.sweep.dir", "hydra.sweep.dir")

    def check(self, config: DictConfig, key: str, shown: str) -> None:
        """One line and exit code 2 unless the folder at `key` can be written."""
        try:
            folder = OmegaConf.select(config, key)
        except OmegaConfBaseException:
            return  # an interpolation Hydra cannot resolve either: Hydra's own error follows
        if folder is None:
            return
        try:
            check_output_place(str(folder))
        except OutputPlaceError as error:
            print(f"{self.program}: {shown} {error}", file=sys.stderr)
            raise SystemExit(USER_ERROR_EXIT) from None
