"""Choose the test search on valid: BLEU and length ratio per beam size and length penalty.

    python scripts/tune_search.py RUN/checkpoints/best.pt [...] --beams 5 --alphas 0.6 1.0 1.4

What is measured: `tools.bench.search_tuning`. One Markdown table row per checkpoint and
setting; the test split is not read.
"""

from __future__ import annotations

import _workshop  # noqa: F401  (puts the repository root, and tools/, on sys.path)

# isort: split

from pathlib import Path

from seq2seq.cli.checked_options import OneLineParser
from tools.bench.entry import shown_path
from tools.bench.search_tuning import tune

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoints", type=Path, nargs="+")
    parser.add_argument("--data-root", type=Path, default=ROOT / "data")
    parser.add_argument("--beams", type=int, nargs="+", default=[5])
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.6, 0.8, 1.0, 1.2, 1.4])
    args = parser.parse_args(argv)
    print("| checkpoint | beam | length penalty α | valid BLEU | length ratio |")
    print("|---|---|---|---|---|")
    for path in args.checkpoints:
        for row in tune(path, args.data_root, args.beams, args.alphas):
            print(f"| {shown_path(path)} | {row.beam_size} | {row.length_penalty:g} | "
                  f"{row.bleu:.2f} | {row.length_ratio:.3f} |", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
