"""`make bench`: how fast training and decoding run here, appended to BENCHMARKS.md.

    python scripts/bench.py                                  # the default sections (~10-15 min)
    python scripts/bench.py --quick --out /tmp/bench.md      # a tiny smoke run (~1 min)
    python scripts/bench.py --checkpoint RUN/checkpoints/best.pt --run-dir RUN

Sections of the dated entry it appends (the file is created with a header if missing):

1. Machine: CPU model (/proc/cpuinfo), cores, torch version, threads, the command line.
2. Ceiling: float32 matmul GFLOP/s at the shapes the models multiply, median of reps.
3. Training throughput per preset, each in a fresh subprocess (so its peak RSS is its
   own): the Trainer's own `train_step` + `update` on the first batches of epoch 0 of the
   real corpus (the same batches for every preset), warm-up steps, then the median of
   several measurements of k steps: target tokens/s, source + target tokens/s, step
   time, model FLOP utilisation (analytic training FLOPs of `seq2seq.flops` per second
   ÷ the ceiling), the padding share of the measured batches, peak RSS. With `--compile`,
   each preset also gets a row trained with `trainer.compile=true` (same batches).
4. Decoding (`--checkpoint`, repeatable): sentences/s of `Translator.translate`, greedy
   and beam 5, batched, on the test split.
5. Time to quality (`--run-dir`): the best valid BLEU logged within 5, 10 and 20 minutes
   of the first event of the run's TensorBoard file, and within 10, 20, 40, 80 and 120
   TFLOP of training (`train/tflop`: the analytic FLOPs of every batch, machine-independent).
6. Profile: `torch.profiler` table of one training step of `default_cpu` (top operators
   by self CPU time), written to `benchmarks/profile_default_cpu.txt`.
7. Dropout's cost (`--dropout`): `default_cpu`'s update time with dropout at every site,
   at fewer sites, and off (`DROPOUT_VARIANTS`), measured in alternating rounds; the
   median over rounds, and the ratio to every site.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra import compose, initialize_config_module
from omegaconf import DictConfig

from seq2seq.build import count_parameters, plain
from seq2seq.config import register_configs
from seq2seq.data.batching import collate
from seq2seq.data.prepare import prepare
from seq2seq.data.presets import split_data_config
from seq2seq.decoding import SearchSettings
from seq2seq.flops import training_flops
from seq2seq.inference import Translator
from seq2seq.metrics import corpus_scores
from seq2seq.runs.assemble import assemble_trainer, select_device
from seq2seq.runs.reading import best_within, read_scalars
from seq2seq.training.trainer import Trainer

DECODE_REPS = 3  # passes over the test sentences per search; the median is reported
PRESETS = ("default_cpu", "gru_additive", "lstm_general", "convs2s", "transformer_small")
MATMUL_SHAPES = ((4096, 256, 1024), (4096, 256, 4000), (2048, 512, 512))  # (m, k, n)
QUALITY_MINUTES = (5, 10, 20)
QUALITY_TFLOP = (10, 20, 40, 80, 120)  # training TFLOP budgets (issue: quality per compute)
QUICK_PRESETS = ("default_cpu", "gru_additive")
# Where the Transformer draws dropout masks (rate 0.1 wherever it is on): the embeddings
# (model.embed_dropout), the encoder/decoder inputs and every sublayer output (dropout),
# inside every FFN (ff_dropout, the widest masks).
DROPOUT_VARIANTS = {
    "every site": ["model.embed_dropout=0.1", "encoder.dropout=0.1", "decoder.dropout=0.1",
                   "encoder.ff_dropout=0.1", "decoder.ff_dropout=0.1"],
    "inputs + sublayer outputs": ["model.embed_dropout=0", "encoder.dropout=0.1",
                                  "decoder.dropout=0.1", "encoder.ff_dropout=0",
                                  "decoder.ff_dropout=0"],
    "none": ["model.embed_dropout=0", "encoder.dropout=0", "decoder.dropout=0",
             "encoder.ff_dropout=0", "decoder.ff_dropout=0"],
}  # fmt: skip
DROPOUT_ROUNDS = 3
FULL_DEFAULTS = {"warmup": 3, "reps": 5, "steps": 8, "sentences": 1000, "matmul_reps": 10}
QUICK_DEFAULTS = {"warmup": 1, "reps": 2, "steps": 2, "sentences": 100, "matmul_reps": 3}
HEADER = """# Benchmarks

Entries appended by `make bench` (`scripts/bench.py`), newest last. Tokens are subword
pieces (target: pieces + EOS; source: pieces + EOS). FLOPs are the analytic matrix-product
counts of `seq2seq/flops.py` (a multiply-add = 2 FLOPs; training = 3 × forward); MFU is
the achieved FLOP/s over the best matmul GFLOP/s measured in the same entry.
"""


@dataclass
class Options:
    """What to measure; `--quick` shrinks every number."""

    presets: list[str]
    threads: int
    warmup: int
    reps: int
    steps: int
    sentences: int
    matmul_reps: int


# ---------------------------------------------------------------- machine and ceiling


def machine_lines(threads: int, device: torch.device) -> list[str]:
    return [
        f"- CPU: {cpu_model()}, {os.cpu_count()} cores; device {device}",
        f"- torch {torch.__version__}, Python {platform.python_version()}, threads: {threads}",
        f"- command: `python {shlex.join(shown_path(arg) for arg in sys.argv)}`",
    ]


def shown_path(path: str | Path) -> str:
    """A path as BENCHMARKS.md shows it: relative to the current folder when below it, else
    its last three parts, so that no machine's folder layout is committed."""
    text = str(path)
    if not text.startswith("/"):
        return text
    absolute = Path(text)
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(Path("…", *absolute.parts[-3:]))


def cpu_model() -> str:
    """The `model name` line of /proc/cpuinfo (the processor name elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def matmul_gflops(m: int, k: int, n: int, reps: int, device: torch.device) -> float:
    """Median GFLOP/s of a float32 `(m, k) @ (k, n)` product (2·m·k·n FLOPs)."""
    left = torch.randn(m, k, device=device)
    right = torch.randn(k, n, device=device)
    out = torch.empty(m, n, device=device)
    torch.mm(left, right, out=out)  # warm-up: allocations, kernel selection
    synchronize(device)
    seconds = []
    for _ in range(reps):
        started = time.perf_counter()
        torch.mm(left, right, out=out)
        synchronize(device)
        seconds.append(time.perf_counter() - started)
    return 2 * m * k * n / statistics.median(seconds) / 1e9


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def ceiling_section(reps: int, device: torch.device) -> tuple[list[str], float]:
    """The matmul table and the best of its medians (the MFU denominator)."""
    lines = ["| (m×k)·(k×n) | GFLOP/s (median) |", "|---|---|"]
    rates = []
    for m, k, n in MATMUL_SHAPES:
        rates.append(matmul_gflops(m, k, n, reps, device))
        lines.append(f"| ({m}×{k})·({k}×{n}) | {rates[-1]:.1f} |")
    return lines, max(rates)


# ---------------------------------------------------------------- training (one preset per process)


def preset_config(
    preset: str,
    threads: int,
    device: str,
    max_tokens: int | None,
    compiled: bool = False,
    extra: list[str] | None = None,
) -> DictConfig:
    overrides = [f"+experiment={preset}", f"trainer.threads={threads}", f"trainer.device={device}"]
    overrides += extra or []
    if compiled:
        overrides.append("trainer.compile=true")
    if max_tokens is not None:
        overrides.append(f"data.max_tokens={max_tokens}")
    register_configs()  # the schemas the presets are checked against
    with initialize_config_module(config_module="seq2seq.configs", version_base="1.3"):
        return compose(config_name="train", overrides=overrides)


def timed_steps(trainer: Trainer, batches: list[list[int]]) -> float:
    """Seconds for one optimiser update per batch, collated as the training loop does."""
    started = time.perf_counter()
    for indices in batches:
        batch = collate([trainer.data.train.examples[i] for i in indices], indices)
        trainer.train_step(batch.to(trainer.device))
        trainer.update()
    synchronize(trainer.device)
    return time.perf_counter() - started


def batch_counts(trainer: Trainer, batches: list[list[int]]) -> dict[str, int]:
    """Real tokens and analytic training FLOPs of `batches` (padded shapes)."""
    data, cfg = trainer.data, trainer.cfg
    vocab = (data.src_tokenizer.vocab_size, data.tgt_tokenizer.vocab_size)
    counts = {"tgt_tokens": 0, "src_tokens": 0, "flops": 0}
    for indices in batches:
        batch = collate([data.train.examples[i] for i in indices], indices)
        counts["tgt_tokens"] += batch.num_tgt_tokens
        counts["src_tokens"] += batch.num_src_tokens
        shape = (len(batch), batch.src.size(1), batch.tgt_in.size(1))
        counts["flops"] += training_flops(cfg, *shape, *vocab)
    return counts


def measure_training(trainer: Trainer, options: Options) -> dict[str, Any]:
    """Warm-up, then `reps` timings of `steps` updates; medians of the per-rep rates."""
    needed = options.warmup + options.reps * options.steps
    batches = trainer.sampler.batches(0)[:needed]
    if len(batches) < needed:
        raise ValueError(f"an epoch has {len(batches)} batches, fewer than the {needed} asked for")
    timed_steps(trainer, batches[: options.warmup])
    rates = []
    for rep in range(options.reps):
        start = options.warmup + rep * options.steps
        chunk = batches[start : start + options.steps]
        seconds = timed_steps(trainer, chunk)
        counts = batch_counts(trainer, chunk)
        rates.append({name: value / seconds for name, value in counts.items()} | {"s": seconds})
    measured = batches[options.warmup :]
    return {
        "parameters": count_parameters(trainer.model),
        "step_seconds": statistics.median(r["s"] for r in rates) / options.steps,
        "tgt_tokens_per_s": statistics.median(r["tgt_tokens"] for r in rates),
        "all_tokens_per_s": statistics.median(r["tgt_tokens"] + r["src_tokens"] for r in rates),
        "gflops_per_s": statistics.median(r["flops"] for r in rates) / 1e9,
        "gflops_per_step": batch_counts(trainer, measured)["flops"] / len(measured) / 1e9,
        "padding": trainer.sampler.padding_ratio(measured),
        "batches": f"{len(measured)} measured after {options.warmup} warm-up; "
        f"data.max_tokens={trainer.cfg.data.max_tokens}, seed {trainer.tcfg.seed}",
    }


def profile_step(trainer: Trainer, indices: list[int], path: Path) -> list[str]:
    """Profile one training step; write the top-25 table; return its top-5 lines."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if trainer.device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profiler:
        timed_steps(trainer, [indices])
    averages = profiler.key_averages()
    table = averages.table(sort_by="self_cpu_time_total", row_limit=25)
    batch = collate([trainer.data.train.examples[i] for i in indices], indices)
    shape = f"batch {len(batch)} × src {batch.src.size(1)} × tgt {batch.tgt_in.size(1)}"
    header = f"One training step of default_cpu ({shape}), torch {torch.__version__}, "
    header += f"threads: {torch.get_num_threads()}, {datetime.date.today()}\n\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + table + "\n", encoding="utf-8")
    total = sum(event.self_cpu_time_total for event in averages) or 1.0
    top = sorted(averages, key=lambda event: event.self_cpu_time_total, reverse=True)[:5]
    return [f"{e.key} {100 * e.self_cpu_time_total / total:.0f}%" for e in top]


def worker(args: argparse.Namespace) -> None:
    """The subprocess of one preset: print one JSON line with its measurements."""
    options = bench_options(args)
    extra = json.loads(args.worker_overrides) if args.worker_overrides else None
    cfg = preset_config(
        args.worker, options.threads, args.device, args.max_tokens, args.compile, extra
    )
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = assemble_trainer(cfg, Path(run_dir), observe=False)  # as seq2seq-train
        result = measure_training(trainer, options)
        if args.worker_profile is not None:
            first_measured = trainer.sampler.batches(0)[options.warmup]
            result["profile_top"] = profile_step(trainer, first_measured, args.worker_profile)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    result["peak_rss_mib"] = peak_kib / 1024
    print(json.dumps(result))


def run_worker(
    preset: str,
    args: argparse.Namespace,
    profile: bool,
    compiled: bool = False,
    overrides: list[str] | None = None,
) -> dict[str, Any]:
    """Run `worker` for `preset` (plus Hydra `overrides`) in a fresh Python process; its
    JSON, or {"error": ...}."""
    command = [sys.executable, __file__, "--worker", preset, *worker_arguments(args)]
    if compiled:
        command.append("--compile")
    if overrides:
        command += ["--worker-overrides", json.dumps(overrides)]
    if profile:
        command += ["--worker-profile", str(args.profile_out)]
    threads = str(bench_options(args).threads)
    env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    finished = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if finished.returncode != 0:
        last_line = (finished.stderr.strip().splitlines() or ["no output"])[-1]
        print(finished.stderr, file=sys.stderr)
        return {"error": f"exit {finished.returncode}: {last_line}"}
    return json.loads(finished.stdout.strip().splitlines()[-1])


def worker_arguments(args: argparse.Namespace) -> list[str]:
    """The options a worker needs to measure what the parent was asked for."""
    passed = ["--threads", str(bench_options(args).threads), "--device", args.device]
    for name in ("warmup", "reps", "steps", "max_tokens"):
        value = getattr(args, name)
        if value is not None:
            passed += [f"--{name.replace('_', '-')}", str(value)]
    return passed + (["--quick"] if args.quick else [])


def training_section(args: argparse.Namespace, ceiling: float) -> tuple[list[str], list[str]]:
    """The throughput table, and the profile summary lines (when default_cpu ran)."""
    lines = [
        "| preset | params | step s | tgt tok/s | src+tgt tok/s | GFLOP/step | MFU | padding | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    results = {}
    for preset in bench_options(args).presets:
        results[preset] = run_worker(preset, args, profile=preset == "default_cpu")
        lines.append(training_row(preset, results[preset], ceiling))
        if args.compile:
            compiled = run_worker(preset, args, profile=False, compiled=True)
            lines.append(training_row(f"{preset} + torch.compile", compiled, ceiling))
    notes = [result["batches"] for result in results.values() if "batches" in result]
    if notes:
        lines += ["", f"Batches: the first of epoch 0 ({notes[0]})."]
    top = results.get("default_cpu", {}).get("profile_top")
    profile_lines = []
    if top:
        profile_lines = [
            f"One `default_cpu` training step: [{args.profile_out}]({args.profile_out}).",
            "Top operators by self CPU time: " + ", ".join(top) + ".",
        ]
    return lines, profile_lines


def training_row(preset: str, result: dict[str, Any], ceiling: float) -> str:
    if "error" in result:
        return f"| {preset} | failed: {result['error']} |" + " |" * 7
    cells = [
        preset,
        f"{result['parameters']:,}",
        f"{result['step_seconds']:.3f}",
        f"{result['tgt_tokens_per_s']:,.0f}",
        f"{result['all_tokens_per_s']:,.0f}",
        f"{result['gflops_per_step']:.1f}",
        f"{100 * result['gflops_per_s'] / ceiling:.1f}%",
        f"{100 * result['padding']:.1f}%",
        f"{result['peak_rss_mib']:,.0f}",
    ]
    return "| " + " | ".join(cells) + " |"


def dropout_section(args: argparse.Namespace, ceiling: float) -> list[str]:
    """default_cpu's update time per dropout variant: the median over alternating rounds
    (each round measures every variant once, so a slow spell hits all of them)."""
    seconds: dict[str, list[float]] = {name: [] for name in DROPOUT_VARIANTS}
    rows: dict[str, dict[str, Any]] = {}
    for _ in range(DROPOUT_ROUNDS):
        for name, overrides in DROPOUT_VARIANTS.items():
            result = run_worker("default_cpu", args, profile=False, overrides=overrides)
            if "error" in result:
                return [f"Dropout variant {name!r} failed: {result['error']}"]
            seconds[name].append(result["step_seconds"])
            rows[name] = result
    every = statistics.median(seconds["every site"])
    lines = [
        "| dropout | overrides | step s (median of rounds) | rounds | MFU | vs every site |",
        "|---|---|---|---|---|---|",
    ]
    for name, overrides in DROPOUT_VARIANTS.items():
        median = statistics.median(seconds[name])
        mfu = rows[name]["gflops_per_step"] / median / ceiling
        shown = " ".join(overrides)
        rounds = ", ".join(f"{value:.3f}" for value in seconds[name])
        lines.append(
            f"| {name} | `{shown}` | {median:.3f} | {rounds} | {100 * mfu:.1f}% | "
            f"{every / median:.2f}× |"
        )
    return lines


# ---------------------------------------------------------------- decoding and quality


def decoding_rows(checkpoint: Path, sentences: int, device: torch.device) -> list[str]:
    """Greedy and beam-5 rows for one checkpoint, on the first `sentences` test pairs."""
    translator = Translator.load(checkpoint, device)  # validates the checkpoint's config
    # The data comes from the project's own config named as the checkpoint's corpus, below
    # ./data, never from the checkpoint's URL or root (see seq2seq.data.presets).
    test = prepare(split_data_config(plain(translator.config.data), None, Path("data"))).test
    sources, references = test.src_lines[:sentences], test.tgt_lines[:sentences]
    translator.translate(sources[:16], SearchSettings(beam_size=1))  # warm-up
    rows = []
    for beam in (1, 5):
        timings = []
        for _ in range(DECODE_REPS):
            started = time.perf_counter()
            translations = translator.translate(sources, SearchSettings(beam_size=beam))
            timings.append(time.perf_counter() - started)
        seconds = statistics.median(timings)
        hypotheses = [translation.text for translation in translations]
        bleu = corpus_scores(hypotheses, references, translator.tgt_tokenizer.lang)["bleu"]
        search = "greedy" if beam == 1 else f"beam {beam}"
        rate = len(sources) / seconds
        rows.append(
            f"| {shown_path(checkpoint)} | {search} | {len(sources)} | {rate:.1f} | {bleu:.2f} |"
        )
    return rows


def decoding_section(checkpoints: list[Path], sentences: int, device: torch.device) -> list[str]:
    lines = ["| checkpoint | search | sentences | sentences/s | BLEU |", "|---|---|---|---|---|"]
    for checkpoint in checkpoints:
        try:
            lines += decoding_rows(checkpoint, sentences, device)
        except (OSError, RuntimeError, ValueError) as error:  # CheckpointError is a RuntimeError
            message = str(error).splitlines()[0]
            print(f"{checkpoint}: {error}", file=sys.stderr)
            lines.append(f"| {shown_path(checkpoint)} | failed: {message} | — | — | — |")
    return lines + [
        "",
        f"Batches of 128 sentences sorted by length (`SearchSettings` defaults); median of "
        f"{DECODE_REPS} passes.",
    ]


def quality_section(run_dir: Path) -> list[str]:
    """Best valid BLEU logged within each budget of minutes and of training TFLOP, from the
    run's TensorBoard events. TFLOP do not depend on the machine; minutes do."""
    scalars = read_scalars(run_dir)
    bleu = scalars.series.get("valid/bleu", [])
    if scalars.first_wall_time is None or not bleu:
        return [f"No `valid/bleu` in {shown_path(run_dir)}/tensorboard."]
    end_minutes = (max(wall for wall, _, _ in bleu) - scalars.first_wall_time) / 60
    lines = [f"Run `{shown_path(run_dir)}`: last validation at {end_minutes:.1f} min.", ""]
    lines += budget_table(
        "minutes", QUALITY_MINUTES, best_within(scalars, QUALITY_MINUTES, "minutes")
    )
    if "train/tflop" in scalars.series:
        reached = best_within(scalars, QUALITY_TFLOP, "tflop")
        lines += ["", *budget_table("TFLOP", QUALITY_TFLOP, reached)]
    else:
        lines += ["", "No `train/tflop` in the run (trained before TFLOP were counted)."]
    return lines


def budget_table(unit: str, budgets: tuple[float, ...], reached: list) -> list[str]:
    """`| budget | best valid BLEU so far | at step |` rows; — where the budget was not spent."""
    lines = [f"| {unit} | best valid BLEU so far | at step |", "|---|---|---|"]
    for budget, found in zip(budgets, reached, strict=True):
        if found is None:
            lines.append(f"| {budget:g} | — | — |")
        else:
            value, step, _ = found
            lines.append(f"| {budget:g} | {value:.2f} | {step} |")
    return lines


# ---------------------------------------------------------------- the entry


def bench_options(args: argparse.Namespace) -> Options:
    """The command-line numbers, else the defaults (the `--quick` ones with --quick)."""
    defaults = QUICK_DEFAULTS if args.quick else FULL_DEFAULTS
    counts = {
        name: default if getattr(args, name, None) is None else getattr(args, name)
        for name, default in defaults.items()
    }
    presets = args.presets or (list(QUICK_PRESETS) if args.quick else list(PRESETS))
    return Options(presets=presets, threads=args.threads or torch.get_num_threads(), **counts)


def build_entry(args: argparse.Namespace) -> list[str]:
    options = bench_options(args)
    torch.set_num_threads(options.threads)
    device = select_device(args.device)
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    lines = [
        f"## {stamp}{' (--quick)' if args.quick else ''}",
        "",
        *machine_lines(options.threads, device),
    ]
    ceiling_lines, ceiling = ceiling_section(options.matmul_reps, device)
    lines += ["", "### Matmul ceiling (float32)", "", *ceiling_lines]
    profile_lines = []
    if not args.skip_training:
        training_lines, profile_lines = training_section(args, ceiling)
        lines += ["", "### Training throughput", "", *training_lines]
    if args.checkpoint:
        decoding = decoding_section(args.checkpoint, options.sentences, device)
        lines += ["", "### Decoding (test split)", "", *decoding]
    if args.run_dir:
        lines += ["", "### Time to quality", "", *quality_section(args.run_dir)]
    if args.dropout:
        lines += ["", "### Dropout's cost (default_cpu)", "", *dropout_section(args, ceiling)]
    if profile_lines:
        lines += ["", "### Profile", "", *profile_lines]
    return lines


def append_entry(path: Path, lines: list[str]) -> None:
    text = path.read_text(encoding="utf-8") if path.is_file() else HEADER
    path.write_text(text.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n", encoding="utf-8")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--quick", action="store_true", help="tiny: 2 presets, few steps, 100 sentences")
    add("--presets", nargs="+", choices=PRESETS, help=f"default: all of {', '.join(PRESETS)}")
    add("--threads", type=int, help="torch threads (default: torch's, all cores)")
    add("--steps", type=int, help=f"updates per measurement (default {FULL_DEFAULTS['steps']})")
    add(
        "--reps",
        type=int,
        help=f"measurements per preset, median reported (default {FULL_DEFAULTS['reps']})",
    )
    add("--warmup", type=int, help=f"untimed updates first (default {FULL_DEFAULTS['warmup']})")
    add("--max-tokens", type=int, help="override data.max_tokens (default: the preset's)")
    add("--compile", action="store_true", help="also each preset with trainer.compile=true")
    add("--checkpoint", type=Path, action="append", help="decode with it (repeatable)")
    add("--skip-training", action="store_true", help="only the ceiling, decoding, quality")
    add("--sentences", type=int, help="test sentences to decode (default: all 1000)")
    add("--run-dir", type=Path, help="a default_cpu run folder, for time to quality")
    add("--device", default="cpu", help="cpu | cuda | auto")
    add("--out", type=Path, default=Path("BENCHMARKS.md"), help="the file to append to")
    add("--profile-out", type=Path, default=Path("benchmarks/profile_default_cpu.txt"))
    add("--worker", choices=PRESETS, help=argparse.SUPPRESS)  # internal: one preset's process
    add("--dropout", action="store_true", help="also default_cpu's update time per dropout site")
    add("--worker-profile", type=Path, help=argparse.SUPPRESS)  # internal: profile it there
    add("--worker-overrides", help=argparse.SUPPRESS)  # internal: JSON list of Hydra overrides
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    lines = build_entry(args)
    append_entry(args.out, lines)
    print("\n".join(lines))
    print(f"\nappended to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
