"""The comparison of `seq2seq-compare`: its settings (the Hydra schema) and its stages.

Six stages, each runnable alone on the same compare folder (`dir`):

1. `attention`: the sweep `<dir>/attention`: `+experiment=<experiment>` with every option of
   `attention` (by default every attention preset, the user's in `config_dir` included),
   times `encoder` and `decoder` where given, each configuration with `seeds` seeds;
2. `encoders`: the sweep `<dir>/encoders`: every other `compare_<family>` preset (or
   `families`) with the attention of the best mean valid BLEU in the first sweep (chosen by
   validation, never by test; or `family_attention=<preset>`; written to
   `<dir>/encoders_attention.txt`); the first sweep's runs with that attention are linked
   in instead of being trained again;
3. `guided`: the sweep `<dir>/guided`: every `compare_<family>` preset (the first sweep's
   included) with the encoder sweep's attention and guided alignment (`guided`, by default
   `alignment=guided`: Garg et al. 2019, with the statistical aligner's links of the
   training split); the encoder sweep's runs, unguided, are linked in as each guided
   configuration's twin, which the summary tests it against (`report.twin_marker`);
   skipped when `guided` is empty;
4. `layer`: the sweep `<dir>/layer`: every `compare_<family>` preset with the encoder
   sweep's attention and a separate alignment layer (`layer`, by default `alignment=layer`
   trained both ways, `alignment.training=guided,unsupervised`:
   `seq2seq.models.alignment_layer`), its rows `alignment=layer (guided)` and
   `alignment=layer (unsupervised)` with the layer's test AER; the encoder sweep's runs,
   without a layer, are linked in as the twins (`report.layer_marker`), as in `guided`;
   skipped when `layer` is empty. With `reverse_data=<preset>` (the other direction's data,
   `tatoeba_en_zh`) every layer configuration is trained again on it into
   `<dir>/layer_reverse` (with `reverse_train`, the vocabulary sizes turned round), and the summary scores each layer run with its reverse run,
   symmetrised (`seq2seq.study.both_directions`);
5. `aligner`: the statistical word aligner (eflomal, `seq2seq-align-baseline`) on the
   prepared training split of the first sweep's runs (the first of the four there is),
   scored on the gold test pairs (`<dir>/aligner_eflomal.json`), each direction alone and
   the two combined (`ALIGNER_METHODS`): the non-neural rows beside every attention's AER;
   skipped, in one line, for data without a prepared corpus (the toy tasks);
6. `summary`: `COMPARISON.md` and `comparison.csv` of the sweeps (`seq2seq.study.report`),
   into `report.out_dir`, else the budget's `out_dir`, else `<dir>` (the CSV and the images
   into the budget's `files_dir` when it has one and `report.out_dir` is not given). With `sweeps=[...]`
   it reads those folders instead: any Hydra sweeps, such as a plain `seq2seq-train -m`.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import II, MISSING

from seq2seq.config.value_checks import MAX_SEED, thread_limit, threads_problem
from seq2seq.configs import preset_names
from seq2seq.data.settings import source_name
from seq2seq.metrics import BOOTSTRAP_RESAMPLES
from seq2seq.output_folders import check_output_place
from seq2seq.study.both_directions import REVERSE_SUFFIX
from seq2seq.study.launch import Sweep, run_sweep, seed_list, threads_per_job
from seq2seq.study.reading import RunReadError, best_choice, find_runs, read_config
from seq2seq.study.report import ReportSettings, write_report
from seq2seq.study.sweep import link_runs, report_count, warn

log = logging.getLogger(__name__)
STAGES = ("attention", "encoders", "guided", "layer", "aligner", "summary")
FIRST_SWEEP, FAMILY_SWEEP, GUIDED_SWEEP, LAYER_SWEEP = "attention", "encoders", "guided", "layer"
REVERSE_LAYER_SWEEP = LAYER_SWEEP + REVERSE_SUFFIX
CHOSEN_ATTENTION, MADE_BY = "encoders_attention.txt", "made_by.txt"  # in the compare folder
ALIGNER_FILE = "aligner_eflomal.json"
# eflomal's rows: each direction alone, then the two combined
ALIGNER_METHODS = ("forward", "reverse", "intersection", "union", "grow-diag-final-and")
MAX_SEEDS = 1000  # seeds per configuration: far beyond any significance test's need
MAX_RESAMPLES = 10**6  # report.resamples: the bootstrap's, a thousand times its default


class StageError(RuntimeError):
    """A stage that cannot run or that failed; the message says which and why."""


@dataclass
class BudgetConfig:
    """A budget (`configs/compare/budget/`): what every training of the comparison gets."""

    name: str = MISSING  # names the compare folder: multirun/compare_<name>/<date>
    seeds: int = MISSING  # seeds per configuration, unless `seeds` is given
    train: list[str] = MISSING  # overrides of every training: trainer.max_steps=600, ...
    out_dir: str | None = None  # where the summary writes; None: the compare folder
    # where comparison.csv and the images go; None: beside COMPARISON.md
    files_dir: str | None = None


@dataclass
class ReportConfig:
    """How the summary reads, tests and writes (`seq2seq.study.report.ReportSettings`)."""

    out_dir: str | None = None  # over the budget's out_dir
    image: bool = True  # one alignment image per sweep
    aer: bool = True  # the test AER columns
    device: str = "cpu"  # for the images and the AER
    # Overrides that mark a sweep's baseline, first match wins; None: attention=none, then
    # +experiment=<experiment> (the encoder sweep's).
    baselines: list[str] | None = None
    # The override that marks a configuration tested against its twin without it (the
    # guided sweep's); null: none
    twin_marker: str | None = "alignment=guided"
    # The same for a configuration with an alignment layer (the layer sweep's); null: none
    layer_marker: str | None = "alignment=layer"
    # true: each configuration with a region other than soft, or more heads, is tested
    # against the same model with soft attention, one head and the same score (the regions
    # and heads comparison); the markers are not read
    soft_twins: bool = False
    baseline_aer: list[str] = field(default_factory=list)  # word aligners' JSON files
    resamples: int = BOOTSTRAP_RESAMPLES
    made_by: str | None = None  # None: what the attention stage recorded in made_by.txt


@dataclass
class CompareConfig:
    """The settings of `seq2seq-compare` (`configs/compare/compare.yaml`)."""

    budget: BudgetConfig = field(default_factory=BudgetConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    attention: list[str] | None = None  # options of the first sweep; None: every preset
    encoder: list[str] | None = None  # also swept in the first sweep, when given
    decoder: list[str] | None = None
    experiment: str = "compare_gru"  # the preset every run of the first sweep starts from
    families: list[str] | None = None  # the encoder sweep; None: every other compare_* preset
    family_attention: str = "best"  # the encoder sweep's attention; best: by mean valid BLEU
    # The guided sweep's overrides of every family (beside the encoder sweep's attention);
    # []: no guided sweep
    guided: list[str] = field(default_factory=lambda: ["alignment=guided"])
    # The layer sweep's overrides of every family (an alignment layer, trained guided and
    # unsupervised: two rows per family); []: no layer sweep
    layer: list[str] = field(
        default_factory=lambda: ["alignment=layer", "alignment.training=guided,unsupervised"]
    )
    # The data preset of the other direction (tatoeba_en_zh): the layer sweep trained again
    # on it, into <dir>/layer_reverse, for the column of both directions; None: one direction
    reverse_data: str | None = None
    # More overrides of the reverse sweep alone: each side's vocabulary size, which the
    # compare presets set for the forward direction (configs/compare/compare.yaml)
    reverse_train: list[str] = field(default_factory=list)
    seeds: int = II("budget.seeds")
    seed_base: int = 1234  # the presets' trainer.seed: seed 1 is a plain training's run
    jobs: int = 1  # trainings at once on this machine (joblib), cores/jobs threads each
    threads: int | None = None  # torch threads of each training; None: as `jobs` gives
    cluster: str | None = None  # a configs/cluster preset for every training (slurm, local)
    plugins: list[str] = field(default_factory=list)  # the user's modules, for training too
    config_dir: str | None = None  # the user's presets: `seq2seq-train --config-dir`
    train: list[str] = field(default_factory=list)  # more overrides of every training
    stages: list[str] = field(default_factory=lambda: list(STAGES))
    dir: str = "multirun/compare_${budget.name}/${now:%Y-%m-%d_%H-%M-%S}"
    aligner_data: str | None = None  # the prepared corpus for eflomal; None: the runs' own
    sweeps: list[str] | None = None  # summary: these sweep folders, not <dir>/attention...


def check(settings: CompareConfig) -> None:
    """ValueError naming the key, before anything is trained."""
    unknown = [stage for stage in settings.stages if stage not in STAGES]
    if unknown:
        raise ValueError(f"stages: unknown {unknown}; the stages are {list(STAGES)}")
    check_counts(settings)
    check_reverse_data(settings.reverse_data, settings.config_dir)
    seed_list(settings.seeds, settings.seed_base)
    threads_per_job(settings.jobs)
    for place in output_places(settings):
        check_output_place(place)


def output_places(settings: CompareConfig) -> list[Path]:
    """The folders the stages will write: the compare folder (the training stages and the
    aligner), and the summary's report and files folders; checked before any work."""
    folder, places = Path(settings.dir), []
    if any(stage != "summary" for stage in settings.stages):
        places.append(folder)
    if "summary" in settings.stages:
        report = settings.report
        places.append(Path(report.out_dir or settings.budget.out_dir or folder))
        extra = files_dir(report.out_dir, settings.budget)
        places += [extra] if extra is not None else []
    return places


def check_reverse_data(preset: str | None, config_dir: str | None) -> None:
    """ValueError naming `reverse_data` when it is not a data preset of the package or of
    `<config_dir>/data/`."""
    if preset is None:
        return
    names = set(preset_names("data"))
    if config_dir:
        names |= {path.stem for path in (Path(config_dir) / "data").glob("*.yaml")}
    if preset not in names:
        raise ValueError(
            f"reverse_data: {preset!r} is not a data preset; the presets are "
            f"{', '.join(sorted(names))}"
        )


def check_counts(settings: CompareConfig) -> None:
    """ValueError naming the key of a count too large for this machine or for the seeds
    numpy takes: `threads` and `jobs` as `seq2seq.config.value_checks.thread_limit` allows,
    `seeds` up to MAX_SEEDS, `report.resamples` up to MAX_RESAMPLES."""
    if settings.threads is not None:
        problem = threads_problem(settings.threads, all_cores=True)
        if problem is not None:
            raise ValueError(f"threads {problem}, got {settings.threads!r}")
    if settings.jobs > thread_limit():
        raise ValueError(
            f"jobs must be at most {thread_limit()} on this machine, not {settings.jobs}"
        )
    if settings.seeds > MAX_SEEDS:
        raise ValueError(f"seeds must be at most {MAX_SEEDS}, not {settings.seeds}")
    if not 0 <= settings.seed_base <= MAX_SEED - max(settings.seeds, 1) + 1:
        raise ValueError(
            f"seed_base: the seeds must lie in 0 to {MAX_SEED}, not from {settings.seed_base}"
        )
    if not 1 <= settings.report.resamples <= MAX_RESAMPLES:
        raise ValueError(
            f"report.resamples must be from 1 to {MAX_RESAMPLES:,}, not {settings.report.resamples}"
        )


def run_comparison(settings: CompareConfig, command: str) -> Path | None:
    """Run the stages in order; the report's path when the summary wrote one."""
    check(settings)
    folder, report = Path(settings.dir), None
    stages = {"attention": train_first_sweep, "encoders": train_family_sweep,
              "guided": train_guided_sweep, "layer": train_layer_sweep,
              "aligner": score_aligner,
              "summary": write_summary}  # fmt: skip
    for stage in settings.stages:
        log.info("stage %s in %s", stage, folder)
        report = stages[stage](settings, folder, command) or report
    return report


def sweep_of(settings: CompareConfig, folder: Path, axes: list[str]) -> Sweep:
    seeds = seed_list(settings.seeds, settings.seed_base)
    common = [*settings.budget.train, *settings.train]
    return Sweep(folder, axes, seeds, common, settings.jobs, settings.threads,
                 settings.cluster, list(settings.plugins), settings.config_dir)  # fmt: skip


# ---------------------------------------------------------------- the stages


def train_first_sweep(settings: CompareConfig, folder: Path, command: str) -> None:
    """Stage 1 (module docstring); records the command in `<dir>/made_by.txt`."""
    folder.mkdir(parents=True, exist_ok=True)
    budget = " ".join(settings.budget.train)
    (folder / MADE_BY).write_text(f"{command} ({budget})\n", encoding="utf-8")
    attention = settings.attention or attention_presets(settings.config_dir)
    axes = [f"+experiment={settings.experiment}", "attention=" + ",".join(attention)]
    for group, options in (("encoder", settings.encoder), ("decoder", settings.decoder)):
        if options:
            axes.append(f"{group}={','.join(options)}")
    run_sweep(sweep_of(settings, folder / FIRST_SWEEP, axes))


def attention_presets(config_dir: str | None) -> list[str]:
    """Every attention preset: the package's and those in `<config_dir>/attention/`."""
    names = set(preset_names("attention"))
    if config_dir:
        names |= {path.stem for path in (Path(config_dir) / "attention").glob("*.yaml")}
    return sorted(names)


def train_family_sweep(settings: CompareConfig, folder: Path, command: str) -> None:
    """Stage 2 (module docstring)."""
    chosen = settings.family_attention
    if chosen == "best":
        chosen = best_of_first_sweep(folder)
    (folder / CHOSEN_ATTENTION).write_text(chosen + "\n", encoding="utf-8")
    log.info("encoder sweep with attention=%s", chosen)
    families = settings.families or [
        name for name in preset_names("experiment", "compare_") if name != settings.experiment
    ]
    axes = ["+experiment=" + ",".join(families), f"attention={chosen}"]
    run_sweep(sweep_of(settings, folder / FAMILY_SWEEP, axes))
    try:
        link_runs(folder / FIRST_SWEEP, folder / FAMILY_SWEEP, f"attention={chosen}")
    except FileNotFoundError as error:
        log.warning("no run of the first sweep linked into the encoder sweep: %s", error)


def family_attention(settings: CompareConfig, folder: Path) -> str:
    """The encoder sweep's attention: as it recorded it, else `family_attention` (best: the
    first sweep's best by mean valid BLEU)."""
    recorded = folder / CHOSEN_ATTENTION
    if recorded.is_file():
        return recorded.read_text(encoding="utf-8").strip()
    chosen = settings.family_attention
    return best_of_first_sweep(folder) if chosen == "best" else chosen


def train_guided_sweep(settings: CompareConfig, folder: Path, command: str) -> None:
    """Stage 3 (module docstring)."""
    if not settings.guided:
        log.info("guided: no overrides in `guided`: skipped")
        return
    train_twin_sweep(settings, folder, GUIDED_SWEEP, settings.guided)


def train_layer_sweep(settings: CompareConfig, folder: Path, command: str) -> None:
    """Stage 4 (module docstring)."""
    if not settings.layer:
        log.info("layer: no overrides in `layer`: skipped")
        return
    train_twin_sweep(settings, folder, LAYER_SWEEP, settings.layer)
    if settings.reverse_data:
        overrides = [*settings.layer, f"data={settings.reverse_data}", *settings.reverse_train]
        train_every_family(settings, folder, REVERSE_LAYER_SWEEP, overrides)


def train_every_family(
    settings: CompareConfig, folder: Path, name: str, overrides: list[str]
) -> str:
    """The sweep `<dir>/<name>`: every family with the encoder sweep's attention (returned)
    and `overrides`."""
    chosen = family_attention(settings, folder)
    families = [settings.experiment, *(settings.families or [
        preset for preset in preset_names("experiment", "compare_")
        if preset != settings.experiment
    ])]  # fmt: skip
    axes = ["+experiment=" + ",".join(families), f"attention={chosen}", *overrides]
    log.info("%s sweep: %s", name, " ".join(axes))
    run_sweep(sweep_of(settings, folder / name, axes))
    return chosen


def train_twin_sweep(
    settings: CompareConfig, folder: Path, name: str, overrides: list[str]
) -> None:
    """`train_every_family`; the encoder sweep's runs (without `overrides`) are linked in
    as the twins."""
    chosen = train_every_family(settings, folder, name, overrides)
    try:
        link_runs(folder / FAMILY_SWEEP, folder / name, f"attention={chosen}")
    except FileNotFoundError as error:
        log.warning("no twin linked into the %s sweep: %s", name, error)


def best_of_first_sweep(folder: Path) -> str:
    """The attention option with the best mean valid BLEU in `<dir>/attention`."""
    unreadable: list[RunReadError] = []
    try:
        chosen = best_choice(folder / FIRST_SWEEP, "attention", unreadable)
    except FileNotFoundError as error:
        chosen, missing = None, error
    for error in unreadable:
        warn(f"left out: {error}")
    report_count(unreadable)
    if chosen is None:
        raise StageError(f"encoders: no attention to choose: {missing}")
    return chosen


def score_aligner(settings: CompareConfig, folder: Path, command: str) -> None:
    """Stage 5 (module docstring)."""
    corpus = aligner_corpus(settings, folder)
    if corpus is None:
        log.info("aligner: the runs' data has no prepared corpus (a toy task?): skipped")
        return
    data_dir, src, tgt = corpus
    run = [sys.executable, "-m", "seq2seq.cli.align_baseline", "--data-dir", str(data_dir),
           "--src", src, "--tgt", tgt, "--part", "test", "--symmetrise", *ALIGNER_METHODS,
           "--json", str(folder / ALIGNER_FILE)]  # fmt: skip
    if subprocess.run(run, check=False).returncode != 0:
        raise StageError(f"aligner: seq2seq-align-baseline failed on {data_dir}")


def aligner_corpus(settings: CompareConfig, folder: Path) -> tuple[Path, str, str] | None:
    """(prepared folder, source, target language) of the first readable run of the first
    sweep there is (attention, encoders, guided, layer: a comparison of the layer stage
    alone has no other); None for data that is not a parallel corpus."""
    sweeps = [folder / name for name in (FIRST_SWEEP, FAMILY_SWEEP, GUIDED_SWEEP, LAYER_SWEEP)]
    first = next((sweep for sweep in sweeps if sweep.is_dir()), sweeps[0])
    for run in find_runs(first):
        try:
            data = read_config(run).data
        except RunReadError as error:
            warn(f"left out: {error}")
            continue
        if source_name(data) != "tabular":
            return None
        prepared = settings.aligner_data or Path(data.root) / "prepared" / data.name
        return Path(prepared), data.src_lang, data.tgt_lang
    raise StageError(f"aligner: no readable run below {first}")


def files_dir(report_out_dir: str | None, budget: BudgetConfig) -> Path | None:
    """Where the summary puts comparison.csv and the images: the budget's `files_dir`,
    unless `report.out_dir` moves the report (then beside it); None: beside the report."""
    if report_out_dir is not None or budget.files_dir is None:
        return None
    return Path(budget.files_dir)


def write_summary(settings: CompareConfig, folder: Path, command: str) -> Path:
    """Stage 6 (module docstring)."""
    if settings.sweeps:
        sweeps = [Path(path) for path in settings.sweeps]
    else:
        names = (FIRST_SWEEP, FAMILY_SWEEP, GUIDED_SWEEP, LAYER_SWEEP, REVERSE_LAYER_SWEEP)
        sweeps = [folder / name for name in names if (folder / name).is_dir()]
    if not sweeps:
        raise StageError(f"summary: no sweep folder below {folder}; give dir= or sweeps=")
    report = settings.report
    made_by = report.made_by
    if made_by is None and (folder / MADE_BY).is_file():
        made_by = (folder / MADE_BY).read_text(encoding="utf-8").strip()
    written = write_report(sweeps, ReportSettings(
        out_dir=Path(report.out_dir or settings.budget.out_dir or folder),
        files_dir=files_dir(report.out_dir, settings.budget),
        image=report.image, aer=report.aer, device=report.device,
        baselines=report.baselines or ["attention=none", f"+experiment={settings.experiment}"],
        twin_marker=report.twin_marker, layer_marker=report.layer_marker,
        soft_twins=report.soft_twins, baseline_aer=[*sorted(folder.glob("aligner_*.json")), *map(Path, report.baseline_aer)],
        resamples=report.resamples, command=command, made_by=made_by,
    ))  # fmt: skip
    if written is None:
        raise StageError(f"summary: no run could be read below {', '.join(map(str, sweeps))}")
    return written
