"""Reading finished (or unfinished) runs back: where they are, what they scored, what
they logged, and what sets them apart.

A run folder holds `.hydra/config.yaml` (the composed config), `results.json` (written by
`seq2seq.runs.assemble` when the run ends), `checkpoints/` and `tensorboard/`. A sweep is
a folder of run folders, named by Hydra `<job number>_<overrides>`. Runs whose configs
differ only in `trainer.seed` are one configuration (`group_by_configuration`): `make
compare` trains each configuration with several seeds.

The readers validate what they read: a file that is not text, not JSON or YAML, or not
what training writes there raises `RunReadError`, whose message starts with the file's
path, and a caller that reads many runs reports it in one line and leaves the run out.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from seq2seq.bounded_files import (
    StructuredFileError,
    parse_json_text,
    parse_yaml_text,
    read_text_bounded,
)
from seq2seq.config.build import plain
from seq2seq.config.stored import MIGRATIONS, migrated_section
from seq2seq.folder_walk import walk_folders
from seq2seq.runs.folder import RESULTS_NAME
from seq2seq.visualise.heatmap import describe_run

RUN_CONFIG = ".hydra/config.yaml"
RUN_OVERRIDES = ".hydra/overrides.yaml"
BEST_CHECKPOINT = "checkpoints/best.pt"
ONLY_SCALARS = {"scalars": 0, "images": 1, "tensors": 1, "histograms": 1, "audio": 1}
RESULT_INTEGERS = ("parameters", "steps", "best_step", "epochs")  # results.json figures
RESULT_NUMBERS = ("valid_best_bleu", "train_minutes", "train_tflop")
TEST_NUMBERS = ("bleu", "chrf")  # of results.json's `test`
CONFIG_GROUPS = ("encoder", "decoder", "attention", "data")  # what naming a run reads
log = logging.getLogger(__name__)


class RunReadError(ValueError):
    """A file of a run folder that cannot be read: not text, not JSON or YAML, or not what
    training writes there. The message starts with the file's path."""


# ---------------------------------------------------------------- finding runs


def runs_below(folder: Path, marker: str = RUN_CONFIG) -> list[Path]:
    """Run folders at or below `folder` that hold the file `marker` (a relative path), in
    sweep job order. Symbolic links are followed: `make compare` links a run of the
    attention sweep into the encoder sweep instead of training it twice, within the folder
    or to another run folder; each real folder is visited once and what is skipped (a link
    out of the tree, a loop, a folder too deep) is said in one logged line (`walk_folders`).
    FileNotFoundError when `folder` is not a folder."""
    walk = walk_folders(folder, marker=marker)
    if walk.skipped:
        log.warning("%s: %s", folder, walk.summary())
    runs = [found for found in walk.folders if (found / marker).is_file()]
    return sorted(runs, key=job_order)


def job_order(run: Path) -> tuple[int, str]:
    """Hydra names sweep jobs `<number>_<overrides>`: sort by the number, then the name."""
    number = run.name.split("_", 1)[0]
    return (int(number) if number.isdigit() else sys.maxsize, str(run))


def find_runs(sweep_dir: Path) -> list[Path]:
    """Run folders (holding `.hydra/config.yaml`) at or below `sweep_dir`, in job order."""
    runs = runs_below(sweep_dir, RUN_CONFIG)
    if not runs:
        raise FileNotFoundError(f"no run folder ({RUN_CONFIG}) below {sweep_dir}")
    return runs


def find_checkpoints(folders: list[Path]) -> list[Path]:
    """`<run>/checkpoints/best.pt` of every run folder at or below the given folders."""
    found = [
        run / BEST_CHECKPOINT for folder in folders for run in runs_below(folder, BEST_CHECKPOINT)
    ]
    if not found:
        raise FileNotFoundError(f"no {BEST_CHECKPOINT} below {', '.join(map(str, folders))}")
    return found


# ---------------------------------------------------------------- what a run wrote


def read_results(run_dir: Path) -> dict[str, Any]:
    """The run's `results.json`; {} while it has none (still running, or crashed).
    RunReadError when it is empty, not JSON, not an object, or a figure has the wrong type."""
    path = run_dir / RESULTS_NAME
    if not path.is_file():
        return {}
    text = read_text(path)
    if not text.strip():
        raise RunReadError(f"{path}: empty file (the run stopped while writing it?)")
    try:
        found = parse_json_text(text, source=str(path))
    except StructuredFileError as error:
        raise RunReadError(f"{error}, truncated?") from None
    check_results(found, path)
    return found


def check_results(found: Any, path: Path) -> None:
    """RunReadError unless `found` is an object whose figures (those the comparison tables)
    are numbers or null and whose `test` is an object."""
    if not isinstance(found, dict):
        raise RunReadError(f"{path}: not a JSON object (got {kind_of(found)})")
    test = found.get("test")
    if test is not None and not isinstance(test, dict):
        raise RunReadError(f"{path}: test must be an object, got {kind_of(test)}")
    figures = [(key, found.get(key), key in RESULT_INTEGERS)
               for key in RESULT_INTEGERS + RESULT_NUMBERS]  # fmt: skip
    figures += [(f"test.{key}", (test or {}).get(key), False) for key in TEST_NUMBERS]
    for name, value, integral in figures:
        kinds = (int,) if integral else (int, float)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
            wanted = "an integer" if integral else "a number"
            raise RunReadError(f"{path}: {name} must be {wanted}, got {value!r}")


def read_config(run_dir: Path) -> DictConfig:
    """The composed config the run was started with (`.hydra/config.yaml`), a run of an
    older layout migrated (`migrate_old_layout`). RunReadError
    when it is not a YAML mapping that resolves, holds the model's settings and an integer
    `trainer.seed` (or none)."""
    path = run_dir / RUN_CONFIG
    shape = read_yaml_file(path)  # aliases refused before OmegaConf sees anything
    try:
        config = OmegaConf.create(shape) if isinstance(shape, dict) else None
    except OmegaConfBaseException as error:
        raise RunReadError(f"{path}: not a run's config ({first_line(error)})") from error
    if not isinstance(shape, dict) or not isinstance(config, DictConfig):
        raise RunReadError(f"{path}: not a YAML mapping (got {kind_of(shape)})")
    migrate_old_layout(config)
    check_config(config, path)
    return config


def migrate_old_layout(config: DictConfig) -> None:
    """The sections of an older layout (the attention's flat options, the data source's
    flat keys) moved into the current one, in place (`seq2seq.config.stored`, where every
    migration is)."""
    for section in MIGRATIONS:
        node = config.get(section)
        if isinstance(node, DictConfig):
            as_written = OmegaConf.to_container(node, resolve=False)
            migrated = migrated_section(section, as_written)
            if migrated != as_written:
                config[section] = migrated


def check_config(config: DictConfig, path: Path) -> None:
    """RunReadError unless the config resolves, describes a model (`describe_run`) and
    has an integer `trainer.seed` or none."""
    try:
        OmegaConf.to_container(config, resolve=True)
    except OmegaConfBaseException as error:
        raise RunReadError(f"{path}: cannot be resolved ({first_line(error)})") from error
    for group in CONFIG_GROUPS:
        if not isinstance(config.get(group), DictConfig):
            raise RunReadError(f"{path}: not a run's config: no {group} settings")
    try:
        describe_run(plain(config))
    except (KeyError, TypeError, ValueError) as error:
        raise RunReadError(f"{path}: does not describe a model ({error})") from error
    trainer = config.get("trainer")
    seed = trainer.get("seed") if isinstance(trainer, DictConfig) else None
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise RunReadError(f"{path}: {SEED_KEY} must be an integer, got {seed!r}")


def read_overrides(run_dir: Path) -> list[str]:
    """The run's command-line overrides (`.hydra/overrides.yaml`); [] when it has none.
    RunReadError when the file is not a YAML list of overrides."""
    path = run_dir / RUN_OVERRIDES
    if not path.is_file():
        return []
    found = read_yaml_file(path)
    if not isinstance(found, list) or any(isinstance(item, (list, dict)) for item in found):
        raise RunReadError(f"{path}: not a YAML list of overrides (got {kind_of(found)})")
    return [str(item) for item in found]


def command_line_choice(run_dir: Path, group: str) -> str | None:
    """The last `group=<option>` of the run's command line (`.hydra/overrides.yaml`)."""
    overrides = read_overrides(run_dir)
    choices = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == group]
    return choices[-1] if choices else None


def read_text(path: Path) -> str:
    """A run file's UTF-8 text, at most `STRUCTURED_LIMIT` bytes (checked before reading);
    RunReadError when it cannot be read, is too big or is not UTF-8."""
    try:
        return read_text_bounded(path)
    except StructuredFileError as error:
        raise RunReadError(str(error)) from None


def read_yaml_file(path: Path) -> Any:
    """A run file's YAML as plain data, read within bounds, aliases refused before they are
    expanded (`seq2seq.bounded_files`); RunReadError naming the file and line otherwise."""
    try:
        return parse_yaml_text(read_text(path), source=str(path))
    except StructuredFileError as error:
        raise RunReadError(str(error)) from None


def kind_of(value: Any) -> str:
    """What a parsed JSON or YAML value is, for a message: `a list`, `nothing`."""
    if value is None:
        return "nothing"
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string",
             list: "a list", dict: "a mapping"}  # fmt: skip
    return names.get(type(value), f"a {type(value).__name__}")


def first_line(error: Exception) -> str:
    """The first line of an error's message (YAML and OmegaConf errors span several)."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


@dataclass
class Scalars:
    """The scalar events of one run: wall time of its first event, and per tag the
    `(wall_time, step, value)` triples in order."""

    first_wall_time: float | None = None
    series: dict[str, list[tuple[float, int, float]]] = field(default_factory=dict)

    def values(self, tag: str) -> list[float]:
        return [value for _, _, value in self.series.get(tag, [])]

    def minutes_at(self, step: int, wall_time: float) -> float | None:
        """Training minutes up to the event (`step`, `wall_time`): the run's own clock
        (`train/minutes`, logged at each validation, continued by a resumed run, so the
        hours between a run's sessions do not count), else the wall time since the first
        event (runs from before that scalar); None when neither is known."""
        clock = {at: value for _, at, value in self.series.get("train/minutes", [])}
        if step in clock:
            return clock[step]
        if self.first_wall_time is None:
            return None
        return (wall_time - self.first_wall_time) / 60


def read_scalars(run_dir: Path) -> Scalars:
    """Every scalar of `<run_dir>/tensorboard` (all event files in it, resumed runs too)."""
    folder = run_dir / "tensorboard"
    if not folder.is_dir():
        return Scalars()
    events = EventAccumulator(str(folder), size_guidance=ONLY_SCALARS)
    events.Reload()
    series = {
        tag: [(event.wall_time, event.step, event.value) for event in events.Scalars(tag)]
        for tag in events.Tags()["scalars"]
    }
    try:
        first = events.FirstEventTimestamp()
    except ValueError:  # an event file with no event yet
        first = None
    return Scalars(first, series)


def best_within(
    scalars: Scalars, budgets: tuple[float, ...], spent: str
) -> list[tuple[float, float, int] | None]:
    """For each budget, the best `valid/bleu` logged within it: (BLEU, step, amount spent at
    that step), or None when the run ended before spending the budget or had no validation
    by then. `spent` is "minutes" (`Scalars.minutes_at`) or "tflop" (the
    `train/tflop` logged at the validation's step)."""
    validations = [(step, value, used) for step, value, used in _spent(scalars, spent)]
    if not validations:
        return [None] * len(budgets)
    end = max(used for _, _, used in validations)
    results = []
    for budget in budgets:
        within = [(value, step, used) for step, value, used in validations if used <= budget]
        results.append(max(within) if within and budget <= end + 1e-9 else None)
    return results


def _spent(scalars: Scalars, spent: str) -> list[tuple[int, float, float]]:
    """(step, valid BLEU, minutes or TFLOP spent) of every validation with a known amount."""
    bleu = scalars.series.get("valid/bleu", [])
    if spent == "minutes":
        found = [(step, value, scalars.minutes_at(step, wall)) for wall, step, value in bleu]
        return [(step, value, used) for step, value, used in found if used is not None]
    if spent == "tflop":
        tflop = {step: value for _, step, value in scalars.series.get("train/tflop", [])}
        return [(step, value, tflop[step]) for _, step, value in bleu if step in tflop]
    raise ValueError(f"spent must be 'minutes' or 'tflop', got {spent!r}")


# ---------------------------------------------------------------- naming runs


def differing_settings(descriptions: list[dict[str, str]]) -> list[str]:
    """The keys whose values are not the same in every run, in a stable order."""
    keys = list(dict.fromkeys(key for description in descriptions for key in description))
    return [key for key in keys if len({d.get(key, "-") for d in descriptions}) > 1]


def describe_model(config: Mapping[str, Any]) -> dict[str, str]:
    """`describe_run` of the run's config (plain data), and `alignment: layer (guided)` or
    `layer (unsupervised)` for a model with a separate alignment layer (`alignment=layer`),
    so that a sweep tells it from its twin without one."""
    described = describe_run(config)
    alignment = config.get("alignment") or {}
    if alignment.get("separate"):
        training = alignment.get("training")
        described["alignment"] = f"layer ({getattr(training, 'name', training)})"
    return described


def model_labels(configs: list[Any]) -> list[str]:
    """Each run's model settings that differ within the list (all of them when none
    differ); a setting the run does not have (the score of `attention=none`) is left out, and
    a run that has none of the differing settings (the defaults) is named by all of its own."""
    return labels_of([describe_model(plain(config)) for config in configs])


def labels_of(descriptions: list[dict[str, str]]) -> list[str]:
    """`model_labels` of runs already described (`describe_model`)."""
    keys = differing_settings(descriptions) or list(descriptions[0])
    return [
        " · ".join(f"{key}={d[key]}" for key in keys if key in d)
        or " · ".join(f"{key}={value}" for key, value in d.items())
        for d in descriptions
    ]


def run_titles(runs: list[Path], configs: list[Any]) -> list[str]:
    """Each run's label as the table names its row (`model_labels`: a setting the run does
    not have is left out), or its folder when no setting differs."""
    descriptions = [describe_model(plain(config)) for config in configs]
    if not differing_settings(descriptions):
        common = Path(os.path.commonpath(runs)) if len(runs) > 1 else runs[0].parent
        return [str(run.relative_to(common)) for run in runs]
    return labels_of(descriptions)


def best_choice(sweep_dir: Path, group: str, unreadable: list[RunReadError] | None = None) -> str:
    """The `group=<option>` command-line choice with the best valid BLEU in the sweep, the
    mean over its finished runs (its seeds; `make compare` picks sweep B's attention this
    way: by validation, never by test). A tie goes to the option met first in job order.
    A run whose files cannot be read raises RunReadError or, given the list `unreadable`,
    is added to it and left out."""
    scored: dict[str, list[float]] = {}
    for run in find_runs(sweep_dir):
        try:
            valid_bleu = read_results(run).get("valid_best_bleu")
            choice = command_line_choice(run, group)
        except RunReadError as error:
            if unreadable is None:
                raise
            unreadable.append(error)
            continue
        if valid_bleu is not None and choice is not None:
            scored.setdefault(choice, []).append(valid_bleu)
    if not scored:
        raise FileNotFoundError(f"no finished run below {sweep_dir} sets {group}=...")
    return max(scored, key=lambda choice: statistics.fmean(scored[choice]))


# ---------------------------------------------------------------- seeds

SEED_KEY = "trainer.seed"  # changes initialisation and data order; `data.seed` (the split) does not


def run_seed(config: Any) -> int | None:
    """The run's `trainer.seed` (None when its config has none)."""
    value = OmegaConf.select(config, SEED_KEY) if isinstance(config, DictConfig) else None
    return None if value is None else int(value)


def configuration_key(config: Any) -> str:
    """The run's composed config without `trainer.seed`, as a string: runs with equal keys
    differ only in their seed, and are one configuration of a sweep."""
    plain_config = (
        OmegaConf.to_container(config, resolve=False)
        if isinstance(config, DictConfig)
        else dict(config)
    )
    trainer = plain_config.get("trainer")
    if isinstance(trainer, dict):
        plain_config["trainer"] = {k: v for k, v in trainer.items() if k != "seed"}
    return json.dumps(plain_config, sort_keys=True, default=str)


def group_by_configuration(configs: list[Any]) -> list[list[int]]:
    """Indices of the runs (given by their configs, in job order) grouped by configuration,
    the groups in the order of their first run, each group's runs by seed then job order."""
    groups: dict[str, list[int]] = {}
    for index, config in enumerate(configs):
        groups.setdefault(configuration_key(config), []).append(index)
    seeds = [run_seed(config) for config in configs]
    return [
        sorted(members, key=lambda i: (seeds[i] is None, seeds[i] or 0, i))
        for members in groups.values()
    ]


def one_per_configuration(runs: list[Path]) -> list[Path]:
    """The run with the lowest seed of each configuration, in the order of `runs` (one
    alignment panel per configuration instead of one per seed). A run without a readable
    `.hydra/config.yaml` is kept on its own: its checkpoint is checked where it is loaded."""
    configs = {index: _config_or_none(run) for index, run in enumerate(runs)}
    readable = [index for index, config in configs.items() if config is not None]
    groups = group_by_configuration([configs[index] for index in readable])
    kept = {readable[group[0]] for group in groups}
    kept |= {index for index, config in configs.items() if config is None}
    return [run for index, run in enumerate(runs) if index in kept]


def _config_or_none(run_dir: Path) -> DictConfig | None:
    """The run's config, or None when it is missing, unreadable or not a YAML mapping."""
    try:
        config = read_config(run_dir)
    except (OSError, ValueError, yaml.YAMLError):
        return None
    return config if isinstance(config, DictConfig) else None
