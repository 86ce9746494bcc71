"""The runs of a sweep as configurations: each configuration's seeds pooled, one row of
figures per run, the convergence columns, the sweep's baseline, and linking runs between
sweeps.

A sweep is a folder of run folders (a Hydra multirun; `seq2seq.study.reading`). Runs whose
composed configs differ only in `trainer.seed` are one configuration (`Configuration`):
its figures are shown as the mean ± sample standard deviation over its seeds
(`seq2seq.study.report`), and it is tested against the baseline seed by seed
(`seq2seq.study.seed_significance`). Each run's row holds the numbers of `results.json` and of
its event file; a run without `results.json` (still running, or crashed) keeps a row with
empty figures, and its configuration counts only its finished seeds.

A run whose `results.json`, `.hydra/config.yaml` or `.hydra/overrides.yaml` cannot be read
(`RunReadError`) is named in one line on stderr and left out; the caller counts it.
"""

from __future__ import annotations

import os
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from seq2seq.config.build import plain
from seq2seq.study.reading import (
    RunReadError,
    Scalars,
    command_line_choice,
    describe_model,
    find_runs,
    group_by_configuration,
    model_labels,
    read_config,
    read_overrides,
    read_results,
    read_scalars,
    run_seed,
)

TOKENS_TAG, ALIGNMENT_TAG = "train/tokens_per_sec", "valid/alignment_accuracy"
# The overrides that mark a sweep's baseline, the first that matches one configuration wins.
DEFAULT_BASELINES = ("attention=none", "+experiment=compare_gru")
# One row per run: the columns of comparison.csv.
ROW_KEYS = (
    "sweep", "model", "seed", "parameters", "steps", "train_minutes", "best_step",
    "minutes_to_best", "last_quarter_gain", "tokens_per_sec",
    "valid_bleu", "test_bleu", "test_bleu_ci_low", "test_bleu_ci_high", "test_chrf",
    "alignment_accuracy", "test_aer", "test_aer_precision", "test_aer_recall",
    "test_aer_best", "test_aer_best_head", "test_aer_guided", "test_aer_layer",
    "test_aer_both",
    "baseline", "p_vs_baseline", "config_p_vs_baseline", "significant_vs_baseline",
    "runner_up", "p_vs_runner_up", "config_p_vs_runner_up", "significant_vs_runner_up",
    "run_dir",
)  # fmt: skip


def warn(message: str) -> None:
    """One line on stderr, prefixed `compare:` (the reading of many runs goes on)."""
    print(f"compare: {message}", file=sys.stderr)


def empty_row(**values: Any) -> dict[str, Any]:
    """A row with every column None but `values`."""
    row: dict[str, Any] = dict.fromkeys(ROW_KEYS)
    row.update(values)
    return row


# ---------------------------------------------------------------- one run


def summarise_run(run_dir: Path, sweep: str) -> dict[str, Any]:
    """One row: the numbers of `results.json` and the event file; None where missing
    (the significance and AER columns are filled later)."""
    results = read_results(run_dir)
    scalars = read_scalars(run_dir)
    tokens, alignment = scalars.values(TOKENS_TAG), scalars.values(ALIGNMENT_TAG)
    test = results.get("test", {})
    return empty_row(
        sweep=sweep,
        seed=run_seed(read_config(run_dir)),
        parameters=results.get("parameters"),
        steps=results.get("steps"),
        train_minutes=results.get("train_minutes"),
        **convergence(scalars, results.get("steps")),
        tokens_per_sec=statistics.median(tokens) if tokens else None,
        valid_bleu=results.get("valid_best_bleu"),
        test_bleu=test.get("bleu"),
        test_chrf=test.get("chrf"),
        alignment_accuracy=alignment[-1] if alignment else None,
        run_dir=str(run_dir),
    )


def convergence(scalars: Scalars, steps: int | None) -> dict[str, float | None]:
    """How near its end a run stopped improving, from its `valid/bleu` events:

    * best_step, minutes_to_best: the update of the best validation (the first, on a tie)
      and the training minutes to it (`Scalars.minutes_at`: the run's own clock, which
      leaves out the time between a resumed run's sessions);
    * last_quarter_gain: the best valid BLEU minus the best within the first three quarters
      of the `steps` updates (0 when nothing improved late; None without a validation in
      the first three quarters). Under 0.5 BLEU counts as converged for this budget.
    """
    found: dict[str, float | None] = dict.fromkeys(
        ("best_step", "minutes_to_best", "last_quarter_gain")
    )
    bleu = scalars.series.get("valid/bleu", [])
    if not bleu:
        return found
    wall, step, best = max(bleu, key=lambda event: (event[2], -event[1]))
    found["best_step"] = step
    found["minutes_to_best"] = scalars.minutes_at(step, wall)
    early = [value for _, at, value in bleu if steps and at <= 0.75 * steps]
    if early:
        found["last_quarter_gain"] = best - max(early)
    return found


# ---------------------------------------------------------------- configurations


@dataclass
class Configuration:
    """The runs of one sweep that differ only in their seed (rows sorted by seed)."""

    sweep: str
    label: str
    runs: list[Path]
    rows: list[dict[str, Any]]
    test: dict[str, Any] = field(default_factory=dict)  # `significance.summary` results

    def values(self, name: str) -> list[Any]:
        return [row[name] for row in self.rows if row[name] is not None]

    def mean(self, name: str) -> float | None:
        values = self.values(name)
        return statistics.fmean(values) if values else None

    def overrides(self) -> set[str]:
        """The command-line overrides of every run of the configuration."""
        return {item for run in self.runs for item in read_overrides(run)}

    def by_seed(self) -> dict[int | None, dict[str, Any]]:
        return {row["seed"]: row for row in self.rows}


def sweep_configurations(
    sweep_dir: Path, unreadable: list[RunReadError] | None = None
) -> list[Configuration]:
    """The configurations of a sweep in job order, each with its runs' rows; a run that
    cannot be read is reported and added to `unreadable` (`readable_runs`)."""
    runs, configs = readable_runs(find_runs(sweep_dir), [] if unreadable is None else unreadable)
    if not runs:
        return []
    groups = group_by_configuration(configs)
    labels = model_labels([configs[group[0]] for group in groups])
    found = []
    for group, label in zip(groups, labels, strict=True):
        members = [runs[index] for index in group]
        rows = [summarise_run(run, sweep_dir.name) | {"model": label} for run in members]
        found.append(Configuration(sweep_dir.name, label, members, rows))
    return found


def readable_runs(
    runs: list[Path], unreadable: list[RunReadError]
) -> tuple[list[Path], list[DictConfig]]:
    """The runs whose config, results and overrides can be read, with their configs; each
    other run is named in one line on stderr and added to `unreadable`."""
    kept, configs = [], []
    for run in runs:
        try:
            config = read_config(run)
            read_results(run)
            read_overrides(run)
        except RunReadError as error:
            report_unreadable(error, unreadable)
            continue
        kept.append(run)
        configs.append(config)
    return kept, configs


def report_unreadable(error: RunReadError, unreadable: list[RunReadError]) -> None:
    warn(f"left out: {error}")
    unreadable.append(error)


def report_count(unreadable: list[RunReadError]) -> None:
    """One line on stderr counting the runs left out, when there are any."""
    if unreadable:
        warn(left_out_line(len(unreadable)))


def left_out_line(count: int) -> str:
    """`2 runs could not be read and were left out`."""
    if count == 1:
        return "1 run could not be read and was left out"
    return f"{count} runs could not be read and were left out"


def find_baseline(configurations: list[Configuration], patterns: list[str]) -> int | None:
    """The index of the sweep's baseline: the one configuration run with the first pattern
    (a command-line override) that only one configuration has; None when there is none."""
    overrides = [configuration.overrides() for configuration in configurations]
    for pattern in patterns:
        matching = [index for index, found in enumerate(overrides) if pattern in found]
        if len(matching) == 1:
            return matching[0]
    return None


# The twin rule of the regions and heads comparison (`report.soft_twins`, in place of a
# marker): each attention against soft attention with the same score and one head.
SOFT_TWINS = "soft attention, one head"


def find_soft_twins(configurations: list[Configuration]) -> dict[int, int]:
    """{index of a configuration whose attention has another region than soft, or more
    than one head: index of its twin, the configuration of the same model (encoder,
    decoder, score) with soft attention and one head}: a sparse, hard or local region, or
    multi-head attention, tested against the plain attention of its own score."""
    described = [describe_model(plain(read_config(c.runs[0]))) for c in configurations]
    twins = {}
    for index, model in enumerate(described):
        if "region" not in model or (model["region"], model["heads"]) == ("soft", "1"):
            continue  # attention=none, or already soft with one head
        wanted = {**model, "region": "soft", "heads": "1"}
        matching = [other for other, found in enumerate(described) if found == wanted]
        if len(matching) == 1:
            twins[index] = matching[0]
    return twins


def find_twins(configurations: list[Configuration], marker: str) -> dict[int, int]:
    """{index of a configuration run with the override `marker`: index of its twin}, the
    twin being the configuration whose overrides are the same without `marker` and without
    the settings of its group (the seeds aside), e.g. each guided model (`alignment=guided`,
    with `alignment.weight=0.5` or not) and the same model unguided."""
    group = marker.partition("=")[0].lstrip("+~")

    def without_seeds(found: set[str]) -> frozenset[str]:
        return frozenset(item for item in found if not item.startswith("trainer.seed="))

    def without_marker(key: frozenset[str]) -> frozenset[str]:
        return frozenset(item for item in key
                         if item != marker and not item.startswith(group + "."))  # fmt: skip

    keys = [without_seeds(configuration.overrides()) for configuration in configurations]
    twins = {}
    for index, key in enumerate(keys):
        if marker not in key:
            continue
        matching = [other for other, found in enumerate(keys)
                    if marker not in found and found == without_marker(key)]  # fmt: skip
        if len(matching) == 1:
            twins[index] = matching[0]
    return twins


# ---------------------------------------------------------------- linking runs


def link_runs(source: Path, target: Path, choice: str) -> list[Path]:
    """Link every run of `source` whose command line has `choice` (`group=option`; every
    seed's run) into `target`, numbered after the jobs there; a run already linked stays.
    The comparison links the attention sweep's GRU runs into the encoder sweep this way,
    instead of training them twice. FileNotFoundError when no run has the choice."""
    group, _, option = choice.partition("=")
    unreadable: list[RunReadError] = []
    runs = [run for run in find_runs(source) if chosen(run, group, unreadable) == option]
    report_count(unreadable)
    if not runs:
        raise FileNotFoundError(f"no run below {source} was started with {choice}")
    target.mkdir(parents=True, exist_ok=True)
    entries = [entry for entry in target.iterdir() if entry.name.split("_", 1)[0].isdigit()]
    linked = {os.path.realpath(entry) for entry in entries if entry.is_symlink()}  # no raise
    number = max((int(entry.name.split("_", 1)[0]) for entry in entries), default=-1) + 1
    made = []
    for run in runs:
        if os.path.realpath(run) in linked:
            continue
        link = target / f"{number}_{run.name.split('_', 1)[-1]}"
        link.symlink_to(os.path.relpath(run, target), target_is_directory=True)
        made.append(link)
        number += 1
    return made


def chosen(run: Path, group: str, unreadable: list[RunReadError]) -> str | None:
    """The run's `group=<option>` choice; None, after one line on stderr, when its
    overrides cannot be read."""
    try:
        return command_line_choice(run, group)
    except RunReadError as error:
        report_unreadable(error, unreadable)
        return None
