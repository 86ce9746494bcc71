"""`make bench-data`: preparation and training start-up from 26k to 5 million pairs.

    python scripts/bench_data.py                     # Tatoeba, 250k, 1M, 5M pairs: ~40 min
    python scripts/bench_data.py --sizes 0 100000 --out /tmp/data.md     # a smoke run

For each size (0 = the data config's own corpus, Tatoeba's ~26k pairs; N = a synthetic
corpus of N pairs built by `seq2seq-data synth`, each Tatoeba pair repeated with its copy
number appended to both sides, so nothing deduplicates), in a fresh folder:

1. `seq2seq-data prepare` as its own process: wall time, peak memory, and the time of each
   stage from the arrival of its log lines (read, clean and split; the two sentencepiece
   models; encoding).
2. `seq2seq-train +experiment=default_cpu` on the prepared files (found by their record,
   not prepared again): start-up is the time from launching the process to the log line of
   its first update (Python and torch imports, the config, opening the memory-mapped
   arrays, the model, the first epoch's batches, one update). After `--updates` updates it
   is stopped with SIGTERM (it saves `last.pt` and exits); its peak memory covers them.

Peak memory is sampled every `SAMPLE_S` seconds over the process and all its children
(the encoding workers): the sum of their resident set sizes (RSS; pages shared between a
parent and its forked workers counted in each, so an upper bound) and of their
proportional set sizes (PSS; shared pages divided among their sharers). The entry is
appended to BENCHMARKS.md (or `--out`) with the machine and its float32 matmul ceiling.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/bench.py, run from anywhere
import bench  # noqa: E402  (the ceiling, the machine lines, the entry writer)

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SIZES = (0, 250_000, 1_000_000, 5_000_000)
DATA = "tatoeba_zh_en"
SAMPLE_S = 0.1
TIMEOUT_S = 3600  # per process: a stuck one is killed
STAGES = (  # (label, a regular expression matching the log line that ends the stage)
    ("read, clean, split", re.compile(r"split [\d,]+ clean pairs")),
    ("sentencepiece (zh)", re.compile(r"(trained|reusing) the subword model .*spm_zh_")),
    ("sentencepiece (en)", re.compile(r"(trained|reusing) the subword model .*spm_en_")),
    ("encode train", re.compile(r"encoded the train split")),
    ("encode valid + test", re.compile(r"encoded the test split")),
)
FIRST_UPDATE = re.compile(r"update 1/\d+")


@dataclass
class Measured:
    """One process: its wall time, peak memory (bytes) and output lines with their
    arrival times (seconds after the launch)."""

    seconds: float = 0.0
    peak_rss: int = 0
    peak_pss: int = 0
    lines: list[tuple[float, str]] = field(default_factory=list)
    returncode: int | None = None


# ---------------------------------------------------------------- memory of a process tree


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (from /proc/<pid>/task/<tid>/children)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                queue += [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue
    return found


def tree_memory(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in bytes, summed over `pid` and its descendants (smaps_rollup)."""
    rss = pss = 0
    for process in descendants(pid):
        try:
            text = Path(f"/proc/{process}/smaps_rollup").read_text()
        except OSError:  # it ended meanwhile
            continue
        for line in text.splitlines():
            name, _, value = line.partition(":")
            if name in ("Rss", "Pss"):
                kilobytes = int(value.split()[0]) * 1024
                rss += kilobytes if name == "Rss" else 0
                pss += kilobytes if name == "Pss" else 0
    return rss, pss


def run_measured(
    command: list[str], log_path: Path, stop_when: re.Pattern | None = None
) -> Measured:
    """Run `command` to its end (or SIGTERM it once a line matches `stop_when`), sampling
    its tree's memory; stdout and stderr go to `log_path`, and each line is kept with its
    arrival time."""
    measured = Measured()
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},  # each line when written: its time
    )

    def read_output() -> None:
        with open(log_path, "w", encoding="utf-8") as log:
            for line in process.stdout:
                measured.lines.append((time.perf_counter() - started, line.rstrip("\n")))
                log.write(line)
                if stop_when is not None and stop_when.search(line):
                    process.send_signal(signal.SIGTERM)

    reader = threading.Thread(target=read_output, daemon=True)
    reader.start()
    while process.poll() is None:
        rss, pss = tree_memory(process.pid)
        measured.peak_rss = max(measured.peak_rss, rss)
        measured.peak_pss = max(measured.peak_pss, pss)
        time.sleep(SAMPLE_S)
        if time.perf_counter() - started > TIMEOUT_S:
            process.kill()
    measured.seconds = time.perf_counter() - started
    reader.join()
    measured.returncode = process.returncode
    return measured


# ---------------------------------------------------------------- the steps of one size


def python_module(module: str, *arguments: str) -> list[str]:
    return [sys.executable, "-m", module, *arguments]


def corpus_overrides(size: int, work: Path) -> list[str]:
    """The data overrides of one size: its own name and root below `work`; a synthetic
    corpus is a plain file (no zip member, no pinned hash)."""
    name = f"{DATA}_{size}" if size else DATA
    overrides = [f"data={DATA}", f"data.name={name}", f"data.root={work / 'data'}"]
    if size:
        corpus = work / f"synth_{size}.txt"
        overrides += [f"data.url=file://{corpus}", "data.member=", "data.sha256=null"]
    else:
        overrides.append(f"data.url=file://{tatoeba_file()}")
    return overrides


def tatoeba_file() -> Path:
    """The project's copy of the data config's corpus (fetched into data/raw/ if needed)."""
    from seq2seq.data.fetch import fetch
    from seq2seq.data.presets import data_preset

    preset = data_preset(DATA)
    fetch(preset["url"], preset["member"], root=ROOT / "data", sha256=preset["sha256"])
    return ROOT / "data" / "raw" / Path(preset["url"]).name


def synthesise(size: int, work: Path) -> float:
    """Write the synthetic corpus of `size` pairs; its seconds."""
    started = time.perf_counter()
    command = python_module(
        "seq2seq.cli.data", "synth", str(size), str(work / f"synth_{size}.txt"),
        "--data", DATA, "--root", str(ROOT / "data"),
    )  # fmt: skip
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
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


def measure_size(size: int, work: Path, updates: int) -> dict[str, Any]:
    shutil.rmtree(work / "data" / "prepared", ignore_errors=True)
    shutil.rmtree(work / "runs", ignore_errors=True)
    (work / "runs").mkdir(parents=True)
    synth_seconds = synthesise(size, work) if size else None
    overrides = corpus_overrides(size, work)
    prepare = run_measured(
        python_module("seq2seq.cli.data", *overrides), work / f"prepare_{size}.log"
    )
    if prepare.returncode != 0:
        raise SystemExit(f"prepare failed for size {size}: see {work / f'prepare_{size}.log'}")
    pairs = _summary_value(prepare, "lines read")
    train = run_measured(
        python_module(
            "seq2seq.cli.train", "+experiment=default_cpu", *overrides,
            f"trainer.log_every={updates}", "logging.progress_bar=false",
            f"hydra.run.dir={work / 'runs' / str(size)}",
        ),
        work / f"train_{size}.log",
        stop_when=re.compile(rf"update {updates}/\d+"),
    )  # fmt: skip
    startup = first_update_seconds(train)
    if startup is None:
        raise SystemExit(
            f"training never updated for size {size}: see {work / f'train_{size}.log'}"
        )
    if size:
        (work / f"synth_{size}.txt").unlink()
    return {
        "size": size,
        "pairs": pairs,
        "synth_seconds": synth_seconds,
        "prepare": prepare,
        "stages": stage_seconds(prepare),
        "train": train,
        "startup": startup,
        "train_pairs": _summary_value(prepare, "train size"),
    }


def _summary_value(measured: Measured, label: str) -> int | None:
    """An integer row of `seq2seq-data`'s summary table."""
    for _, line in measured.lines:
        if line.startswith(label + "  "):
            return int(line[len(label) :].strip().replace(",", ""))
    return None


# ---------------------------------------------------------------- the entry


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


def build_entry(args: argparse.Namespace, results: list[dict[str, Any]]) -> list[str]:
    import torch

    ceiling_lines, ceiling = bench.ceiling_section(5, torch.device("cpu"))
    now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    synth = [
        f"{result['size']:,}: {result['synth_seconds']:.0f} s"
        for result in results
        if result["synth_seconds"] is not None
    ]
    return [
        f"## Preparing millions of pairs (`make bench-data`, {now})",
        "",
        *bench.machine_lines(torch.get_num_threads(), torch.device("cpu")),
        f"- float32 matmul ceiling: {ceiling:.1f} GFLOP/s (best median below)",
        f"- training: `+experiment=default_cpu`, stopped after {args.updates} updates",
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES),
        help="pairs per synthetic corpus; 0: the data config's own corpus",
    )  # fmt: skip
    parser.add_argument("--updates", type=int, default=20, help="training updates per size")
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "data_scale")
    parser.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if any(size < 0 for size in args.sizes) or args.updates < 1:
        raise SystemExit("--sizes must be >= 0 and --updates >= 1")
    args.work.mkdir(parents=True, exist_ok=True)
    results = []
    for size in args.sizes:
        results.append(measure_size(size, args.work, args.updates))
        print("\n".join(results_table(results)), flush=True)
    bench.append_entry(args.out, build_entry(args, results))
    print(f"appended to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
