"""Training from Python (`train`): seq2seq-train's composition, checks, run folder and
log, in this process."""

from __future__ import annotations

import copy
import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from seq2seq.cli.hydra_places import hydra_message, renamed_overrides
from seq2seq.cli.train import closing_lines
from seq2seq.config.build import ConfigError
from seq2seq.output_folders import check_output_place
from seq2seq.plugins import import_plugins
from seq2seq.runs.assemble import check_startup, train_and_test
from seq2seq.runs.compose import compose_train

# How seq2seq-train names a run folder (configs/train.yaml, `hydra.run.dir`):
# outputs/<name>/<date_time>, the time as Hydra's `${now:...}` writes it.
RUN_FOLDER_TIME = "%Y-%m-%d_%H-%M-%S"
RUN_DIR_OVERRIDE = "hydra.run.dir="
# Hydra's job logging, which seq2seq-train's log follows: `<run folder>/train.log`.
LOG_FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"
LOG_NAME = "train.log"


@dataclass(frozen=True)
class TrainResult:
    """A finished run: its folder and its results (`results.json`: test scores under
    `test`, the best valid value, steps, minutes, ...)."""

    run_dir: Path
    results: dict[str, Any]

    @property
    def checkpoint(self) -> Path:
        """The run's best checkpoint, `<run_dir>/checkpoints/best.pt`, for `load`."""
        return self.run_dir / "checkpoints" / "best.pt"


def train(
    overrides: Sequence[str] = (),
    *,
    config: DictConfig | None = None,
    outputs: str | Path | None = None,
) -> TrainResult:
    """Train and test a model as `seq2seq-train OVERRIDES...` does, in this process.

    Arguments: `overrides`, seq2seq-train's command-line overrides (`["data=toy_reverse",
    "trainer.max_steps=200"]`; `hydra.run.dir=FOLDER` names the run folder itself);
    `config`, instead of overrides, a training config already composed
    (`seq2seq.runs.compose.compose_train`, perhaps edited); `outputs`, the folder that
    holds the runs (default `outputs` in the current folder): a run goes to
    `<outputs>/<name>/<date_time>`, as seq2seq-train's, with the config in `.hydra/` and
    the log in `train.log`. The log is shown on stdout as well unless the program has set
    up logging of its own; the closing lines (test scores, run folder) are printed.

    Returns a `TrainResult` (run folder, results). Raises ConfigError with
    seq2seq-train's one-line message for a bad override or value (before any folder is
    made), and what seq2seq-train reports in one line: CheckpointError, PluginError,
    FetchError, CorpusError, RunFolderBusy, TrainingDiverged."""
    if config is not None and overrides:
        raise ValueError("train: give overrides or a composed config, not both")
    given = list(overrides)
    cfg = composed(given) if config is None else config
    if not isinstance(cfg, DictConfig):
        raise TypeError(f"train: config must be a composed DictConfig, got {type(cfg).__name__}")
    import_plugins(cfg.get("plugins") or [], base=Path.cwd())
    recorded = copy.deepcopy(cfg)  # as composed: the checks below complete its nodes
    check_startup(cfg)  # a bad value stops here, before a folder is made
    root = Path("outputs") if outputs is None else Path(outputs)
    run_dir = run_folder(given, root, str(cfg.name))
    record_config(run_dir, recorded, given)
    with run_logging(run_dir):
        results = train_and_test(cfg, run_dir, root.resolve())
    if results:
        print("\n".join(closing_lines(results)))
    return TrainResult(Path(results.get("run_dir", run_dir)), results)


def composed(overrides: list[str]) -> DictConfig:
    """The training config of seq2seq-train's `overrides` (old data keys renamed, with one
    line on stderr each, as the command does); ConfigError with the command's one-line
    message for one Hydra refuses."""
    renamed = renamed_overrides(overrides, "seq2seq.train")
    try:
        return compose_train([o for o in renamed if not o.startswith(RUN_DIR_OVERRIDE)])
    except (HydraException, OmegaConfBaseException) as error:
        raise ConfigError(hydra_message(error)) from None


def run_folder(overrides: Sequence[str], root: Path, name: str) -> Path:
    """The run folder: `hydra.run.dir=` when given, else `<root>/<name>/<date_time>` (with
    `_1`, `_2`, ... when a run started within the same second holds it), checked to be
    writable (OutputPlaceError, one line, otherwise)."""
    given = [o.removeprefix(RUN_DIR_OVERRIDE) for o in overrides if o.startswith(RUN_DIR_OVERRIDE)]
    if given:
        run_dir = Path(given[-1])
    else:
        run_dir = root / name / datetime.now().strftime(RUN_FOLDER_TIME)
        stem, number = run_dir, 0
        while run_dir.exists():
            number += 1
            run_dir = stem.with_name(f"{stem.name}_{number}")
    check_output_place(run_dir)
    return run_dir


def record_config(run_dir: Path, cfg: DictConfig, overrides: Sequence[str]) -> None:
    """`.hydra/config.yaml` and `.hydra/overrides.yaml`, as Hydra writes them for
    seq2seq-train: what `seq2seq-compare` and a resumed run read of a run folder."""
    folder = run_dir / ".hydra"
    folder.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, folder / "config.yaml")
    OmegaConf.save(OmegaConf.create(list(overrides)), folder / "overrides.yaml")


@contextmanager
def run_logging(run_dir: Path) -> Iterator[None]:
    """The project's INFO log, as seq2seq-train's: into `<run_dir>/train.log`, and on
    stdout when the program has no logging of its own (no handler on the root logger).
    Everything is put back as it was afterwards."""
    logger = logging.getLogger("seq2seq")
    formatter = logging.Formatter(LOG_FORMAT)
    handlers: list[logging.Handler] = [logging.FileHandler(run_dir / LOG_NAME, encoding="utf-8")]
    if not logging.getLogger().handlers:
        handlers.append(logging.StreamHandler(sys.stdout))
    level = logger.level
    for handler in handlers:
        handler.setFormatter(formatter)
        logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.setLevel(level)
        for handler in handlers:
            logger.removeHandler(handler)
            handler.close()
