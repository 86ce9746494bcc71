"""Summarise sweeps of training runs: one table row per run, plus the alignments side by side.

    python scripts/compare.py multirun/compare_full/DATE/attention multirun/compare_full/DATE/encoders
    python scripts/compare.py SWEEP_DIR [SWEEP_DIR ...] --out-dir . --no-image
    python scripts/compare.py multirun/compare_full/DATE/attention --best attention

`make compare` runs the sweeps (Hydra multirun) and then this script. Each SWEEP_DIR is a
folder of run folders (`.hydra/config.yaml`, `results.json`, `tensorboard/`); every run
below it gives one row of `comparison.csv` and of `COMPARISON.md`:

    sweep, model (the settings that differ within the sweep), parameters, steps,
    training minutes, tokens/s (median of `train/tokens_per_sec`), best valid BLEU,
    test BLEU and chrF (the best checkpoint, `results.json`), alignment accuracy (last
    `valid/alignment_accuracy`), run folder.

A run without `results.json` (still running, or crashed) keeps its row with `—` for the
numbers it lacks. The image of each sweep is drawn as `scripts/compare_alignments.py` draws it: the
last attention layer of every run's best checkpoint on the first probe sentence
(我爱中国。 for zh→en), greedy, side by side.
"""

from __future__ import annotations

import argparse
import csv
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any

from seq2seq.checkpoint import CheckpointError
from seq2seq.runs.alignments import collect_panels
from seq2seq.runs.reading import (
    best_choice,
    find_checkpoints,
    find_runs,
    model_labels,
    read_config,
    read_results,
    read_scalars,
)
from seq2seq.visualise.heatmap import draw_comparison

MISSING = "—"
TOKENS_TAG, ALIGNMENT_TAG = "train/tokens_per_sec", "valid/alignment_accuracy"
COLUMNS = (  # (csv name, markdown header)
    ("sweep", "sweep"),
    ("model", "model"),
    ("parameters", "parameters"),
    ("steps", "steps"),
    ("train_minutes", "train min"),
    ("tokens_per_sec", "tgt tok/s"),
    ("valid_bleu", "valid BLEU"),
    ("test_bleu", "test BLEU"),
    ("test_chrf", "test chrF"),
    ("alignment_accuracy", "align. acc."),
    ("run_dir", "run folder"),
)


# ---------------------------------------------------------------- runs and rows


def summarise_run(run_dir: Path, sweep: str) -> dict[str, Any]:
    """One row: the numbers of `results.json` and the event file; None where missing."""
    results = read_results(run_dir)
    scalars = read_scalars(run_dir)
    tokens, alignment = scalars.values(TOKENS_TAG), scalars.values(ALIGNMENT_TAG)
    test = results.get("test", {})
    return {
        "sweep": sweep,
        "parameters": results.get("parameters"),
        "steps": results.get("steps"),
        "train_minutes": results.get("train_minutes"),
        "tokens_per_sec": statistics.median(tokens) if tokens else None,
        "valid_bleu": results.get("valid_best_bleu"),
        "test_bleu": test.get("bleu"),
        "test_chrf": test.get("chrf"),
        "alignment_accuracy": alignment[-1] if alignment else None,
        "run_dir": str(run_dir),
    }


def sweep_rows(sweep_dir: Path) -> list[dict[str, Any]]:
    runs = find_runs(sweep_dir)
    rows = [summarise_run(run, sweep_dir.name) for run in runs]
    labels = model_labels([read_config(run) for run in runs])
    for row, label in zip(rows, labels, strict=True):
        row["model"] = label
    return rows


# ---------------------------------------------------------------- output


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    """Raw numbers, an empty cell where a value is missing."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([name for name, _ in COLUMNS])
        for row in rows:
            writer.writerow(["" if row[name] is None else row[name] for name, _ in COLUMNS])


def format_cell(name: str, value: Any) -> str:
    """A value as the markdown table shows it; `—` when missing."""
    if value is None:
        return MISSING
    if name in ("parameters", "steps"):
        return f"{int(value):,}"
    if name == "tokens_per_sec":
        return f"{value:,.0f}"
    if name == "train_minutes":
        return f"{value:.1f}"
    if name == "alignment_accuracy":
        return f"{value:.3f}"
    if name in ("valid_bleu", "test_bleu", "test_chrf"):
        return f"{value:.2f}"
    return str(value).replace("|", "\\|")


def markdown_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| " + " | ".join(header for _, header in COLUMNS) + " |"]
    lines.append("|" + "---|" * len(COLUMNS))
    for row in rows:
        lines.append("| " + " | ".join(format_cell(name, row[name]) for name, _ in COLUMNS) + " |")
    return lines


def write_markdown(
    sweeps: dict[str, list[dict[str, Any]]],
    images: dict[str, Path],
    path: Path,
    command: str,
    made_by: str | None = None,
) -> None:
    """COMPARISON.md: how it was made, then per sweep its table and its alignment image."""
    trained = f"Runs trained by `{made_by}`; this file written by" if made_by else "Written by"
    lines = [
        "# Comparison",
        "",
        f"{trained} `{command}`. Every run of a sweep has the same data, seed and step "
        "budget, and a parameter count within ±10% of the others (the `compare_<family>` "
        "presets in `configs/experiment/`). tgt tok/s: median of `train/tokens_per_sec`; "
        "valid BLEU: the best validation; test BLEU / chrF: the best checkpoint on the test "
        "split (`results.json`); align. acc.: the last `valid/alignment_accuracy` (share of "
        "probe words whose strongest attention falls on the linked source word).",
    ]
    for sweep, rows in sweeps.items():
        lines += ["", f"## {sweep}", "", *markdown_table(rows)]
        if sweep in images:
            relative = images[sweep].relative_to(path.parent)
            lines += ["", f"![alignments of the {sweep} sweep]({relative.as_posix()})"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def alignment_image(sweep_dir: Path, out: Path, device: str) -> Path | None:
    """The side-by-side alignment of the first probe (scripts/compare_alignments.py);
    None when the sweep has no checkpoint or no run with attention weights."""
    try:
        checkpoints = find_checkpoints([sweep_dir])
        sentence, panels = collect_panels(checkpoints, device, None, None)
    except (FileNotFoundError, CheckpointError, ValueError) as error:
        print(f"{sweep_dir}: no alignment image ({error})", file=sys.stderr)
        return None
    if not panels:
        return None
    title = f"{sentence}  (greedy; last layer, mean of heads)"
    figure = draw_comparison(panels, title)
    figure.savefig(out, dpi=120)
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sweeps", nargs="+", type=Path, help="sweep folders (Hydra multirun)")
    parser.add_argument("--out-dir", type=Path, default=Path("."), help="where to write")
    parser.add_argument("--no-image", action="store_true", help="skip the alignment images")
    parser.add_argument("--device", default="cpu", help="device for the alignment images")
    parser.add_argument("--made-by", help="the command that trained the runs, for the header")
    parser.add_argument(
        "--best", metavar="GROUP", help="only print the GROUP option of the best-validating run"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.best:
        print(best_choice(args.sweeps[0], args.best))
        return 0
    args.out_dir.mkdir(parents=True, exist_ok=True)
    sweeps = {sweep.name: sweep_rows(sweep) for sweep in args.sweeps}
    if len(sweeps) != len(args.sweeps):
        raise SystemExit("two sweep folders have the same name; give folders with distinct names")
    images = {}
    for sweep in [] if args.no_image else args.sweeps:
        image = alignment_image(sweep, args.out_dir / f"comparison_{sweep.name}.png", args.device)
        if image is not None:
            images[sweep.name] = image
    all_rows = [row for rows in sweeps.values() for row in rows]
    write_csv(all_rows, args.out_dir / "comparison.csv")
    command = "python scripts/compare.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    write_markdown(sweeps, images, args.out_dir / "COMPARISON.md", command, args.made_by)
    print(args.out_dir / "COMPARISON.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
