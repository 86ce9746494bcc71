"""`make bench-inference`: every decoding engine on the same models, machine and run.

For each checkpoint, on the first `sentences` pairs of its test split, at every thread
count, greedy and beam 5:

* **PyTorch REV**: the project's own search as it was at commit REV (a git worktree of it,
  decoded by `decode_worker` with that tree first on PYTHONPATH), the "before" of a change;
* **PyTorch**: the search of this checkout, float32;
* **PyTorch int8**: the same with the linear and recurrent layers quantised dynamically
  (`seq2seq.quantization`);
* **CTranslate2 float32 / int8** (Transformer checkpoints, with the `export` extra): the
  checkpoint exported by `seq2seq.export.ctranslate2`, run by `seq2seq.export.ctranslate2_translator`.

Each engine and thread count runs in its own process (one thread setting, no state shared
with the others). A row reports the median of `reps` passes: sentences/s, generated
tokens/s (output pieces plus EOS of the best hypothesis), corpus BLEU of the last pass,
and its tokens/s against the reference row (the first engine: PyTorch REV when given).
The float32 matmul ceiling is measured at each thread count in the same run.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import torch

from seq2seq.config.build import count_parameters, plain
from seq2seq.config.data_presets import split_data_config
from seq2seq.data.prepare import prepare
from seq2seq.lab.matmul_ceiling import ceiling_section
from seq2seq.metrics import corpus_scores
from seq2seq.search.translator import Translator
from tools.bench.entry import machine_lines, shown_path

WORKER = Path(__file__).with_name("decode_worker.py")
BEAMS = (1, 5)
CEILING_REPS = 10


@dataclass(frozen=True)
class Engine:
    """One way to decode: which code (tree), engine, weights, and the path it reads."""

    label: str
    engine: str  # pytorch | ctranslate2
    quantization: str
    tree: Path  # the folder put first on PYTHONPATH
    path: Path  # a checkpoint (pytorch) or an export folder (ctranslate2)


@dataclass(frozen=True)
class TestSet:
    sources: Path  # a file, one source sentence per line
    references: list[str]
    tgt_lang: str


@dataclass
class Row:
    model: str
    engine: str
    threads: int
    beam: int
    sentences_per_s: float
    tokens_per_s: float
    bleu: float


def engines_for(
    checkpoint: Path, root: Path, baseline: tuple[str, Path] | None, export: Path | None
) -> list[Engine]:
    """The engines measured for one checkpoint, the reference first."""
    engines = []
    if baseline is not None:
        rev, tree = baseline
        engines.append(Engine(f"PyTorch {rev}", "pytorch", "float32", tree, checkpoint))
    engines += [
        Engine("PyTorch", "pytorch", "float32", root, checkpoint),
        Engine("PyTorch int8", "pytorch", "int8", root, checkpoint),
    ]
    if export is not None:
        engines += [
            Engine(f"CTranslate2 {precision}", "ctranslate2", precision, root, export)
            for precision in ("float32", "int8")
        ]
    return engines


def test_set(checkpoint: Path, sentences: int, data_root: Path, work: Path) -> TestSet:
    """The first `sentences` test pairs of the checkpoint's corpus (the project's own data
    config of that name, below `data_root`), the sources written to a file for the workers."""
    translator = Translator.load(checkpoint, "cpu")
    data = plain(translator.config.data)
    test = prepare(split_data_config(data, None, data_root)).test
    sources = work / f"{checkpoint.parent.parent.name}.src"
    sources.write_text("\n".join(test.src_lines[:sentences]) + "\n", encoding="utf-8")
    return TestSet(sources, test.tgt_lines[:sentences], translator.tgt_tokenizer.lang)


def run_worker(engine: Engine, threads: int, test: TestSet, reps: int, work: Path) -> dict:
    """The worker's JSON for one engine at one thread count (RuntimeError if it fails)."""
    job = {"engine": engine.engine, "path": str(engine.path), "quantization": engine.quantization,
           "threads": threads, "sources": str(test.sources), "beams": list(BEAMS), "reps": reps}  # fmt: skip
    job_file = work / "job.json"
    job_file.write_text(json.dumps(job), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(engine.tree), "OMP_NUM_THREADS": str(threads),
           "MKL_NUM_THREADS": str(threads)}  # fmt: skip
    done = subprocess.run([sys.executable, str(WORKER), str(job_file)], env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{engine.label}, {threads} threads: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measured_rows(
    name: str, engine: Engine, threads: int, result: dict, test: TestSet
) -> list[Row]:
    rows = []
    for beam in BEAMS:
        found = result[str(beam)]
        seconds = statistics.median(found["seconds"])
        bleu = corpus_scores(found["texts"], test.references, test.tgt_lang)["bleu"]
        rows.append(Row(name, engine.label, threads, beam, len(test.references) / seconds,
                        found["tokens"] / seconds, float(bleu)))  # fmt: skip
    return rows


def measure_model(
    name: str, engines: list[Engine], threads: list[int], test: TestSet, reps: int, work: Path
) -> list[Row]:
    """Every engine at every thread count; an engine whose worker fails gets rows with no
    figures (its error printed), and the others are still measured."""
    rows = []
    for count in threads:
        for engine in engines:
            print(f"{name}: {engine.label}, {count} thread(s)", file=sys.stderr, flush=True)
            try:
                result = run_worker(engine, count, test, reps, work)
            except RuntimeError as error:
                print(f"failed: {error}", file=sys.stderr, flush=True)
                rows += [Row(name, engine.label, count, beam, math.nan, math.nan, math.nan)
                         for beam in BEAMS]  # fmt: skip
                continue
            rows += measured_rows(name, engine, count, result, test)
    return rows


def ceilings(threads: list[int]) -> dict[int, float]:
    """The float32 matmul ceiling (GFLOP/s) at each thread count, measured here now."""
    before, found = torch.get_num_threads(), {}
    try:
        for count in threads:
            torch.set_num_threads(count)
            found[count] = ceiling_section(CEILING_REPS, torch.device("cpu"))[1]
    finally:
        torch.set_num_threads(before)
    return found


def table(rows: list[Row]) -> list[str]:
    """One line per row; `×` is tokens/s over the first engine's row of the same model,
    threads and search."""
    lines = ["| model | engine | threads | search | sentences/s | tokens/s | × | BLEU |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    reference: dict[tuple, float] = {}
    for row in rows:
        key = (row.model, row.threads, row.beam)
        reference.setdefault(key, row.tokens_per_s)
        search = "greedy" if row.beam == 1 else f"beam {row.beam}"
        if math.isnan(row.tokens_per_s):
            lines.append(f"| {row.model} | {row.engine} | {row.threads} | {search} | failed "
                         "| — | — | — |")  # fmt: skip
            continue
        lines.append(
            f"| {row.model} | {row.engine} | {row.threads} | {search} | {row.sentences_per_s:.1f} "
            f"| {row.tokens_per_s:.0f} | {row.tokens_per_s / reference[key]:.2f} | {row.bleu:.2f} |"
        )
    return lines


def model_lines(models: dict[str, Path]) -> list[str]:
    lines = []
    for name, checkpoint in models.items():
        translator = Translator.load(checkpoint, "cpu")
        family = f"{translator.config.encoder._target_.rsplit('.', 1)[-1]} → " \
                 f"{translator.config.decoder._target_.rsplit('.', 1)[-1]}"  # fmt: skip
        lines.append(f"- {name}: `{shown_path(checkpoint)}`, {family}, "
                     f"{count_parameters(translator.model):,} parameters")  # fmt: skip
    return lines


def build_entry(
    models: dict[str, Path], rows: list[Row], found_ceilings: dict[int, float], sentences: int,
    reps: int, baseline: str | None,
) -> list[str]:  # fmt: skip
    stamp = datetime.now().strftime("%Y-%m-%d %H:%M")
    ceiling_text = ", ".join(f"{value:.1f} GFLOP/s at {count} thread(s)"
                             for count, value in found_ceilings.items())  # fmt: skip
    reference = f"PyTorch {baseline}" if baseline else "PyTorch"
    return [
        f"## Decoding engines (`make bench-inference`, {stamp})",
        "",
        *machine_lines(max(found_ceilings), torch.device("cpu")),
        f"- float32 matmul ceiling, this run: {ceiling_text}",
        f"- the first {sentences} test sentences of each model's corpus; batches of 128 "
        f"sentences sorted by length; median of {reps} passes after a warm-up",
        *model_lines(models),
        "",
        *table(rows),
        "",
        f"tokens/s: output pieces plus EOS of the best hypothesis per second. ×: tokens/s "
        f"over the {reference} row of the same model, threads and search.",
    ]
