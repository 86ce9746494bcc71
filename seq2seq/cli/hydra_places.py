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
"""

from __future__ import annotations

import sys
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from seq2seq.output_folders import OutputPlaceError, check_output_place

USER_ERROR_EXIT = 2


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
