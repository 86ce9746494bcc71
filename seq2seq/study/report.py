"""The comparison report: `comparison.csv` (one row per run) and `COMPARISON.md` (one row
per configuration, each figure the mean ± sample standard deviation over its seeds; a
single value without ±), with the significance tables, the alignment images, the word
aligners' rows and what the tables allow one to conclude.

The Markdown table of a sweep has these columns: model (the settings that differ within
the sweep), seeds, parameters, steps, training minutes, the update and minutes of the best
validation and the valid BLEU gained in the last quarter of the budget (`convergence`),
tokens/s (median of `train/tokens_per_sec`), best valid BLEU, test BLEU and chrF (the best
checkpoint, `results.json`), alignment accuracy (last `valid/alignment_accuracy`), test AER
of the last layer's head mean, of the head chosen on the valid gold pairs and of a guided
model's guided head (`—` without attention or guidance), then, in a sweep with a model
that has an alignment layer (`alignment=layer`), the test AER of that layer (`—` for the
models without one; a sweep without such a model has no such column), the test AER of each
run with its run of the other direction, symmetrised, in a sweep read with its reverse sweep
(`seq2seq.study.both_directions`; otherwise no such column), the p-value against the
sweep's baseline, the run folders.

`write_report` does it all for a list of sweep folders: read them (`seq2seq.study.sweep`),
test them (`seq2seq.study.seed_significance`), add the AER columns and the aligners' rows
(`seq2seq.study.aer_rows`) and the images (`seq2seq.study.alignments`), then write both files.
"""

from __future__ import annotations

import csv
import os
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seq2seq.metrics import BOOTSTRAP_RESAMPLES, SIGNIFICANCE_LEVEL
from seq2seq.output_folders import check_output_place, place_error
from seq2seq.study.aer_rows import fill_aer, read_aligners
from seq2seq.study.alignments import sweep_image
from seq2seq.study.both_directions import BOTH_THRESHOLD, REVERSE_SUFFIX, fill_both
from seq2seq.study.reading import RunReadError
from seq2seq.study.seed_significance import assess
from seq2seq.study.sweep import (
    DEFAULT_BASELINES,
    ROW_KEYS,
    SOFT_TWINS,
    Configuration,
    left_out_line,
    report_count,
    sweep_configurations,
    warn,
)

MISSING = "—"
MARK = "†"  # significant: p < SIGNIFICANCE_LEVEL for every seed, in one direction
NEAR_CONVERGED_GAIN = 0.5  # a run whose last ¼ gain is under this is near convergence
REPORT_NAME, CSV_NAME = "COMPARISON.md", "comparison.csv"
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
    ("test_aer_best", "test AER (chosen head)"),
    ("test_aer_guided", "test AER (guided head)"),
    ("test_aer_layer", "test AER (alignment layer)"),
    ("test_aer_both", "test AER (both directions)"),
    ("p_vs_baseline", "p vs base"),
    ("run_dir", "run folders"),
)
SPREAD = {  # figures shown as mean ± std, with their decimals
    "last_quarter_gain": 2, "valid_bleu": 2, "test_bleu": 2, "test_chrf": 2,
    "alignment_accuracy": 3, "test_aer": 3, "test_aer_best": 3, "test_aer_guided": 3,
    "test_aer_layer": 3, "test_aer_both": 3,
}  # fmt: skip
# Columns shown only in a sweep where some run has a value: the alignment layer's AER and
# that of both directions
OPTIONAL_COLUMNS = frozenset({"test_aer_layer", "test_aer_both"})


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    """Raw numbers, one row per run; an empty cell where a value is missing."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(ROW_KEYS)
        for row in rows:
            writer.writerow(["" if row[name] is None else row[name] for name in ROW_KEYS])


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


def bases(baseline: int | None, twins: dict[int, int]) -> set[int]:
    """The configurations others are tested against: the baseline, or every twin."""
    return set(twins.values()) if twins else {baseline} - {None}


def sweep_columns(configurations: list[Configuration]) -> list[tuple[str, str]]:
    """The table's (key, header) columns for a sweep: TABLE_COLUMNS less the
    OPTIONAL_COLUMNS no run of the sweep has a value in."""
    return [
        (key, header) for key, header in TABLE_COLUMNS
        if key not in OPTIONAL_COLUMNS or any(c.values(key) for c in configurations)
    ]  # fmt: skip


def markdown_table(
    configurations: list[Configuration], baseline: int | None, twins: dict[int, int]
) -> list[str]:
    columns = sweep_columns(configurations)
    lines = ["| " + " | ".join(header for _, header in columns) + " |"]
    lines.append("|" + "---|" * len(columns))
    for index, configuration in enumerate(configurations):
        roles = {"is_baseline": index in bases(baseline, twins)}
        cells = [table_cell(configuration, key, roles) for key, _ in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def significance_table(
    configurations: list[Configuration],
    baseline: int | None,
    twins: dict[int, int],
    twin_marker: str | None,
) -> list[str]:
    """Per configuration: the BLEU difference to the baseline (or its twin), the p of each
    seed and the 95% confidence interval of each seed's test BLEU."""
    if not any(row["test_bleu_ci_low"] is not None for c in configurations for row in c.rows):
        return []
    base = None if baseline is None else f"`{configurations[baseline].label}`"
    if twins and twin_marker == SOFT_TWINS:
        base = "each configuration's twin with soft attention, one head and the same score"
    elif twins:
        base = f"each `{twin_marker}` configuration's twin (the same without it)"
    lines = [
        f"Test BLEU, paired bootstrap against {base} seed by seed "
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
        if index in bases(baseline, twins):
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
        "",
        f"± is the sample standard deviation over the seeds (n = {seeds} per "
        "configuration unless the seeds column says fewer finished): it shows how "
        "much initialisation and data order move a figure, which the bootstrap over "
        "test sentences does not." if seeds > 1 else
        "Each configuration was trained with one seed: nothing here measures how much "
        "another initialisation or data order would move its figures, so even a "
        "significant difference holds for that seed only.",
    ]  # fmt: skip
    for sweep, configurations in sweeps.items():
        baseline, best_two = roles[sweep]["baseline"], roles[sweep]["best_two"]
        twins = roles[sweep].get("twins")
        if twins:
            lines += ["", twin_verdict(sweep, configurations, twins)]
        else:
            lines += ["", baseline_verdict(sweep, configurations, baseline)]
        if best_two:
            best, runner_up = (configurations[i] for i in best_two)
            lines.append(runner_up_verdict(sweep, best, runner_up))
    return lines


def baseline_verdict(sweep: str, configurations: list[Configuration], baseline: int | None) -> str:
    """The configurations significantly better, worse and not different from the baseline."""
    if baseline is None:
        return f"- **{sweep}**: no baseline configuration, nothing tested against one."
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
    return " ".join(parts)


def twin_verdict(sweep: str, configurations: list[Configuration], twins: dict[int, int]) -> str:
    """Each configuration tested against its twin: better, worse or not different."""
    verdicts = {"better": [], "worse": [], "same": [], "untested": []}
    for index, twin in twins.items():
        configuration, test = configurations[index], configurations[index].test.get("baseline", {})
        pair = f"`{configuration.label}` against `{configurations[twin].label}`"
        if not test.get("seeds"):
            verdicts["untested"].append(pair)
            continue
        pair += f" ({test['delta']:+.2f})"
        kind = "same" if not test["significant"] else "better" if test["delta"] > 0 else "worse"
        verdicts[kind].append(pair)
    parts = [f"- **{sweep}** (each configuration against its twin):",
             f"significantly better test BLEU: {', '.join(verdicts['better']) or 'none'};",
             f"significantly worse: {', '.join(verdicts['worse']) or 'none'};",
             "no significant difference, so no conclusion: "
             f"{', '.join(verdicts['same']) or 'none'}."]  # fmt: skip
    if verdicts["untested"]:
        parts.append(f"Not tested (no test.hyp or no run of the same seed): "
                     f"{', '.join(verdicts['untested'])}.")  # fmt: skip
    return " ".join(parts)


def runner_up_verdict(sweep: str, best: Configuration, runner_up: Configuration) -> str:
    """Whether the two best configurations by mean valid BLEU differ on the test set."""
    test = best.test.get("runner_up", {})
    if test.get("seeds"):
        verdict = (
            f"their test BLEU differ by {test['delta']:+.2f}, p = {format_p(test['p'])}: "
            + ("significant." if test["significant"] else
               "not significant, so the valid ranking of these two is not a conclusion.")
        )  # fmt: skip
    else:
        verdict = "their test BLEU could not be tested."
    return (
        f"- **{sweep}**, the two best by mean valid BLEU: `{best.label}` "
        f"({best.mean('valid_bleu'):.2f}) and `{runner_up.label}` "
        f"({runner_up.mean('valid_bleu'):.2f}); {verdict}"
    )


def aligner_section(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = [
        "## Word aligners",
        "",
        "The same hand-aligned test pairs aligned by aligners that are not translation "
        "models (`report.baseline_aer`), beside the models' test AER above:",
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


@dataclass
class ReportSettings:
    """How `write_report` reads, tests and writes (the `report` node of `seq2seq-compare`)."""

    out_dir: Path = Path(".")
    # Where comparison.csv and the images go; None: beside COMPARISON.md (the full budget
    # keeps them in docs/results/, the site's results page, and COMPARISON.md at the top).
    files_dir: Path | None = None
    image: bool = True  # the alignment image of each sweep
    aer: bool = True  # the test AER columns
    device: str = "cpu"  # for the images and the AER
    baselines: list[str] = field(default_factory=lambda: list(DEFAULT_BASELINES))
    # An override that marks a configuration tested against its twin without it (a sweep
    # with twins has no single baseline); None: no twins
    twin_marker: str | None = "alignment=guided"
    # The same for a configuration with an alignment layer; a sweep's twins are found by
    # the first of the two markers one of its configurations was run with
    layer_marker: str | None = "alignment=layer"
    # True: every sweep with a region other than soft, or more heads, tests each such
    # configuration against its twin with soft attention, one head and the same score
    # (`seq2seq.study.sweep.find_soft_twins`; the regions and heads comparison)
    soft_twins: bool = False
    baseline_aer: list[Path] = field(default_factory=list)  # word aligners' files
    resamples: int = BOOTSTRAP_RESAMPLES
    command: str = "seq2seq-compare"  # what wrote the report, for its header
    made_by: str | None = None  # what trained the runs, for its header


def write_report(sweep_dirs: list[Path], settings: ReportSettings) -> Path | None:
    """Read, test and describe the sweeps; write `COMPARISON.md` into `settings.out_dir`
    (returned) and `comparison.csv` and the images into `settings.files_dir`. Runs that cannot be read are named on stderr,
    counted there and in the report; None, after one line, when no run could be read.
    FileNotFoundError for a folder without runs, AlignerFileError for a bad aligner file."""
    if len({path.name for path in sweep_dirs}) != len(sweep_dirs):
        raise ValueError("two sweep folders have the same name; give folders with distinct names")
    aligners = [row for path in settings.baseline_aer for row in read_aligners(Path(path))]
    unreadable: list[RunReadError] = []
    sweeps = {path.name: sweep_configurations(path, unreadable) for path in sweep_dirs}
    report_count(unreadable)
    sweeps = {name: configurations for name, configurations in sweeps.items() if configurations}
    if not sweeps:
        shown = ", ".join(map(str, sweep_dirs))
        warn(f"no run could be read below {shown}: nothing to compare")
        return None
    out_dir = Path(settings.out_dir)
    files_dir = out_dir if settings.files_dir is None else Path(settings.files_dir)
    for folder in (out_dir, files_dir):
        check_output_place(folder)  # one line before the statistics, not a traceback after
    markers = [m for m in (settings.twin_marker, settings.layer_marker) if m]
    roles = {}
    for name, configurations in sweeps.items():
        marker = SOFT_TWINS if settings.soft_twins else sweep_marker(configurations, markers)
        found = assess(configurations, list(settings.baselines), settings.resamples, marker)
        roles[name] = found | {"marker": marker}
    if settings.aer:
        scored: dict[Path, Any] = {}
        for configurations in sweeps.values():
            fill_aer(configurations, settings.device, scored)
        for name, configurations in sweeps.items():
            if name + REVERSE_SUFFIX in sweeps:
                fill_both(configurations, sweeps[name + REVERSE_SUFFIX], settings.device)
    try:
        for folder in (out_dir, files_dir):
            folder.mkdir(parents=True, exist_ok=True)
        images = sweep_images(sweep_dirs, files_dir, settings.device) if settings.image else {}
        rows = [row for cs in sweeps.values() for c in cs for row in c.rows] + aligners
        write_csv(rows, files_dir / CSV_NAME)
        report = Report(sweeps, roles, images, aligners, unreadable)
        path = out_dir / REPORT_NAME
        path.write_text("\n".join(report.lines(path, settings)) + "\n", encoding="utf-8")
    except OSError as error:  # a disk filled or a folder made read-only meanwhile
        raise place_error(error, out_dir) from error
    return path


def sweep_marker(configurations: list[Configuration], markers: list[str]) -> str | None:
    """The first of `markers` (overrides such as `alignment=guided`) that a configuration
    of the sweep was run with: its configurations are tested against their twins without
    it; None when none was."""
    overrides = set().union(*(configuration.overrides() for configuration in configurations))
    return next((marker for marker in markers if marker in overrides), None)


def sweep_images(sweep_dirs: list[Path], out_dir: Path, device: str) -> dict[str, Path]:
    """`comparison_<sweep>.png` of each sweep that has one."""
    images = {}
    for sweep in sweep_dirs:
        image = sweep_image(sweep, out_dir / f"comparison_{sweep.name}.png", device)
        if image is not None:
            images[sweep.name] = image
    return images


@dataclass
class Report:
    """What COMPARISON.md shows: the sweeps' configurations, each sweep's baseline and two
    best (`roles`, from `assess`), the images, the aligners' rows and the runs left out."""

    sweeps: dict[str, list[Configuration]]
    roles: dict[str, dict[str, Any]]
    images: dict[str, Path]
    aligners: list[dict[str, Any]]
    unreadable: list[RunReadError]

    def lines(self, path: Path, settings: ReportSettings) -> list[str]:
        """How it was made, the runs left out, per sweep its table, its significance table
        and its alignment image, the aligners, then what can be read from them."""
        lines = header_lines(settings.command, settings.made_by)
        if self.unreadable:
            lines += ["", f"{left_out_line(len(self.unreadable))}:", ""]
            lines += [f"- {error}" for error in self.unreadable]
        for sweep, configurations in self.sweeps.items():
            baseline, twins = self.roles[sweep]["baseline"], self.roles[sweep].get("twins", {})
            lines += ["", f"## {sweep}", "", *markdown_table(configurations, baseline, twins)]
            lines += ["", cost_line(configurations)]
            marker = self.roles[sweep].get("marker")
            table = significance_table(configurations, baseline, twins, marker)
            if table:
                lines += ["", *table]
            if sweep in self.images:
                relative = Path(os.path.relpath(self.images[sweep], path.parent))
                lines += ["", f"![alignments of the {sweep} sweep]({relative.as_posix()})"]
        section = aligner_section(self.aligners)
        if section:
            lines += ["", *section]
        seeds = max((len(c.rows) for cs in self.sweeps.values() for c in cs), default=1)
        return lines + ["", *reading_section(self.sweeps, self.roles, seeds)]


def cost_line(configurations: list[Configuration]) -> str:
    """What a sweep's finished runs cost (the sums of their `results.json` minutes, on each
    run's own clock, validations included, and updates; a run linked in from another sweep
    counts in each) and which runs are not near convergence: a last ¼ gain of
    `NEAR_CONVERGED_GAIN` BLEU or more."""
    rows = [row for configuration in configurations for row in configuration.rows]
    minutes = [row["train_minutes"] for row in rows if row["train_minutes"] is not None]
    updates = sum(row["steps"] for row in rows if row["steps"] is not None)
    line = (
        f"Cost: {len(minutes)} finished runs, {sum(minutes):,.0f} min of training and "
        f"validation in all (each run's own clock), {updates:,} updates."
    )
    unsettled = [
        f"{configuration.label} seed {row['seed']} ({row['last_quarter_gain']:.2f})"
        for configuration in configurations
        for row in configuration.rows
        if row["last_quarter_gain"] is not None and row["last_quarter_gain"] >= NEAR_CONVERGED_GAIN
    ]
    gains = [row["last_quarter_gain"] for row in rows if row["train_minutes"] is not None]
    if unsettled:
        return f"{line} Not near convergence (last ¼ gain ≥ {NEAR_CONVERGED_GAIN}): " + (
            "; ".join(unsettled) + "."
        )
    if gains and all(gain is not None for gain in gains):
        return f"{line} Every finished run's last ¼ gain is under {NEAR_CONVERGED_GAIN}."
    return line


def header_lines(command: str, made_by: str | None) -> list[str]:
    """The title and the paragraph that says how the runs were made and what each column is."""
    trained = f"Runs trained by `{made_by}`; this file written by" if made_by else "Written by"
    return [
        "# Comparison",
        "",
        f"{trained} `{command}`. Every run of a sweep has the same data, split and step "
        "budget, and a parameter count within ±10% of the others (the `compare_<family>` "
        "presets in `configs/experiment/`); the runs of a configuration differ only in "
        "`trainer.seed` (initialisation and data order). Each figure is the mean ± sample "
        "standard deviation over the seeds (seeds: how many finished). tgt tok/s: median "
        "of `train/tokens_per_sec`; valid BLEU: the best validation; test BLEU / chrF: the "
        "best checkpoint on the test split (`results.json`); best at: the update of the best "
        "validation and the training minutes to it (the run's own clock: a resumed run "
        "leaves out the time between its sessions); last ¼ gain: the best valid BLEU minus "
        "the best within the first three quarters of the run's updates (under 0.5: converged "
        "for its length; `trainer.converged_gain` stops a run there); align. acc.: the last "
        "`valid/alignment_accuracy` (share of probe words whose strongest attention falls "
        "on the linked source word); test AER: alignment error rate (Och & Ney 2003) of the "
        "best checkpoint's teacher-forced attention on the hand-aligned test pairs "
        "(`seq2seq/align/gold/`), argmax links: the last layer's head mean, the layer × "
        "head chosen for the lowest AER on the valid gold pairs (named `layer L head H`, "
        "both from 0) "
        "and, for a guided model, the guided head; `—` for models without attention; test "
        "AER (alignment layer), in a sweep with such models: the heads' mean of the separate "
        "alignment layer (`alignment=layer`, guided or unsupervised), `—` for a model "
        "without one; test AER (both directions), in a sweep `<name>` read with a sweep "
        f"`<name>{REVERSE_SUFFIX}` of the other direction: each run with the run of the "
        "same settings and seed the other way round, each read as it aligns by default, "
        f"symmetrised (harmonic, threshold {BOTH_THRESHOLD}; `seq2seq.study.both_directions`); "
        "p vs base: the paired bootstrap of test BLEU against the sweep's "
        "baseline (or a guided model's unguided twin, a layer model's twin without the "
        f"layer), the largest p over the seeds ({MARK}: significant, below).",
    ]
