"""`seq2seq-compare`: train sweeps of configurations with several seeds, then write the
comparison (COMPARISON.md, comparison.csv): a Hydra app over `seq2seq.study.comparison`.

    seq2seq-compare                                     # what `make compare` runs
    seq2seq-compare budget=small seeds=2 jobs=2         # quicker, two trainings at once
    seq2seq-compare attention=my_score,scaled_dot,additive,none seeds=3 budget=small \\
        plugins=[./lab/scores.py] config_dir=./lab/configs stages=[attention,summary]
    seq2seq-compare encoder=gru,lstm attention=additive stages=[attention,summary]
    seq2seq-compare cluster=slurm                       # every training a SLURM job
    seq2seq-compare stages=[summary] dir=multirun/compare_full/2026-12-01_14-32-30
    seq2seq-compare stages=[summary] sweeps=[multirun/2026-12-02/10-00-00] report.out_dir=/tmp/r
    seq2seq-compare --cfg job                           # every setting, with its default

Every key is in `seq2seq.study.comparison.CompareConfig` (a typo fails at start-up, naming
the key); the budgets are `configs/compare/budget/`. A comparison always sweeps, so a
comma list of a list key (`attention=a,b`) is read as the list `[a,b]`, where Hydra would
otherwise ask for `--multirun`. Extra training overrides hold `=` and are quoted:
`'train=["data=toy_copy","trainer.max_steps=20"]'`. The training schemas are not stored in
this process (`seq2seq.config.schema.register_configs`): with them, Hydra would read `attention=`
as a choice of their `attention` group; the user's presets are given with `config_dir=`
(passed to training as `--config-dir`), not Hydra's own `--config-dir`, for the same reason.

Exit codes: 0 done; 2 a one-line error (a setting, a stage that cannot run, no readable
run, a bad aligner file); a failed training sweep passes its own exit code on.
"""

from __future__ import annotations

import logging
import re
import sys
from dataclasses import is_dataclass
from pathlib import Path
from typing import get_args, get_origin, get_type_hints

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import OverrideParseException
from omegaconf import DictConfig, OmegaConf

from seq2seq.cli.checked_options import check_device
from seq2seq.cli.hydra_places import check_config_folders, run_hydra_app
from seq2seq.study.aer_rows import AlignerFileError
from seq2seq.study.comparison import CompareConfig, StageError, run_comparison
from seq2seq.study.launch import SweepFailed

log = logging.getLogger(__name__)
PLAIN = re.compile(r"[\w./:@*+~-]+")  # what Hydra reads unquoted in a list
USER_ERRORS = (ValueError, FileNotFoundError, StageError, AlignerFileError)

ConfigStore.instance().store(name="compare_schema", node=CompareConfig)


def list_keys(schema: type, prefix: str = "") -> set[str]:
    """The dotted keys of the schema's list fields: `attention`, `report.baseline_aer`."""
    keys = set()
    for name, kind in get_type_hints(schema).items():
        if is_dataclass(kind):
            keys |= list_keys(kind, f"{prefix}{name}.")
        elif list in (get_origin(kind), *map(get_origin, get_args(kind))):
            keys.add(prefix + name)
    return keys


LIST_KEYS = list_keys(CompareConfig)


def as_lists(arguments: list[str]) -> list[str]:
    """`attention=a,b` (Hydra's sweep syntax) → `attention=[a,b]` for the list keys of the
    schema, and a single value → a list of one; every other argument as it is."""
    parser = OverridesParser.create()
    found = []
    for argument in arguments:
        try:
            (override,) = parser.parse_overrides([argument])
        except (OverrideParseException, ValueError):
            found.append(argument)  # an option (--cfg) or an error Hydra will report
            continue
        key, value = override.key_or_group, override.value()
        if key not in LIST_KEYS or override.is_delete():
            found.append(argument)
        elif override.is_sweep_override():
            items = override.sweep_string_iterator()
            found.append(f"{key}=[{','.join(map(hydra_element, items))}]")
        elif isinstance(value, str):
            found.append(f"{key}=[{hydra_element(value)}]")
        else:
            found.append(argument)
    return found


def hydra_element(text: str) -> str:
    """A list element as Hydra's grammar reads it: plain, or double-quoted."""
    if PLAIN.fullmatch(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@hydra.main(version_base="1.3", config_path="pkg://seq2seq.configs.compare",
            config_name="compare")  # fmt: skip
def compare(cfg: DictConfig) -> None:
    settings = OmegaConf.to_object(cfg)
    problem = check_device(settings.report.device)
    if problem is not None:  # the same check as every command's --device
        log.error("%s", problem.replace("--device", "report.device", 1))
        raise SystemExit(2)
    command = " ".join(["seq2seq-compare", *HydraConfig.get().overrides.task])
    if settings.plugins:  # their components must be known to read and load the runs
        from seq2seq.plugins import import_plugins

        import_plugins(settings.plugins, base=Path.cwd())
    try:
        report = run_comparison(settings, command)
    except SweepFailed as error:
        log.error("%s", error)
        raise SystemExit(error.returncode) from error
    except USER_ERRORS as error:
        log.error("%s", error)
        raise SystemExit(2) from error
    if report is not None:
        print(report)


def main() -> None:
    check_config_folders(sys.argv[1:], "seq2seq-compare", keys=("config_dir",))
    sys.argv[1:] = as_lists(sys.argv[1:])
    run_hydra_app(compare, "seq2seq-compare")


if __name__ == "__main__":
    main()
