"""`seq2seq-evaluate`: translate and score with sacrebleu, from a checkpoint.

    seq2seq-evaluate CHECKPOINT                       # the test split of its own corpus
    seq2seq-evaluate CHECKPOINT --split valid
    seq2seq-evaluate CHECKPOINT --src test.zh --ref test.en -o test.hyp

BLEU uses sacrebleu's `zh` tokeniser when the target is Chinese and `13a` otherwise,
through the same function as validation (`seq2seq.metrics.corpus_scores`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from seq2seq.build import plain
from seq2seq.data.config import DataConfig
from seq2seq.data.prepare import prepare
from seq2seq.inference import Translator
from seq2seq.metrics import corpus_scores
from seq2seq.translate import load_translator, search_arguments, settings_from


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="seq2seq-evaluate", description=__doc__.split("\n")[0])
    search_arguments(parser)
    parser.add_argument("--split", choices=("valid", "test"), default="test")
    parser.add_argument("--src", type=Path, help="source file (with --ref) instead of a split")
    parser.add_argument("--ref", type=Path, help="reference file, one line per source line")
    parser.add_argument("-o", "--output", type=Path, help="hypotheses file (default: beside the checkpoint)")
    parser.add_argument("--ter", action="store_true", help="also report TER")
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")
    return parser


def read_pair(args: argparse.Namespace, translator: Translator) -> tuple[list[str], list[str]]:
    """Source and reference lines from files, or from a split of the checkpoint's corpus."""
    if (args.src is None) != (args.ref is None):
        raise SystemExit("seq2seq-evaluate: --src and --ref go together")
    if args.src is not None:
        sources = args.src.read_text(encoding="utf-8").splitlines()
        references = args.ref.read_text(encoding="utf-8").splitlines()
        if len(sources) != len(references):
            raise SystemExit(
                f"seq2seq-evaluate: {args.src} has {len(sources)} lines, {args.ref} has {len(references)}"
            )
        return sources, references
    data = prepare(DataConfig(**plain(translator.config.data)))
    split = getattr(data, args.split)
    return list(split.src_lines), list(split.tgt_lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    translator = load_translator(args, "seq2seq-evaluate")
    if translator is None:
        return 2
    sources, references = read_pair(args, translator)
    translations = translator.translate(sources, settings_from(args))
    hypotheses = [translation.text for translation in translations]
    output = args.output or args.checkpoint.with_suffix(f".{args.src and 'files' or args.split}.hyp")
    output.write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
    scores = corpus_scores(hypotheses, references, translator.tgt_tokenizer.lang, ter=args.ter)
    if args.json:
        print(json.dumps(scores, ensure_ascii=False, indent=2))
    else:
        for name in ("bleu", "chrf", "ter"):
            if name in scores:
                print(f"{name.upper():5s} {scores[name]:6.2f}  {scores[name + '_signature']}")
        print(f"hypotheses: {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
