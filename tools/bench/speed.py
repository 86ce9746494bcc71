"""`make bench`: how fast training and decoding run here, as one dated benchmark log (tools/bench/LOG.md) entry.

Sections of the entry:

1. Machine: CPU model (/proc/cpuinfo), cores, torch version, threads, the command line.
2. Ceiling: float32 matmul GFLOP/s at the shapes the models multiply, median of reps.
3. Training throughput per preset, each in a fresh subprocess (so its peak RSS is its
   own): the Trainer's own `train_step` + `update` on the first batches of epoch 0 of the
   real corpus (the same batches for every preset), warm-up steps, then the median of
   several measurements of k steps: target tokens/s, source + target tokens/s, step
   time, model FLOP utilisation (analytic training FLOPs of `seq2seq.flops` per second
   ÷ the ceiling), the padding share of the measured batches, peak RSS. With `compile`,
   each preset also gets a row trained with `trainer.compile=true` (same batches).
4. Decoding (`checkpoints`): sentences/s of `Translator.translate`, greedy and beam 5,
   batched, on the test split.
5. Time to quality (`run_dir`): the best valid BLEU logged within 5, 10 and 20 minutes
   of the first event of the run's TensorBoard file, and within 10, 20, 40, 80 and 120
   TFLOP of training (`train/tflop`: the analytic FLOPs of every batch, machine-independent).
6. Profile: `torch.profiler` table of one training step of `default_cpu` (top operators
   by self CPU time), written to `profile_out`.
7. MFU's bound (`matmul_bound`): per preset, every matrix product of one update timed
   again alone (`tools.bench.matmul_bound`): the MFU the update would reach were all
   its other work free.
8. Dropout's cost (`dropout`): `default_cpu`'s update time with dropout at every site,
   at fewer sites, and off (`throughput.DROPOUT_VARIANTS`), measured in alternating rounds;
   the median over rounds, and the ratio to every site.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path

import torch

from seq2seq.lab.matmul_ceiling import ceiling_section
from seq2seq.runs.assemble import select_device
from tools.bench.decoding_speed import decoding_section
from tools.bench.entry import machine_lines
from tools.bench.quality import quality_section
from tools.bench.throughput import bound_section, dropout_section, training_section
from tools.bench.training_speed import StepCounts
from tools.bench.worker import WorkerJob

PRESETS = ("default_cpu", "gru_additive", "lstm_general", "convs2s", "transformer_small")
QUICK_PRESETS = ("default_cpu", "gru_additive")
FULL_DEFAULTS = {"warmup": 3, "reps": 5, "steps": 8, "sentences": 1000, "matmul_reps": 10}
QUICK_DEFAULTS = {"warmup": 1, "reps": 2, "steps": 2, "sentences": 100, "matmul_reps": 3}


@dataclass
class BenchOptions:
    """What to measure. A number left None takes its default (the `quick` one with quick)."""

    quick: bool = False
    presets: list[str] | None = None  # None: PRESETS (QUICK_PRESETS with quick)
    threads: int | None = None  # None: torch's (all cores)
    warmup: int | None = None
    reps: int | None = None
    steps: int | None = None
    sentences: int | None = None
    matmul_reps: int | None = None
    device: str = "cpu"  # cpu | cuda | auto
    max_tokens: int | None = None  # None: the preset's data.max_tokens
    compile: bool = False
    skip_training: bool = False
    checkpoints: list[Path] = field(default_factory=list)
    run_dir: Path | None = None
    dropout: bool = False
    matmul_bound: bool = False
    profile_out: Path = Path("benchmarks/profile_default_cpu.txt")

    def number(self, name: str) -> int:
        """The given value of a count (warmup, reps, steps, sentences, matmul_reps), else
        its default."""
        given = getattr(self, name)
        return (QUICK_DEFAULTS if self.quick else FULL_DEFAULTS)[name] if given is None else given

    def chosen_presets(self) -> list[str]:
        return list(self.presets or (QUICK_PRESETS if self.quick else PRESETS))

    def chosen_threads(self) -> int:
        return self.threads or torch.get_num_threads()

    def worker_job(self) -> WorkerJob:
        """The job every training worker starts from (its preset is set per row)."""
        counts = StepCounts(*(self.number(name) for name in ("warmup", "reps", "steps")))
        return WorkerJob("default_cpu", self.chosen_threads(), self.device, counts, self.max_tokens)


def build_entry(options: BenchOptions) -> list[str]:
    """The dated entry: machine, ceiling, then the sections `options` asks for."""
    threads = options.chosen_threads()
    torch.set_num_threads(threads)
    device = select_device(options.device)
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    lines = [f"## {stamp}{' (--quick)' if options.quick else ''}", ""]
    lines += machine_lines(threads, device)
    ceiling_lines, ceiling = ceiling_section(options.number("matmul_reps"), device)
    lines += ["", "### Matmul ceiling (float32)", "", *ceiling_lines]
    return lines + measured_sections(options, device, ceiling)


def measured_sections(options: BenchOptions, device: torch.device, ceiling: float) -> list[str]:
    """Training, decoding, time to quality, MFU's bound, dropout and profile sections, in
    that order."""
    lines, profile_lines, job = [], [], options.worker_job()
    if not options.skip_training:
        training_lines, profile_lines = training_section(
            options.chosen_presets(), job, options.compile, options.profile_out, ceiling
        )
        lines += ["", "### Training throughput", "", *training_lines]
    if options.checkpoints:
        decoding = decoding_section(options.checkpoints, options.number("sentences"), device)
        lines += ["", "### Decoding (test split)", "", *decoding]
    if options.run_dir:
        lines += ["", "### Time to quality", "", *quality_section(options.run_dir)]
    if options.matmul_bound:
        bound = bound_section(options.chosen_presets(), job, ceiling)
        lines += ["", "### The update's matrix products alone (MFU's bound)", "", *bound]
    if options.dropout:
        lines += ["", "### Dropout's cost (default_cpu)", "", *dropout_section(job, ceiling)]
    if profile_lines:
        lines += ["", "### Profile", "", *profile_lines]
    return lines
