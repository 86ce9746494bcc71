"""Summarise a fault-injection run (`make faults`) as the Markdown tables of RELIABILITY.md.

    python scripts/faults_report.py faults-report.jsonl > faults-report.md

The input has one JSON object per line, written by `tests/faults/conftest.py`: an attack
(`{"attack": test id, "category": ..., "behaved": bool, "skipped": bool}`) or a figure a
test added (`{"figure": name, "value": number, "test": test id}`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path


def read_rows(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as stream:
        return [json.loads(line) for line in stream if line.strip()]


def attack_table(rows: Iterable[dict]) -> list[str]:
    """One line per category: attacks tried, behaved, did not, skipped."""
    tried: Counter[str] = Counter()
    behaved: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    failures: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        if "attack" not in row:
            continue
        category = row["category"]
        if row.get("skipped"):
            skipped[category] += 1
            continue
        tried[category] += 1
        if row["behaved"]:
            behaved[category] += 1
        else:
            failures[category].append(row["attack"])
    lines = [
        "| category | attacks tried | behaved | did not | skipped |",
        "|---|---:|---:|---:|---:|",
    ]
    for category in sorted(set(tried) | set(skipped)):
        lines.append(
            f"| {category} | {tried[category]} | {behaved[category]} | "
            f"{tried[category] - behaved[category]} | {skipped[category]} |"
        )
    total, good = sum(tried.values()), sum(behaved.values())
    lines.append(
        f"| **all** | **{total}** | **{good}** | **{total - good}** | {sum(skipped.values())} |"
    )
    for category, names in sorted(failures.items()):
        lines.append("")
        lines.append(f"Did not behave ({category}): " + ", ".join(f"`{name}`" for name in names))
    return lines


def figure_table(rows: Iterable[dict]) -> list[str]:
    """The figures tests added, summed by name."""
    totals: dict[str, float] = defaultdict(float)
    for row in rows:
        if "figure" in row:
            totals[row["figure"]] += row["value"]
    if not totals:
        return []
    lines = ["| figure | value |", "|---|---:|"]
    for name, value in sorted(totals.items()):
        lines.append(f"| {name} | {value:g} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("report", type=Path, help="the JSON-lines file of a `make faults` run")
    args = parser.parse_args(argv)
    if not args.report.is_file():
        print(f"faults_report: {args.report} does not exist (run `make faults`)", file=sys.stderr)
        return 2
    rows = read_rows(args.report)
    print(
        "\n".join(
            ["## Attacks", "", *attack_table(rows), "", "## Figures", "", *figure_table(rows)]
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
