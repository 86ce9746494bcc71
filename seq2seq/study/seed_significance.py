"""Paired significance of a sweep's configurations, seed by seed, on the test set.

Each run's `test.hyp` is scored against the references of its test split (`test.ref`
beside it, or the prepared split of older runs: `references_file`) with
`seq2seq.metrics.paired_bootstrap` (sacrebleu's paired bootstrap resampling, Koehn 2004;
1,000 resamples). A configuration's
run of seed s is tested against the baseline's run of the same seed s, so that the two
differ in the configuration only, not in the initialisation or the data order.

A configuration differs significantly from the baseline when p < 0.05 for every seed tested
and all its seeds' BLEU differences have the same sign; its p is the largest of its seeds'.
In a sweep with twins (`find_twins`: each guided configuration and the same configuration
unguided), each configuration with the twin marker is tested against its own twin instead of
one baseline for the whole sweep; with the rule SOFT_TWINS (`find_soft_twins`) each
configuration with a region other than soft, or more heads, is tested against the same
model with soft attention, one head and the same score. The two configurations with the best mean valid BLEU are
tested against each other the same way (is the validation ranking of the winner a conclusion?). Every run with a test set also
gets the 95% confidence interval of its test BLEU.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seq2seq.data.settings import source_name
from seq2seq.metrics import SIGNIFICANCE_LEVEL, BootstrapResult, paired_bootstrap
from seq2seq.study.reading import read_config
from seq2seq.study.sweep import (
    SOFT_TWINS,
    Configuration,
    find_baseline,
    find_soft_twins,
    find_twins,
    warn,
)


@dataclass(frozen=True)
class Hypotheses:
    """The hypotheses of a run's `test.hyp` and the references they are scored against."""

    hypotheses: list[str]
    references: list[str]
    tgt_lang: str


def references_file(run_dir: Path) -> tuple[Path, str] | None:
    """The references of the run's test split and their language: the run's own
    `test.ref` (written beside `test.hyp` by training), else, for a run made before it was
    written, `<data.root>/prepared/<data.name>/test.<tgt_lang>` (a relative root is relative
    to the working folder, as in training); None when neither can exist (a toy task)."""
    data = read_config(run_dir).data
    if (run_dir / "test.ref").is_file():
        return run_dir / "test.ref", data.tgt_lang
    if source_name(data) != "tabular":
        return None
    return Path(data.root) / "prepared" / data.name / f"test.{data.tgt_lang}", data.tgt_lang


def read_test_set(run_dir: Path, cache: dict[Path, list[str]]) -> Hypotheses | None:
    """The run's test hypotheses and references; None (with a warning) when either is
    missing or they differ in length. `cache` keeps each references file read once."""
    hypotheses_path = run_dir / "test.hyp"
    found = references_file(run_dir)
    if not hypotheses_path.is_file() or found is None:
        return None
    path, tgt_lang = found
    if path not in cache:
        if not path.is_file():
            warn(f"{run_dir}: no references at {path}: no significance test")
            cache[path] = []
        else:
            cache[path] = text_lines(path) or []
    references = cache[path]
    hypotheses = text_lines(hypotheses_path)
    if not references or hypotheses is None:
        return None
    if len(hypotheses) != len(references):
        warn(f"{run_dir}: {len(hypotheses)} test hypotheses for {len(references)} "
             f"references in {path}: no significance test")  # fmt: skip
        return None
    return Hypotheses(hypotheses, references, tgt_lang)


def text_lines(path: Path) -> list[str] | None:
    """The lines of a UTF-8 file; None, after one line on stderr, when it cannot be read."""
    try:
        return path.read_bytes().decode("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        warn(f"{path}: cannot be read ({error}): no significance test")
        return None


def seedwise_tests(
    reference: Configuration,
    others: list[Configuration],
    tests: dict[str, Hypotheses | None],
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


def assess(
    configurations: list[Configuration],
    baselines: list[str],
    resamples: int,
    twin_marker: str | None = None,
) -> dict[str, Any]:
    """Fill the interval, baseline and runner-up columns of every row; returns what the
    report says about the sweep: the baseline's and the two best configurations' indices,
    and the twins ({configuration: its twin}; then there is no single baseline)."""
    cache: dict[Path, list[str]] = {}
    tests = {
        row["run_dir"]: read_test_set(Path(row["run_dir"]), cache)
        for configuration in configurations
        for row in configuration.rows
    }
    twins = {} if not twin_marker else (
        find_soft_twins(configurations) if twin_marker == SOFT_TWINS
        else find_twins(configurations, twin_marker)
    )  # fmt: skip
    baseline = None if twins else find_baseline(configurations, baselines)
    if baseline is not None:
        against_baseline(configurations, baseline, tests, resamples)
    for index, twin in twins.items():
        against_twin(configurations[index], configurations[twin], tests, resamples)
    fill_missing_intervals(configurations, tests, resamples)
    best_two = best_by_valid(configurations)
    if best_two:
        against_runner_up(*(configurations[index] for index in best_two), tests, resamples)
    return {"baseline": baseline, "best_two": best_two, "twins": twins}


def against_baseline(
    configurations: list[Configuration], baseline: int, tests: dict, resamples: int
) -> None:
    """Every configuration's runs against the baseline's run of the same seed."""
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


def against_twin(
    configuration: Configuration, twin: Configuration, tests: dict, resamples: int
) -> None:
    """The configuration's runs against its twin's run of the same seed (the baseline
    columns, naming the twin)."""
    found = seedwise_tests(twin, [configuration], tests, resamples)
    pairs = []
    for index, member in ((0, twin), (1, configuration)):
        for row in member.rows:
            result = found.get((index, row["seed"]))
            if result is not None:
                set_interval(row, result)
    for row in configuration.rows:
        result = found.get((1, row["seed"]))
        row["baseline"] = twin.label
        if result is None:
            continue
        row["p_vs_baseline"] = result.p_value
        pairs.append((result, found[(0, row["seed"])]))
    configuration.test["baseline"] = summary(pairs)
    for row in configuration.rows:
        row["config_p_vs_baseline"] = configuration.test["baseline"]["p"]
        row["significant_vs_baseline"] = configuration.test["baseline"]["significant"]


def fill_missing_intervals(
    configurations: list[Configuration], tests: dict, resamples: int
) -> None:
    """The 95% interval of each run with a test set that no baseline test covered."""
    for configuration in configurations:
        for row in configuration.rows:
            test = tests.get(row["run_dir"])
            if row["test_bleu_ci_low"] is None and test is not None:
                (alone,) = paired_bootstrap(
                    [(row["run_dir"], test.hypotheses)], test.references, test.tgt_lang,
                    resamples=resamples,
                )  # fmt: skip
                set_interval(row, alone)


def best_by_valid(configurations: list[Configuration]) -> list[int]:
    """The indices of the two configurations with the best mean valid BLEU ([] with fewer)."""
    ranked = sorted(
        (i for i, c in enumerate(configurations) if c.mean("valid_bleu") is not None),
        key=lambda i: -configurations[i].mean("valid_bleu"),
    )
    return ranked[:2] if len(ranked) >= 2 else []


def against_runner_up(
    best: Configuration, runner_up: Configuration, tests: dict, resamples: int
) -> None:
    """The best configuration's runs against the runner-up's run of the same seed."""
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


def set_interval(row: dict[str, Any], result: BootstrapResult) -> None:
    row["test_bleu_ci_low"], row["test_bleu_ci_high"] = result.ci_low, result.ci_high
