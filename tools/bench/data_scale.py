"""`make bench-data`: preparation and training start-up from Tatoeba's 26k to 5 million pairs.

For each size (0 = the data config's own corpus, Tatoeba's ~26k pairs; N = a synthetic
corpus of N pairs built by `seq2seq-data synth`, each Tatoeba pair repeated with its copy
number appended to both sides, so nothing deduplicates), in a fresh folder:

1. `seq2seq-data prepare` as its own process: wall time, peak memory, and the time of each
   stage from the arrival of its log lines (read, clean and split; the two sentencepiece
   models; encoding).
2. `seq2seq-train +experiment=default_cpu` on the prepared files (found by their record,
   not prepared again): start-up is the time from launching the process to the log line of
   its first update (Python and torch imports, the config, opening the memory-mapped
   arrays, the model, the first epoch's batches, one update). After `updates` updates it
   is stopped with SIGTERM (it saves `last.pt` and exits); its peak memory covers them.

Peak memory is that of the whole process tree (`process_memory`). The entry holds the
machine and its float32 matmul ceiling. `root` is the repository the commands run in: its
data/ holds the corpus (fetched into data/raw/ if needed).
"""

from __future__ import annotations

import datetime
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from seq2seq.lab.matmul_ceiling import ceiling_section
from seq2seq.output_folders import claim_work_folder
from tools.bench.entry import machine_lines
from tools.bench.process_memory import Measured, run_measured

DEFAULT_SIZES = (0, 250_000, 1_000_000, 5_000_000)
DATA = "tatoeba_zh_en"
WORK_COMMAND = "scripts/bench_data.py"  # the mark of its work folder
WORK_NAMES = ("data", "runs", "synth_*.txt", "prepare_*.log", "train_*.log")  # what it writes
STAGES = (  # (label, a regular expression matching the log line that ends the stage)
    ("read, clean, split", re.compile(r"split [\d,]+ clean pairs")),
    ("sentencepiece (zh)", re.compile(r"(trained|reusing) the subword model .*spm_zh_")),
    ("sentencepiece (en)", re.compile(r"(trained|reusing) the subword model .*spm_en_")),
    ("encode train", re.compile(r"encoded the train split")),
    ("encode valid + test", re.compile(r"encoded the test split")),
)
FIRST_UPDATE = re.compile(r"update 1/\d+")


def python_module(module: str, *arguments: str) -> list[str]:
    return [sys.executable, "-m", module, *arguments]


def corpus_overrides(size: int, work: Path, root: Path) -> list[str]:
    """The data overrides of one size: its own name and root below `work`; a synthetic
    corpus is a plain file (no zip member, no pinned hash)."""
    name = f"{DATA}_{size}" if size else DATA
    overrides = [f"data={DATA}", f"data.name={name}", f"data.root={work / 'data'}"]
    if size:
        corpus = work / f"synth_{size}.txt"
        overrides += [f"data.source.url=file://{corpus}", "data.source.member=", "data.source.sha256=null"]
    else:
        overrides.append(f"data.source.url=file://{tatoeba_file(root)}")
    return overrides


def tatoeba_file(root: Path) -> Path:
    """The repository's copy of the data config's corpus (fetched into data/raw/ if needed)."""
    from seq2seq.config.data_presets import data_preset
    from seq2seq.data.fetch import fetch

    preset = data_preset(DATA)
    fetch(preset["url"], preset["member"], root=root / "data", sha256=preset["sha256"])
    return root / "data" / "raw" / Path(preset["url"]).name


def synthesise(size: int, work: Path, root: Path) -> float:
    """Write the synthetic corpus of `size` pairs; its seconds."""
    started = time.perf_counter()
    command = python_module(
        "seq2seq.cli.data", "synth", str(size), str(work / f"synth_{size}.txt"),
        "--data", DATA, "--root", str(root / "data"),
    )  # fmt: skip
    subprocess.run(command, cwd=root, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def stage_seconds(measured: Measured) -> dict[str, float]:
    """Each stage's seconds: the gaps between the arrival times of the log lines that end
    the stages (the first stage counts from the launch, so it includes the imports)."""
    seconds, previous = {}, 0.0
    for label, pattern in STAGES:
        ends = [at for at, line in measured.lines if pattern.search(line)]
        if ends:
            seconds[label] = ends[0] - previous
            previous = ends[0]
    return seconds


def first_update_seconds(measured: Measured) -> float | None:
    """Seconds from the launch to the output line of the first update."""
    return next((at for at, line in measured.lines if FIRST_UPDATE.search(line)), None)


def summary_value(measured: Measured, label: str) -> int | None:
    """An integer row of `seq2seq-data`'s summary table."""
    for _, line in measured.lines:
        if line.startswith(label + "  "):
            return int(line[len(label) :].strip().replace(",", ""))
    return None


def measure_prepare(size: int, work: Path, root: Path, overrides: list[str]) -> Measured:
    """`seq2seq-data` with the size's overrides, measured; SystemExit when it fails."""
    log = work / f"prepare_{size}.log"
    prepared = run_measured(python_module("seq2seq.cli.data", *overrides), log, cwd=root)
    if prepared.returncode != 0:
        raise SystemExit(f"prepare failed for size {size}: see {log}")
    return prepared


def measure_startup(size: int, work: Path, root: Path, overrides: list[str], updates: int):
    """`seq2seq-train` on the prepared size, stopped after `updates` updates: (the measured
    process, seconds to its first update); SystemExit when it never updated."""
    log = work / f"train_{size}.log"
    command = python_module(
        "seq2seq.cli.train", "+experiment=default_cpu", *overrides,
        f"trainer.log_every={updates}", "logging.progress_bar=false",
        f"hydra.run.dir={work / 'runs' / str(size)}",
    )  # fmt: skip
    train = run_measured(command, log, stop_when=re.compile(rf"update {updates}/\d+"), cwd=root)
    startup = first_update_seconds(train)
    if startup is None:
        raise SystemExit(f"training never updated for size {size}: see {log}")
    return train, startup


def measure_size(size: int, work: Path, updates: int, root: Path) -> dict[str, Any]:
    """Synthesise (size > 0), prepare and start training one size in a fresh folder."""
    shutil.rmtree(work / "data" / "prepared", ignore_errors=True)
    shutil.rmtree(work / "runs", ignore_errors=True)
    (work / "runs").mkdir(parents=True)
    synth_seconds = synthesise(size, work, root) if size else None
    overrides = corpus_overrides(size, work, root)
    prepare = measure_prepare(size, work, root, overrides)
    train, startup = measure_startup(size, work, root, overrides, updates)
    if size:
        (work / f"synth_{size}.txt").unlink()
    return {
        "size": size,
        "pairs": summary_value(prepare, "lines read"),
        "synth_seconds": synth_seconds,
        "prepare": prepare,
        "stages": stage_seconds(prepare),
        "train": train,
        "startup": startup,
        "train_pairs": summary_value(prepare, "train size"),
    }


def claim_work(work: Path) -> Path:
    """`work`, checked to be this benchmark's work folder (missing, empty, marked by it,
    or holding only what it writes); OutputPlaceError (one line) otherwise, before any
    work: each size removes the folder's `data/prepared` and `runs`."""
    return claim_work_folder(work, command=WORK_COMMAND, known=WORK_NAMES)


def measure_sizes(sizes: list[int], work: Path, updates: int, root: Path) -> list[dict]:
    """Every size in turn; the table so far is printed after each. `work` is cleaned
    between sizes, so it must be this benchmark's own folder (`claim_work`)."""
    work = claim_work(work)
    results = []
    for size in sizes:
        results.append(measure_size(size, work, updates, root))
        print("\n".join(results_table(results)), flush=True)
    return results


def gigabytes(size: int) -> str:
    return f"{size / 1e9:.2f}"


def results_table(results: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| corpus | lines read | training pairs | prepare (s) | s per 1M pairs | peak RSS / PSS, prepare (GB) "
        "| start-up (s) | peak RSS / PSS, training (GB) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        prepare, train = result["prepare"], result["train"]
        name = f"synthetic {result['size']:,}" if result["size"] else "Tatoeba"
        per_million = prepare.seconds / (result["pairs"] or 1) * 1e6
        lines.append(
            f"| {name} | {result['pairs']:,} | {result['train_pairs']:,} | {prepare.seconds:.1f} "
            f"| {per_million:.0f} | {gigabytes(prepare.peak_rss)} / {gigabytes(prepare.peak_pss)} "
            f"| {result['startup']:.1f} | {gigabytes(train.peak_rss)} / {gigabytes(train.peak_pss)} |"
        )
    return lines


def stages_table(results: list[dict[str, Any]]) -> list[str]:
    labels = [label for label, _ in STAGES]
    lines = ["| corpus | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    for result in results:
        name = f"{result['size']:,}" if result["size"] else "Tatoeba"
        cells = [f"{result['stages'].get(label, float('nan')):.1f}" for label in labels]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def build_entry(updates: int, results: list[dict[str, Any]]) -> list[str]:
    """The dated entry: machine, ceiling, the results and stage tables."""
    ceiling_lines, ceiling = ceiling_section(5, torch.device("cpu"))
    now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    synth = [
        f"{result['size']:,}: {result['synth_seconds']:.0f} s"
        for result in results
        if result["synth_seconds"] is not None
    ]
    return [
        f"## Preparing millions of pairs (`make bench-data`, {now})",
        "",
        *machine_lines(torch.get_num_threads(), torch.device("cpu")),
        f"- float32 matmul ceiling: {ceiling:.1f} GFLOP/s (best median below)",
        f"- training: `+experiment=default_cpu`, stopped after {updates} updates",
        f"- synthetic corpora written by `seq2seq-data synth` in {', '.join(synth) or '-'}",
        "",
        *results_table(results),
        "",
        "Seconds per stage of the preparation (between the log lines that end them; the first",
        "stage includes the process start and the imports):",
        "",
        *stages_table(results),
        "",
        "### Matmul ceiling (float32, this run)",
        "",
        *ceiling_lines,
    ]
