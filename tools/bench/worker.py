"""One preset's training-speed measurement in a fresh Python process.

Each preset runs in its own process so that its peak RSS is its own, and no allocator or
thread-pool state of one preset slows the next. The parent passes a `WorkerJob` as JSON
(`python -m tools.bench.worker JOB`) with OMP/MKL threads set; the worker prints one JSON
line: the measurement of `training_speed.measure_training`, the profile's top operators
and the update's products timed alone (`matmul_bound`) when asked, and its peak RSS in MiB.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from seq2seq.runs.assemble import assemble_trainer
from seq2seq.runs.compose import preset_config
from tools.bench.matmul_bound import measure_bound
from tools.bench.training_speed import StepCounts, measure_training, profile_step


@dataclass
class WorkerJob:
    """What one worker measures: a preset on a device, with its update counts."""

    preset: str
    threads: int
    device: str
    counts: StepCounts
    max_tokens: int | None = None
    compiled: bool = False
    overrides: list[str] = field(default_factory=list)
    profile: str | None = None  # a path: also profile one step there
    matmul_bound: bool = False  # also time the update's products alone (matmul_bound)

    @classmethod
    def from_json(cls, text: str) -> WorkerJob:
        values = json.loads(text)
        return cls(**(values | {"counts": StepCounts(**values["counts"])}))


def measure_job(job: WorkerJob) -> dict[str, Any]:
    """The measurement of `job` in this process (a trainer assembled as seq2seq-train's)."""
    cfg = preset_config(
        job.preset, job.threads, job.device, job.max_tokens, job.compiled, job.overrides
    )
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = assemble_trainer(cfg, Path(run_dir), observe=False)  # as seq2seq-train
        result = measure_training(trainer, job.counts)
        if job.profile is not None:
            first_measured = trainer.sampler.batches(0)[job.counts.warmup]
            result["profile_top"] = profile_step(trainer, first_measured, Path(job.profile))
        if job.matmul_bound:
            first_measured = trainer.sampler.batches(0)[job.counts.warmup]
            result["matmul_bound"] = measure_bound(trainer, first_measured, job.counts.reps)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    result["peak_rss_mib"] = peak_kib / 1024
    return result


def run_worker(job: WorkerJob) -> dict[str, Any]:
    """`measure_job(job)` in a fresh Python process: its JSON, or {"error": ...}."""
    command = [sys.executable, "-m", "tools.bench.worker", json.dumps(asdict(job))]
    threads = str(job.threads)
    env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    finished = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if finished.returncode != 0:
        last_line = (finished.stderr.strip().splitlines() or ["no output"])[-1]
        print(finished.stderr, file=sys.stderr)
        return {"error": f"exit {finished.returncode}: {last_line}"}
    return json.loads(finished.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps(measure_job(WorkerJob.from_json(sys.argv[1]))))
