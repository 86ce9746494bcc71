"""Train variants of `make train`'s model for the same compute and compare their valid BLEU.

Each lever is `+experiment=default_cpu` with a few overrides, trained for about `--tflop`
training TFLOP (analytic FLOPs, `seq2seq/flops.py`, the same on every machine), validated
(greedy, whole valid split) four times, the last at the end of the budget. The table gives
each validation's BLEU and the TFLOP spent by then: choices are made on valid BLEU only;
the runs' test figures are not read. Several levers train at once with
`--jobs`, each with its share of the cores (the figures do not depend on it, the minutes do).

    python scripts/levers.py --jobs 2 base warmup_200 tokens_1024     # named levers
    python scripts/levers.py --list                                     # what there is
    python scripts/levers.py --table multirun/levers/DATE               # table of a finished set
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from seq2seq.runs.reading import read_results, read_scalars

# Measured on the default model (BENCHMARKS.md): GFLOP per update with 2,048-token batches.
DEFAULT_GFLOP_PER_UPDATE = 43.4
BASE = ["+experiment=default_cpu", "trainer.max_minutes=null", "trainer.test_search.beam_size=1"]
NO_DROPOUT = ["model.embed_dropout=0", "encoder.dropout=0", "decoder.dropout=0",
              "encoder.ff_dropout=0", "decoder.ff_dropout=0"]  # fmt: skip
# Dropout on the encoder/decoder inputs and sublayer outputs only (as Vaswani et al. §5.4):
# no second mask on the embeddings, none inside the FFNs.
FEWER_DROPOUT_SITES = ["model.embed_dropout=0", "encoder.ff_dropout=0", "decoder.ff_dropout=0"]
COSINE_2E3 = ["schedule=cosine", "optim.lr=2e-3", "schedule.warmup_steps=200"]


@dataclass(frozen=True)
class Lever:
    name: str
    overrides: tuple[str, ...]
    gflop_per_update: float = DEFAULT_GFLOP_PER_UPDATE  # estimate; sizes the update budget


LEVERS = {
    lever.name: lever
    for lever in (
        Lever("base", ()),
        Lever("warmup_200", ("schedule.warmup_steps=200",)),
        Lever("lr_2e-3_warmup_200", ("optim.lr=2e-3", "schedule.warmup_steps=200")),
        Lever("cosine_lr_2e-3", ("schedule=cosine", "optim.lr=2e-3", "schedule.warmup_steps=200")),
        Lever("tokens_1024", ("data.max_tokens=1024",), DEFAULT_GFLOP_PER_UPDATE / 2),
        Lever("dropout_0", tuple(NO_DROPOUT)),
        Lever("label_smoothing_0", ("trainer.label_smoothing=0",)),
        Lever(
            "tokens_1024_lr_2e-3_warmup_200",
            ("data.max_tokens=1024", "optim.lr=2e-3", "schedule.warmup_steps=200"),
            DEFAULT_GFLOP_PER_UPDATE / 2,
        ),
        Lever(
            "tokens_1024_cosine_lr_2e-3",
            (
                "data.max_tokens=1024",
                "schedule=cosine",
                "optim.lr=2e-3",
                "schedule.warmup_steps=200",
            ),
            DEFAULT_GFLOP_PER_UPDATE / 2,
        ),
        Lever(
            "tokens_1024_dropout_0",
            ("data.max_tokens=1024", *NO_DROPOUT),
            DEFAULT_GFLOP_PER_UPDATE / 2,
        ),
        Lever("fewer_dropout_sites", tuple(FEWER_DROPOUT_SITES)),
        Lever("cosine_lr_2e-3_fewer_dropout_sites", (*COSINE_2E3, *FEWER_DROPOUT_SITES)),
        Lever("cosine_lr_2e-3_dropout_0", (*COSINE_2E3, *NO_DROPOUT)),
        Lever(
            "tokens_1024_cosine_lr_2e-3_fewer_dropout_sites",
            ("data.max_tokens=1024", *COSINE_2E3, *FEWER_DROPOUT_SITES),
            DEFAULT_GFLOP_PER_UPDATE / 2,
        ),
        Lever(
            "tokens_1024_cosine_lr_2e-3_dropout_0",
            ("data.max_tokens=1024", *COSINE_2E3, *NO_DROPOUT),
            DEFAULT_GFLOP_PER_UPDATE / 2,
        ),
    )
}


def budget(lever: Lever, tflop: float) -> tuple[int, int]:
    """(max_steps, valid_every): four validations, the last near `tflop` (the estimate of
    GFLOP per update is a little high, so runs end a little past it)."""
    valid_every = math.ceil(tflop * 1000 / 4 / lever.gflop_per_update * 1.03)
    return 4 * valid_every, valid_every


def command(lever: Lever, tflop: float, run_dir: Path, threads: int) -> list[str]:
    max_steps, valid_every = budget(lever, tflop)
    return [
        sys.executable, "-m", "seq2seq.cli.train", *BASE, *lever.overrides,
        f"trainer.max_steps={max_steps}", f"trainer.valid_every={valid_every}",
        f"trainer.threads={threads}", f"name=lever_{lever.name}", f"hydra.run.dir={run_dir}",
    ]  # fmt: skip


def train(lever: Lever, tflop: float, out: Path, threads: int) -> None:
    run_dir = out / lever.name
    if (run_dir / "results.json").is_file():
        print(f"{lever.name}: done before, kept", flush=True)
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    argv = command(lever, tflop, run_dir, threads)
    (run_dir / "command.txt").write_text(" ".join(argv[1:]) + "\n", encoding="utf-8")
    started = time.monotonic()
    with open(run_dir / "train.log", "w", encoding="utf-8") as log:
        status = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=False)
    minutes = (time.monotonic() - started) / 60
    print(f"{lever.name}: exit {status.returncode} after {minutes:.1f} min", flush=True)


def table(out: Path) -> list[str]:
    """One row per finished lever: its valid BLEU at each validation, with the training
    TFLOP spent by then (the last validation is the whole budget)."""
    lines = [
        "| lever | overrides | valid BLEU (TFLOP) at ¼, ½, ¾ and all of the budget | updates | "
        "minutes |",
        "|---|---|---|---|---|",
    ]
    for run_dir in sorted(path for path in out.iterdir() if (path / "results.json").is_file()):
        lever = LEVERS.get(run_dir.name, Lever(run_dir.name, ("?",)))
        scalars = read_scalars(run_dir)
        spent = {step: value for _, step, value in scalars.series.get("train/tflop", [])}
        cells = [
            f"{bleu:.2f} ({spent[step]:.1f})" if step in spent else f"{bleu:.2f} (update {step})"
            for _, step, bleu in scalars.series.get("valid/bleu", [])
        ]
        results = read_results(run_dir)
        shown = " ".join(lever.overrides) or "(the default)"
        lines.append(
            f"| {lever.name} | `{shown}` | {' · '.join(cells)} | {results['steps']} | "
            f"{results['train_minutes']:.1f} |"
        )
    return lines + ["", "Cells: greedy BLEU on the 1,000 valid pairs (training TFLOP by then)."]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("levers", nargs="*", help="lever names (default: all)")
    parser.add_argument("--tflop", type=float, default=40.0, help="training TFLOP per lever")
    parser.add_argument("--jobs", type=int, default=1, help="levers trained at once")
    parser.add_argument(
        "--out", type=Path, default=Path("multirun/levers") / time.strftime("%Y-%m-%d")
    )
    parser.add_argument("--list", action="store_true", help="print the levers and exit")
    parser.add_argument("--table", type=Path, help="print the table of a finished set and exit")
    args = parser.parse_args()
    if args.list:
        for lever in LEVERS.values():
            print(f"{lever.name:34} {' '.join(lever.overrides)}")
        return 0
    if args.table:
        print("\n".join(table(args.table)))
        return 0
    unknown = [name for name in args.levers if name not in LEVERS]
    if unknown:
        parser.error(f"unknown levers {unknown}; --list shows them")
    chosen = [LEVERS[name] for name in args.levers] if args.levers else list(LEVERS.values())
    threads = max(1, (os.cpu_count() or 1) // args.jobs)
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda lever: train(lever, args.tflop, args.out, threads), chosen))
    print("\n".join(table(args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
