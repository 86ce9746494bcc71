"""Per checkpoint: valid/test BLEU and gap, rare slices, unseen characters, and the probes.

Rare slices: rare words (valid) and rare characters (valid, test). Unseen characters: the
pairs that hold one, as they are and deleted, and the constructed pairs with one put in.

    python scripts/generalisation.py RUN/checkpoints/best.pt [RUN2/checkpoints/best.pt ...]

What is measured: `tools.bench.generalisation`. One Markdown table row per checkpoint,
then each checkpoint's probe translations.
"""

from __future__ import annotations

import _workshop  # noqa: F401  (puts the repository root, and tools/, on sys.path)

# isort: split

from pathlib import Path

from seq2seq.cli.checked_options import OneLineParser, whole
from tools.bench.entry import shown_path
from tools.bench.generalisation import RARE_COUNT, measure

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoints", type=Path, nargs="+")
    parser.add_argument("--data-root", type=Path, default=ROOT / "data")
    parser.add_argument("--rare-count", type=whole(0, 10**9), default=RARE_COUNT,
                        help="a word seen at most this often in training is rare")  # fmt: skip
    args = parser.parse_args(argv)
    found = {path: measure(path, args.data_root, args.rare_count) for path in args.checkpoints}
    print(
        "| checkpoint | valid BLEU | test BLEU | test − valid (95% interval) "
        "| rare-word slice BLEU (sentences) |"
    )
    print("|---|---|---|---|---|")
    for path, result in found.items():
        gap = result.gap_interval
        print(f"| {shown_path(path)} | {result.valid_bleu:.2f} | {result.test_bleu:.2f} | "
              f"{gap.gap:+.2f} [{gap.ci_low:+.2f}, {gap.ci_high:+.2f}] | "
              f"{result.rare_bleu:.2f} ({result.rare_sentences}) |")  # fmt: skip
    print("\n| checkpoint | split | rare-character slice BLEU (sentences) | unseen characters: "
          "BLEU as they are / deleted (sentences) |")
    print("|---|---|---|---|")
    for path, result in found.items():
        for split, rare in result.rare_chars.items():
            unseen = result.unseen_chars[split]
            print(f"| {shown_path(path)} | {split} | {rare.bleu:.2f} ({rare.sentences}) | "
                  f"{unseen.with_them:.2f} / {unseen.without_them:.2f} ({unseen.sentences}) |")
    print("\n| checkpoint | split | constructed pairs: BLEU with one unseen character put in / "
          "as they are (sentences) |")
    print("|---|---|---|")
    for path, result in found.items():
        for split, put_in in result.inserted.items():
            print(f"| {shown_path(path)} | {split} | {put_in.with_them:.2f} / "
                  f"{put_in.without_them:.2f} ({put_in.sentences}) |")
    for path, result in found.items():
        print(f"\n{shown_path(path)}:")
        for source, reference, translation in result.probes:
            print(f"  {source}  →  {translation}   (reference: {reference})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
