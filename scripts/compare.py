"""Summarise sweeps of training runs: one table row per configuration (its seeds pooled),
significance tests on the test set, AER on the hand-aligned test pairs, the alignments.

    python scripts/compare.py multirun/compare_full/DATE/attention multirun/compare_full/DATE/encoders
    python scripts/compare.py SWEEP_DIR [SWEEP_DIR ...] --out-dir . --no-image --no-aer
    python scripts/compare.py SWEEP_DIR ... --baseline-aer eflomal_test_aer.json
    python scripts/compare.py multirun/compare_full/DATE/attention --best attention
    python scripts/compare.py ATTENTION_SWEEP --link-into ENCODER_SWEEP --choice attention=scaled_dot

`make compare` runs the sweeps (Hydra multirun, every configuration with SEEDS seeds:
`trainer.seed`, which changes the initialisation and the data order, never the split) and
then this script. Each SWEEP_DIR is a folder of run folders (`.hydra/config.yaml`,
`results.json`, `test.hyp`, `checkpoints/best.pt`, `tensorboard/`).

Runs whose composed configs differ only in `trainer.seed` are one configuration.
`comparison.csv` keeps one row per run (a `seed` column); `COMPARISON.md` shows one row
per configuration, each figure as the mean ± sample standard deviation over its seeds
(n shown; a single value without ±):

    model (the settings that differ within the sweep), seeds, parameters, steps, training
    minutes, the update and minutes of the best validation and the valid BLEU gained in the
    last quarter of the budget (`convergence`), tokens/s (median of `train/tokens_per_sec`), best valid BLEU, test BLEU and
    chrF (the best checkpoint, `results.json`), alignment accuracy (last
    `valid/alignment_accuracy`), test AER of the last layer's head mean and of the head
    chosen on the valid gold pairs (`seq2seq.runs.gold_aer`; `—` without attention), the
    p-value against the sweep's baseline, the run folders.

Significance (`seq2seq.metrics.paired_bootstrap`: sacrebleu's paired bootstrap, 1,000
resamples) is tested on each run's `test.hyp` against the references of the prepared
test split (`<data.root>/prepared/<data.name>/test.<tgt>`), seed by seed: a
configuration's run of seed s against the baseline's run of the same seed s. The
baseline of a sweep is the one configuration whose command line has the first of the
`--baseline` overrides that matches exactly one configuration (`attention=none` in the
attention sweep, `+experiment=compare_gru` in the encoder sweep). A difference is
significant (†) when p < 0.05 for every seed tested and all its seeds' differences have
the same sign; the configuration's p is the largest of its seeds'. The two configurations
with the best mean valid BLEU of each sweep are tested against each other the same way.
The CSV has each run's p-values and the 95% confidence interval of its test BLEU.

`--baseline-aer FILE.json` (repeatable) adds a word aligner that is not a model, such as
a statistical one, scored on the same test gold pairs; its file holds one object:

    {"name": "eflomal", "test_aer": 0.31, "precision": 0.72, "recall": 0.65}

(precision and recall may be null), or is what `seq2seq-align-baseline --part test --json
FILE` writes (one row per symmetrisation, named `eflomal <method>`). Each becomes a row of
sweep `aligners` in the CSV and of the aligners' table in COMPARISON.md.

A run without `results.json` (still running, or crashed) keeps its CSV row with empty
cells for the numbers it lacks; its configuration counts only its finished seeds. A run
whose `results.json`, `.hydra/config.yaml` or `.hydra/overrides.yaml` cannot be read
(truncated, not JSON or YAML, wrong types: `seq2seq.runs.reading.RunReadError`) is named
in one line on stderr and left out of the tables, and COMPARISON.md counts it; with no
readable run at all the command exits 2. The
image of each sweep is drawn as `scripts/compare_alignments.py` draws it: the last
attention layer of each configuration's best checkpoint (its first seed) on the first
probe sentence (我爱中国。 for zh→en), greedy, side by side.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shlex
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from seq2seq.align.extract import AlignmentError
from seq2seq.checkpoint import CheckpointError
from seq2seq.metrics import (
    BOOTSTRAP_RESAMPLES,
    SIGNIFICANCE_LEVEL,
    BootstrapResult,
    paired_bootstrap,
)
from seq2seq.runs.alignments import collect_panels
from seq2seq.runs.gold_aer import checkpoint_aer
from seq2seq.runs.reading import (
    BEST_CHECKPOINT,
    RunReadError,
    Scalars,
    best_choice,
    command_line_choice,
    find_runs,
    group_by_configuration,
    model_labels,
    one_per_configuration,
    read_config,
    read_overrides,
    read_results,
    read_scalars,
    run_seed,
    runs_below,
)
from seq2seq.visualise.heatmap import draw_comparison

MISSING = "—"
MARK = "†"  # significant: p < SIGNIFICANCE_LEVEL for every seed, in one direction
TOKENS_TAG, ALIGNMENT_TAG = "train/tokens_per_sec", "valid/alignment_accuracy"
DEFAULT_BASELINES = ("attention=none", "+experiment=compare_gru")
ALIGNER_SWEEP = "aligners"
CSV_COLUMNS = (
    "sweep", "model", "seed", "parameters", "steps", "train_minutes", "best_step",
    "minutes_to_best", "last_quarter_gain", "tokens_per_sec",
    "valid_bleu", "test_bleu", "test_bleu_ci_low", "test_bleu_ci_high", "test_chrf",
    "alignment_accuracy", "test_aer", "test_aer_precision", "test_aer_recall",
    "test_aer_best", "test_aer_best_head",
    "baseline", "p_vs_baseline", "config_p_vs_baseline", "significant_vs_baseline",
    "runner_up", "p_vs_runner_up", "config_p_vs_runner_up", "significant_vs_runner_up",
    "run_dir",
)  # fmt: skip
TABLE_COLUMNS = (  # (key, markdown header); see `table_cell`
    ("model", "model"),
    ("seeds", "seeds"),
    ("parameters", "parameters"),
    ("steps", "steps"),
    ("train_minutes", "train min"),
    ("best_step", "best at (update, min)"),
    ("last_quarter_gain", "last ¼ gain"),
    ("tokens_per_sec", "tgt tok/s"),
    ("valid_bleu", "valid BLEU"),
    ("test_bleu", "test BLEU"),
    ("test_chrf", "test chrF"),
    ("alignment_accuracy", "align. acc."),
    ("test_aer", "test AER (head mean)"),
    ("test_aer_best", "test AER (best head)"),
    ("p_vs_baseline", "p vs base"),
    ("run_dir", "run folders"),
)
SPREAD = {  # figures shown as mean ± std, with their decimals
    "last_quarter_gain": 2, "valid_bleu": 2, "test_bleu": 2, "test_chrf": 2,
    "alignment_accuracy": 3, "test_aer": 3, "test_aer_best": 3,
}  # fmt: skip


# ---------------------------------------------------------------- runs and configurations


def summarise_run(run_dir: Path, sweep: str) -> dict[str, Any]:
    """One CSV row: the numbers of `results.json` and the event file; None where missing
    (the significance and AER columns are filled later)."""
    results = read_results(run_dir)
    scalars = read_scalars(run_dir)
    tokens, alignment = scalars.values(TOKENS_TAG), scalars.values(ALIGNMENT_TAG)
    test = results.get("test", {})
    row: dict[str, Any] = dict.fromkeys(CSV_COLUMNS)
    row.update(
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
    return row


def convergence(scalars: Scalars, steps: int | None) -> dict[str, float | None]:
    """How near its end a run stopped improving, from its `valid/bleu` events:

    * best_step, minutes_to_best: the update of the best validation (the first, on a tie)
      and the wall minutes from the run's first event to it;
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
    if scalars.first_wall_time is not None:
        found["minutes_to_best"] = (wall - scalars.first_wall_time) / 60
    early = [value for _, at, value in bleu if steps and at <= 0.75 * steps]
    if early:
        found["last_quarter_gain"] = best - max(early)
    return found


@dataclass
class Configuration:
    """The runs of one sweep that differ only in their seed (rows sorted by seed)."""

    sweep: str
    label: str
    runs: list[Path]
    rows: list[dict[str, Any]]
    test: dict[str, Any] = field(default_factory=dict)  # `significance_summary` results

    def values(self, name: str) -> list[float]:
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
        rows = [summarise_run(run, sweep_dir.name) for run in members]
        for row in rows:
            row["model"] = label
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
    print(f"compare: left out: {error}", file=sys.stderr)
    unreadable.append(error)


def report_count(unreadable: list[RunReadError]) -> None:
    """One line on stderr counting the runs left out, when there are any."""
    if unreadable:
        print(f"compare: {left_out_line(len(unreadable))}", file=sys.stderr)


def left_out_line(count: int) -> str:
    """`2 runs could not be read and were left out`."""
    if count == 1:
        return "1 run could not be read and was left out"
    return f"{count} runs could not be read and were left out"


# ---------------------------------------------------------------- significance


@dataclass(frozen=True)
class TestSet:
    """The hypotheses of a run's `test.hyp` and the references they are scored against."""

    hypotheses: list[str]
    references: list[str]
    tgt_lang: str


def references_file(run_dir: Path) -> tuple[Path, str] | None:
    """`<data.root>/prepared/<data.name>/test.<tgt_lang>` of the run (a relative root is
    relative to the working folder, as in training); None for data without one (toy)."""
    data = read_config(run_dir).data
    if data.get("kind") != "parallel":
        return None
    return Path(data.root) / "prepared" / data.name / f"test.{data.tgt_lang}", data.tgt_lang


def read_test_set(run_dir: Path, cache: dict[Path, list[str]]) -> TestSet | None:
    """The run's test hypotheses and references; None (with a warning) when either is
    missing or they differ in length."""
    hypotheses_path = run_dir / "test.hyp"
    found = references_file(run_dir)
    if not hypotheses_path.is_file() or found is None:
        return None
    path, tgt_lang = found
    if path not in cache:
        if not path.is_file():
            print(f"{run_dir}: no references at {path}: no significance test", file=sys.stderr)
            cache[path] = []
        else:
            cache[path] = text_lines(path) or []
    references = cache[path]
    hypotheses = text_lines(hypotheses_path)
    if not references or hypotheses is None:
        return None
    if len(hypotheses) != len(references):
        print(f"{run_dir}: {len(hypotheses)} test hypotheses for {len(references)} "
              f"references in {path}: no significance test", file=sys.stderr)  # fmt: skip
        return None
    return TestSet(hypotheses, references, tgt_lang)


def text_lines(path: Path) -> list[str] | None:
    """The lines of a UTF-8 file; None, after one line on stderr, when it cannot be read."""
    try:
        return path.read_bytes().decode("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        print(f"compare: {path}: cannot be read ({error}): no significance test", file=sys.stderr)
        return None


def find_baseline(configurations: list[Configuration], patterns: list[str]) -> int | None:
    """The index of the sweep's baseline: the one configuration run with the first pattern
    (a command-line override) that only one configuration has; None when there is none."""
    overrides = [configuration.overrides() for configuration in configurations]
    for pattern in patterns:
        matching = [index for index, found in enumerate(overrides) if pattern in found]
        if len(matching) == 1:
            return matching[0]
    return None


def seedwise_tests(
    reference: Configuration,
    others: list[Configuration],
    tests: dict[str, TestSet | None],
    resamples: int,
) -> dict[tuple[int, int | None], BootstrapResult]:
    """For each seed of `reference` with a test set: one paired bootstrap of the runs of
    that seed in `others` against it. Keys (index in [reference, *others], seed)."""
    found: dict[tuple[int, int | None], BootstrapResult] = {}
    for seed, base_row in reference.by_seed().items():
        base = tests.get(base_row["run_dir"])
        if base is None:
            continue
        members = [(0, base_row)]
        for index, other in enumerate(others, 1):
            row = other.by_seed().get(seed)
            test = tests.get(row["run_dir"]) if row is not None else None
            if test is not None and test.references == base.references:
                members.append((index, row))
        systems = [(row["run_dir"], tests[row["run_dir"]].hypotheses) for _, row in members]
        results = paired_bootstrap(systems, base.references, base.tgt_lang, resamples=resamples)
        for (index, _), result in zip(members, results, strict=True):
            found[(index, seed)] = result
    return found


def summary(results: list[tuple[BootstrapResult, BootstrapResult]]) -> dict[str, Any]:
    """Seed-wise (system, reference) results → the configuration's largest p, the mean
    BLEU difference and whether it is significant (module docstring)."""
    if not results:
        return {"p": None, "delta": None, "significant": None, "seeds": 0, "p_values": []}
    p_values = [system.p_value for system, _ in results]
    deltas = [system.bleu - reference.bleu for system, reference in results]
    one_direction = all(delta > 0 for delta in deltas) or all(delta < 0 for delta in deltas)
    largest = max(p for p in p_values if p is not None)
    return {
        "p": largest,
        "delta": statistics.fmean(deltas),
        "significant": one_direction and largest < SIGNIFICANCE_LEVEL,
        "seeds": len(results),
        "p_values": p_values,
    }


def test_sweep(
    configurations: list[Configuration], baselines: list[str], resamples: int
) -> dict[str, Any]:
    """Fill the CI, baseline and runner-up columns of every row; returns what the
    markdown says about the sweep: the baseline's and the two best configurations' indices."""
    cache: dict[Path, list[str]] = {}
    tests = {
        row["run_dir"]: read_test_set(Path(row["run_dir"]), cache)
        for configuration in configurations
        for row in configuration.rows
    }
    baseline = find_baseline(configurations, baselines)
    if baseline is not None:
        base = configurations[baseline]
        others = [c for i, c in enumerate(configurations) if i != baseline]
        found = seedwise_tests(base, others, tests, resamples)
        for index, configuration in enumerate([base, *others]):
            pairs = []
            for row in configuration.rows:
                result = found.get((index, row["seed"]))
                if result is None:
                    continue
                set_interval(row, result)
                row["baseline"] = base.label
                if index:
                    row["p_vs_baseline"] = result.p_value
                    pairs.append((result, found[(0, row["seed"])]))
            if index:
                configuration.test["baseline"] = summary(pairs)
                for row in configuration.rows:
                    row["config_p_vs_baseline"] = configuration.test["baseline"]["p"]
                    row["significant_vs_baseline"] = configuration.test["baseline"]["significant"]
    for configuration in configurations:  # intervals of runs the baseline tests did not cover
        for row in configuration.rows:
            test = tests.get(row["run_dir"])
            if row["test_bleu_ci_low"] is None and test is not None:
                (alone,) = paired_bootstrap(
                    [(row["run_dir"], test.hypotheses)], test.references, test.tgt_lang,
                    resamples=resamples,
                )  # fmt: skip
                set_interval(row, alone)
    ranked = sorted(
        (i for i, c in enumerate(configurations) if c.mean("valid_bleu") is not None),
        key=lambda i: -configurations[i].mean("valid_bleu"),
    )
    best_two = ranked[:2] if len(ranked) >= 2 else []
    if best_two:
        best, runner_up = (configurations[i] for i in best_two)
        found = seedwise_tests(runner_up, [best], tests, resamples)
        pairs = [
            (found[(1, seed)], found[(0, seed)])
            for (index, seed) in found
            if index == 1 and (0, seed) in found
        ]
        best.test["runner_up"] = summary(pairs)
        for row in best.rows:
            result = found.get((1, row["seed"]))
            row["runner_up"] = runner_up.label
            row["p_vs_runner_up"] = None if result is None else result.p_value
            row["config_p_vs_runner_up"] = best.test["runner_up"]["p"]
            row["significant_vs_runner_up"] = best.test["runner_up"]["significant"]
    return {"baseline": baseline, "best_two": best_two}


def set_interval(row: dict[str, Any], result: BootstrapResult) -> None:
    row["test_bleu_ci_low"], row["test_bleu_ci_high"] = result.ci_low, result.ci_high


# ---------------------------------------------------------------- AER


def fill_aer(
    configurations: list[Configuration], device: str, cache: dict[Path, Any] | None = None
) -> None:
    """The test AER columns of every run with a best checkpoint and attention weights;
    `cache` (by the checkpoint's real path) scores a run linked into two sweeps once."""
    cache = {} if cache is None else cache
    for configuration in configurations:
        for run, row in zip(configuration.runs, configuration.rows, strict=True):
            checkpoint = run / BEST_CHECKPOINT
            if not checkpoint.is_file():
                continue
            key = checkpoint.resolve()
            if key not in cache:
                try:
                    cache[key] = checkpoint_aer(checkpoint, device)
                except (CheckpointError, AlignmentError, ValueError) as error:
                    print(f"{run}: no test AER ({error})", file=sys.stderr)
                    cache[key] = None
            found = cache[key]
            if found is None:
                continue
            row.update(
                test_aer=found.head_mean.aer,
                test_aer_precision=found.head_mean.precision,
                test_aer_recall=found.head_mean.recall,
                test_aer_best=found.best.aer,
                test_aer_best_head=found.best_name,
            )


def read_aligners(path: Path) -> list[dict[str, Any]]:
    """A `--baseline-aer` file (module docstring) as CSV rows of sweep `aligners`: one
    row for the short format, one per symmetrisation for `seq2seq-align-baseline --json`."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise SystemExit(f"--baseline-aer {path}: {error}") from error
    if isinstance(found, dict) and isinstance(found.get("scores"), dict):
        test = found["scores"].get("test")
        if not isinstance(test, dict) or not test:
            raise SystemExit(f"--baseline-aer {path}: no scores of the test part")
        name = str(found.get("aligner", path.stem))
        return [
            aligner_row(path, {"name": f"{name} {method}", "test_aer": scores.get("aer"),
                               **scores} if isinstance(scores, dict) else {})
            for method, scores in test.items()
        ]  # fmt: skip
    return [aligner_row(path, found)]


def aligner_row(path: Path, found: Any) -> dict[str, Any]:
    """One aligner's row from {"name", "test_aer", "precision", "recall"}."""
    if not isinstance(found, dict) or not isinstance(found.get("name"), str):
        raise SystemExit(f"--baseline-aer {path}: expected an object with a name and test_aer")
    numbers = {}
    for key in ("test_aer", "precision", "recall"):
        value = found.get(key)
        if (value is None and key != "test_aer") or isinstance(value, (int, float)):
            numbers[key] = value
        else:
            raise SystemExit(f"--baseline-aer {path}: {key} must be a number, got {value!r}")
    row: dict[str, Any] = dict.fromkeys(CSV_COLUMNS)
    row.update(
        sweep=ALIGNER_SWEEP,
        model=found["name"],
        test_aer=numbers["test_aer"],
        test_aer_precision=numbers["precision"],
        test_aer_recall=numbers["recall"],
        run_dir=str(path),
    )
    return row


# ---------------------------------------------------------------- linking runs


def link_runs(source: Path, target: Path, choice: str) -> list[Path]:
    """Link every run of `source` whose command line has `choice` (`group=option`; every
    seed's run) into `target`, numbered after the jobs there; a run already linked stays.
    `make compare` links the attention sweep's GRU runs into the encoder sweep this way."""
    group, _, option = choice.partition("=")
    unreadable: list[RunReadError] = []
    runs = [run for run in find_runs(source) if chosen(run, group, unreadable) == option]
    report_count(unreadable)
    if not runs:
        raise SystemExit(f"no run below {source} was started with {choice}")
    target.mkdir(parents=True, exist_ok=True)
    entries = [entry for entry in target.iterdir() if entry.name.split("_", 1)[0].isdigit()]
    linked = {entry.resolve() for entry in entries if entry.is_symlink()}
    number = max((int(entry.name.split("_", 1)[0]) for entry in entries), default=-1) + 1
    made = []
    for run in runs:
        if run.resolve() in linked:
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


# ---------------------------------------------------------------- output


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    """Raw numbers, one row per run; an empty cell where a value is missing."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            writer.writerow(["" if row[name] is None else row[name] for name in CSV_COLUMNS])


def spread(values: list[float], decimals: int) -> str:
    """`mean ± sample std` of several values, the value alone when there is one."""
    if not values:
        return MISSING
    if len(values) == 1:
        return f"{values[0]:.{decimals}f}"
    return f"{statistics.fmean(values):.{decimals}f} ± {statistics.stdev(values):.{decimals}f}"


def format_p(p: float | None) -> str:
    if p is None:
        return MISSING
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def run_folders(runs: list[Path]) -> str:
    """The run folders of a configuration: one, or a pattern with `*` for the job number
    and the seed when that describes them all, else all of them."""
    if len(runs) == 1:
        return str(runs[0])
    names = {
        re.sub(r"trainer\.seed=\d+", "trainer.seed=*", run.name.split("_", 1)[-1]) for run in runs
    }
    parents = {run.parent for run in runs}
    if len(names) == 1 and len(parents) == 1:
        return str(runs[0].parent / f"*_{names.pop()}")
    return "<br>".join(str(run) for run in runs)


def table_cell(configuration: Configuration, key: str, roles: dict[str, Any]) -> str:
    """One cell of a configuration's markdown row (`—` when missing)."""
    rows = configuration.rows
    if key == "model":
        return configuration.label.replace("|", "\\|")
    if key == "seeds":
        finished = len(configuration.values("valid_bleu"))
        return str(len(rows)) if finished == len(rows) else f"{finished}/{len(rows)}"
    if key == "run_dir":
        return run_folders(configuration.runs).replace("|", "\\|")
    if key == "p_vs_baseline":
        if roles.get("is_baseline"):
            return "base"
        test = configuration.test.get("baseline")
        if not test or test["p"] is None:
            return MISSING
        return format_p(test["p"]) + (f" {MARK}" if test["significant"] else "")
    if key in SPREAD:
        cell = spread(configuration.values(key), SPREAD[key])
        if key == "test_bleu" and configuration.test.get("baseline", {}).get("significant"):
            cell += f" {MARK}"
        if key == "test_aer_best" and cell != MISSING:
            heads = list(dict.fromkeys(configuration.values("test_aer_best_head")))
            cell += f" ({', '.join(heads)})"
        return cell
    mean = configuration.mean(key)
    if mean is None:
        return MISSING
    if key in ("parameters", "steps"):
        return f"{round(mean):,}"
    if key == "best_step":
        minutes = configuration.mean("minutes_to_best")
        return f"{round(mean):,}" + (f", {minutes:.1f}" if minutes is not None else "")
    if key == "tokens_per_sec":
        return f"{mean:,.0f}"
    return f"{mean:.1f}"  # train_minutes


def markdown_table(configurations: list[Configuration], baseline: int | None) -> list[str]:
    lines = ["| " + " | ".join(header for _, header in TABLE_COLUMNS) + " |"]
    lines.append("|" + "---|" * len(TABLE_COLUMNS))
    for index, configuration in enumerate(configurations):
        roles = {"is_baseline": index == baseline}
        cells = [table_cell(configuration, key, roles) for key, _ in TABLE_COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def significance_table(configurations: list[Configuration], baseline: int | None) -> list[str]:
    """Per configuration: the BLEU difference to the baseline, the p of each seed and the
    95% confidence interval of each seed's test BLEU."""
    if not any(row["test_bleu_ci_low"] is not None for c in configurations for row in c.rows):
        return []
    base = None if baseline is None else configurations[baseline].label
    lines = [
        f"Test BLEU, paired bootstrap against `{base}` seed by seed "
        f"({BOOTSTRAP_RESAMPLES:,} resamples; {MARK}: p < {SIGNIFICANCE_LEVEL} for every seed, "
        "in one direction):" if base else
        "Test BLEU with its 95% confidence interval (no baseline in this sweep):",
        "",
        "| model | seeds tested | Δ test BLEU vs base | p per seed | 95% CI of test BLEU per seed |",
        "|---|---|---|---|---|",
    ]  # fmt: skip
    for index, configuration in enumerate(configurations):
        test = configuration.test.get("baseline")
        intervals = (
            "; ".join(
                f"[{row['test_bleu_ci_low']:.2f}, {row['test_bleu_ci_high']:.2f}]"
                for row in configuration.rows
                if row["test_bleu_ci_low"] is not None
            )
            or MISSING
        )
        if index == baseline:
            tested, delta, p_values = "base", MISSING, MISSING
        elif test is None or not test["seeds"]:
            tested, delta, p_values = "0", MISSING, MISSING
        else:
            tested = str(test["seeds"])
            delta = f"{test['delta']:+.2f}" + (f" {MARK}" if test["significant"] else "")
            p_values = ", ".join(format_p(p) for p in test["p_values"])
        label = configuration.label.replace("|", "\\|")
        lines.append(f"| {label} | {tested} | {delta} | {p_values} | {intervals} |")
    return lines


def names(configurations: list[Configuration]) -> str:
    return ", ".join(f"`{c.label}` ({c.test['baseline']['delta']:+.2f})" for c in configurations)


def reading_section(
    sweeps: dict[str, list[Configuration]], roles: dict[str, dict[str, Any]], seeds: int
) -> list[str]:
    """`Reading the tables`: what the numbers allow one to conclude, from the data."""
    lines = [
        "## Reading the tables",
        "",
        "Conclusions are drawn only where differences are significant. A configuration "
        "differs from its sweep's baseline when the paired bootstrap of test BLEU "
        f"({BOOTSTRAP_RESAMPLES:,} resamples of the test sentences, sacrebleu) gives "
        f"p < {SIGNIFICANCE_LEVEL} against the baseline's run of the same seed, for every "
        f"seed, all in the same direction ({MARK}). Differences without {MARK}, and "
        "rankings by valid BLEU alone, are not evidence that one configuration is better.",
    ]
    if seeds > 1:
        lines.append("")
        lines.append(
            f"± is the sample standard deviation over the seeds (n = {seeds} per "
            "configuration unless the seeds column says fewer finished): it shows how "
            "much initialisation and data order move a figure, which the bootstrap over "
            "test sentences does not."
        )
    else:
        lines.append("")
        lines.append(
            "Each configuration was trained with one seed: nothing here measures how much "
            "another initialisation or data order would move its figures, so even a "
            "significant difference holds for that seed only."
        )
    for sweep, configurations in sweeps.items():
        baseline, best_two = roles[sweep]["baseline"], roles[sweep]["best_two"]
        lines.append("")
        if baseline is None:
            lines.append(f"- **{sweep}**: no baseline configuration, nothing tested against one.")
        else:
            tested = [
                c for i, c in enumerate(configurations)
                if i != baseline and c.test.get("baseline", {}).get("seeds")
            ]  # fmt: skip
            better = [c for c in tested if c.test["baseline"]["significant"]
                      and c.test["baseline"]["delta"] > 0]  # fmt: skip
            worse = [c for c in tested if c.test["baseline"]["significant"]
                     and c.test["baseline"]["delta"] < 0]  # fmt: skip
            same = [c for c in tested if not c.test["baseline"]["significant"]]
            untested = len(configurations) - 1 - len(tested)
            parts = [f"- **{sweep}** (baseline `{configurations[baseline].label}`):"]
            parts.append(f"significantly better test BLEU: {names(better) or 'none'};")
            parts.append(f"significantly worse: {names(worse) or 'none'};")
            parts.append(f"no significant difference, so no conclusion: {names(same) or 'none'}.")
            if untested:
                parts.append(f"{untested} configuration(s) could not be tested (no test.hyp "
                             "or references, or no run of a seed the baseline has).")  # fmt: skip
            lines.append(" ".join(parts))
        if best_two:
            best, runner_up = (configurations[i] for i in best_two)
            test = best.test.get("runner_up", {})
            if test.get("seeds"):
                verdict = (
                    f"their test BLEU differ by {test['delta']:+.2f}, p = {format_p(test['p'])}: "
                    + ("significant." if test["significant"] else
                       "not significant, so the valid ranking of these two is not a conclusion.")
                )  # fmt: skip
            else:
                verdict = "their test BLEU could not be tested."
            lines.append(
                f"- **{sweep}**, the two best by mean valid BLEU: `{best.label}` "
                f"({best.mean('valid_bleu'):.2f}) and `{runner_up.label}` "
                f"({runner_up.mean('valid_bleu'):.2f}); {verdict}"
            )
    return lines


def aligner_section(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = [
        "## Word aligners",
        "",
        "The same hand-aligned test pairs aligned by aligners that are not translation "
        "models (`--baseline-aer`), beside the models' test AER above:",
        "",
        "| aligner | test AER | precision | recall |",
        "|---|---|---|---|",
    ]
    for row in rows:
        cells = [
            MISSING if row[key] is None else f"{row[key]:.3f}"
            for key in ("test_aer", "test_aer_precision", "test_aer_recall")
        ]
        lines.append(f"| {row['model']} | " + " | ".join(cells) + " |")
    return lines


def write_markdown(
    sweeps: dict[str, list[Configuration]],
    roles: dict[str, dict[str, Any]],
    images: dict[str, Path],
    aligners: list[dict[str, Any]],
    path: Path,
    command: str,
    made_by: str | None = None,
    unreadable: list[RunReadError] | None = None,
) -> None:
    """COMPARISON.md: how it was made, the runs left out, per sweep its table, its
    significance table and its alignment image, the aligners, then what can be read from
    them."""
    trained = f"Runs trained by `{made_by}`; this file written by" if made_by else "Written by"
    seeds = max((len(c.rows) for cs in sweeps.values() for c in cs), default=1)
    lines = [
        "# Comparison",
        "",
        f"{trained} `{command}`. Every run of a sweep has the same data, split and step "
        "budget, and a parameter count within ±10% of the others (the `compare_<family>` "
        "presets in `configs/experiment/`); the runs of a configuration differ only in "
        "`trainer.seed` (initialisation and data order). Each figure is the mean ± sample "
        "standard deviation over the seeds (seeds: how many finished). tgt tok/s: median "
        "of `train/tokens_per_sec`; valid BLEU: the best validation; test BLEU / chrF: the "
        "best checkpoint on the test split (`results.json`); best at: the update of the best "
        "validation and the minutes to it; last ¼ gain: the best valid BLEU minus the best "
        "within the first three quarters of the budget (under 0.5: converged for this "
        "budget); align. acc.: the last "
        "`valid/alignment_accuracy` (share of probe words whose strongest attention falls "
        "on the linked source word); test AER: alignment error rate (Och & Ney 2003) of the "
        "best checkpoint's teacher-forced attention on the hand-aligned test pairs "
        "(`seq2seq/align/gold/`), argmax links, the last layer's head mean and the layer × "
        "head with the lowest AER on the valid gold pairs (named `layer L head H`), `—` for "
        "models without attention; p vs base: the paired bootstrap of test BLEU against the "
        f"sweep's baseline, the largest p over the seeds ({MARK}: significant, below).",
    ]
    if unreadable:
        lines += ["", f"{left_out_line(len(unreadable))}:", ""]
        lines += [f"- {error}" for error in unreadable]
    for sweep, configurations in sweeps.items():
        baseline = roles[sweep]["baseline"]
        lines += ["", f"## {sweep}", "", *markdown_table(configurations, baseline)]
        table = significance_table(configurations, baseline)
        if table:
            lines += ["", *table]
        if sweep in images:
            relative = images[sweep].relative_to(path.parent)
            lines += ["", f"![alignments of the {sweep} sweep]({relative.as_posix()})"]
    section = aligner_section(aligners)
    if section:
        lines += ["", *section]
    lines += ["", *reading_section(sweeps, roles, seeds)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def alignment_image(sweep_dir: Path, out: Path, device: str) -> Path | None:
    """The side-by-side alignment of the first probe (scripts/compare_alignments.py), one
    panel per configuration (its first seed); None when the sweep has no checkpoint or no
    run with attention weights."""
    try:
        runs = one_per_configuration(runs_below(sweep_dir, BEST_CHECKPOINT))
        if not runs:
            raise FileNotFoundError(f"no {BEST_CHECKPOINT} below {sweep_dir}")
        checkpoints = [run / BEST_CHECKPOINT for run in runs]
        sentence, panels = collect_panels(checkpoints, device, None, None)
    except (FileNotFoundError, CheckpointError, ValueError) as error:
        print(f"{sweep_dir}: no alignment image ({error})", file=sys.stderr)
        return None
    if not panels:
        return None
    title = f"{sentence}  (greedy; last layer, mean of heads; first seed)"
    figure = draw_comparison(panels, title)
    figure.savefig(out, dpi=120)
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sweeps", nargs="+", type=Path, help="sweep folders (Hydra multirun)")
    parser.add_argument("--out-dir", type=Path, default=Path("."), help="where to write")
    parser.add_argument("--no-image", action="store_true", help="skip the alignment images")
    parser.add_argument("--no-aer", action="store_true", help="skip the test AER columns")
    parser.add_argument("--device", default="cpu", help="device for the images and the AER")
    parser.add_argument("--made-by", help="the command that trained the runs, for the header")
    parser.add_argument(
        "--baseline", action="append", metavar="OVERRIDE",
        help="command-line override that marks a sweep's baseline configuration (repeatable, "
        f"first match wins; default: {' then '.join(DEFAULT_BASELINES)})",
    )  # fmt: skip
    parser.add_argument(
        "--baseline-aer", action="append", type=Path, default=[], metavar="FILE.json",
        help="a word aligner's test AER (module docstring), repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--resamples", type=int, default=BOOTSTRAP_RESAMPLES, help="bootstrap resamples"
    )
    parser.add_argument(
        "--best", metavar="GROUP", help="only print the GROUP option with the best mean valid BLEU"
    )
    parser.add_argument("--link-into", type=Path, metavar="SWEEP",
                        help="only link the first sweep's --choice runs into SWEEP")  # fmt: skip
    parser.add_argument("--choice", metavar="GROUP=OPTION", help="the runs --link-into links")
    return parser


def print_best(sweep: Path, group: str) -> int:
    """`--best GROUP`: print the best option; unreadable runs are named and left out; 2
    (with one line) when no finished run sets the group."""
    unreadable: list[RunReadError] = []
    try:
        choice = best_choice(sweep, group, unreadable)
    except FileNotFoundError as error:
        choice, missing = None, error
    for error in unreadable:
        print(f"compare: left out: {error}", file=sys.stderr)
    report_count(unreadable)
    if choice is None:
        print(f"compare: {missing}", file=sys.stderr)
        return 2
    print(choice)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.best:
        return print_best(args.sweeps[0], args.best)
    if args.link_into:
        if not args.choice or "=" not in args.choice:
            raise SystemExit("--link-into needs --choice GROUP=OPTION")
        for link in link_runs(args.sweeps[0], args.link_into, args.choice):
            print(link)
        return 0
    args.out_dir.mkdir(parents=True, exist_ok=True)
    aligners = [row for path in args.baseline_aer for row in read_aligners(path)]
    unreadable: list[RunReadError] = []
    sweeps = {sweep.name: sweep_configurations(sweep, unreadable) for sweep in args.sweeps}
    if len(sweeps) != len(args.sweeps):
        raise SystemExit("two sweep folders have the same name; give folders with distinct names")
    report_count(unreadable)
    sweeps = {name: configurations for name, configurations in sweeps.items() if configurations}
    if not sweeps:
        shown = ", ".join(map(str, args.sweeps))
        print(f"compare: no run could be read below {shown}: nothing to compare", file=sys.stderr)
        return 2
    baselines = args.baseline or list(DEFAULT_BASELINES)
    roles = {
        name: test_sweep(configurations, baselines, args.resamples)
        for name, configurations in sweeps.items()
    }
    if not args.no_aer:
        scored: dict[Path, Any] = {}
        for configurations in sweeps.values():
            fill_aer(configurations, args.device, scored)
    images = {}
    for sweep in [] if args.no_image else args.sweeps:
        image = alignment_image(sweep, args.out_dir / f"comparison_{sweep.name}.png", args.device)
        if image is not None:
            images[sweep.name] = image
    all_rows = [row for cs in sweeps.values() for c in cs for row in c.rows] + aligners
    write_csv(all_rows, args.out_dir / "comparison.csv")
    command = "python scripts/compare.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    write_markdown(sweeps, roles, images, aligners, args.out_dir / "COMPARISON.md", command,
                   args.made_by, unreadable)  # fmt: skip
    print(args.out_dir / "COMPARISON.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
