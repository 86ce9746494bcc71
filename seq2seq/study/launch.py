"""Training sweeps as `seq2seq-train -m` subprocesses, for the comparison.

One sweep is one Hydra multirun: the axes (`+experiment=compare_gru`,
`attention=dot,additive`) times the seeds (`trainer.seed=1234,1235,...`, varied fastest, so
that a configuration's seeds are neighbouring jobs), with the budget's overrides. Where
several jobs run at once (Hydra's joblib launcher, `jobs` > 1) each gets cores / jobs torch
threads (at least 1), so that they do not fight over the cores; one job at a time keeps
torch's own thread count (`trainer.threads=0`), as a single training has. A cluster preset
(`+cluster=slurm`: Hydra's submitit launcher) replaces the local launcher.

Run folders are named by what differs between the jobs
(`0_+experiment=compare_gru,attention=none,trainer.seed=1234`): every key that is the same
for all jobs of the comparison (the budget's, the thread count, the plugins, the cluster,
the user's extra overrides) is excluded from the name.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser

log = logging.getLogger(__name__)

# Keys the same for every job, never part of a run folder's name.
FIXED_NAME_EXCLUDES = ("trainer.threads", "logging.progress_bar", "plugins", "cluster")


class SweepFailed(RuntimeError):
    """A training sweep ended with a non-zero exit code."""

    def __init__(self, folder: Path, returncode: int):
        super().__init__(f"the training sweep into {folder} failed (exit code {returncode})")
        self.returncode = returncode


@dataclass
class Sweep:
    """What one `seq2seq-train -m` call trains, and where."""

    folder: Path  # hydra.sweep.dir
    axes: list[str]  # swept or fixed choices that name the runs: "attention=dot,additive"
    seeds: list[int]
    common: list[str] = field(default_factory=list)  # every job's overrides (budget, extras)
    jobs: int = 1  # jobs at once (joblib) on this machine
    threads: int | None = None  # torch threads per job; None: `threads_per_job`
    cluster: str | None = None  # a configs/cluster preset: +cluster=<name>
    plugins: list[str] = field(default_factory=list)
    config_dir: str | None = None  # --config-dir of training: the user's presets


def seed_list(count: int, first: int) -> list[int]:
    """`count` consecutive seeds from `first` (the presets' trainer.seed: seed 1 of a
    sweep is the run a plain training makes). ValueError below 1."""
    if count < 1:
        raise ValueError(f"seeds must be a number >= 1, not {count}")
    return list(range(first, first + count))


def threads_per_job(jobs: int, cores: int | None = None) -> int:
    """torch threads of each job: 0 (torch's default) for one job at a time, else the
    cores shared out, at least 1."""
    if jobs < 1:
        raise ValueError(f"jobs must be a number >= 1, not {jobs}")
    if jobs == 1:
        return 0
    return max(1, (cores or os.cpu_count() or 1) // jobs)


def override_keys(overrides: list[str]) -> list[str]:
    """The keys (`trainer.max_steps`, `data`) of Hydra overrides, parsed as Hydra does."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    return [override.key_or_group for override in parsed]


def launcher_overrides(sweep: Sweep) -> list[str]:
    """The cluster preset, or the joblib launcher for several jobs at once; none else."""
    if sweep.cluster:
        return [f"+cluster={sweep.cluster}"]
    if sweep.jobs > 1:
        return ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={sweep.jobs}"]
    return []


def train_command(sweep: Sweep) -> list[str]:
    """The `seq2seq-train -m` command line of the sweep (run with this Python)."""
    threads = sweep.threads
    if threads is None:
        threads = 0 if sweep.cluster else threads_per_job(sweep.jobs)
    excluded = [*override_keys(sweep.common), *FIXED_NAME_EXCLUDES]
    command = [sys.executable, "-m", "seq2seq.cli.train", "-m"]
    if sweep.config_dir:
        command += ["--config-dir", str(sweep.config_dir)]
    command += [*sweep.axes, *sweep.common, "trainer.seed=" + ",".join(map(str, sweep.seeds))]
    command += [f"trainer.threads={threads}", "logging.progress_bar=false"]
    if sweep.plugins:
        command.append("plugins=[" + ",".join(sweep.plugins) + "]")
    command += launcher_overrides(sweep)
    command.append(
        "hydra.job.config.override_dirname.exclude_keys=["
        + ",".join(dict.fromkeys(excluded)) + "]"
    )  # fmt: skip
    return [*command, f"hydra.sweep.dir={sweep.folder}"]


def run_sweep(sweep: Sweep) -> None:
    """Train the sweep; SweepFailed when training fails (its own errors went to stderr)."""
    command = train_command(sweep)
    log.info("training %s: %s", sweep.folder, " ".join(command[2:]))
    finished = subprocess.run(command, check=False)
    if finished.returncode != 0:
        raise SweepFailed(sweep.folder, finished.returncode)
