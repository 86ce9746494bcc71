"""`seq2seq-translate`: translate with a checkpoint, which carries its own tokenisers.

    seq2seq-translate CHECKPOINT "我爱中国。"            # sentences on the command line
    seq2seq-translate CHECKPOINT -i input.zh > out.en    # a file (or standard input)
    seq2seq-translate CHECKPOINT "我爱中国。" --show-attention --plot align.png
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from seq2seq.decoding import SearchSettings
from seq2seq.inference import Translation, Translator
from seq2seq.training.checkpoint import CheckpointError
from seq2seq.visualise.text import attention_matrix_text


def search_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by seq2seq-translate and seq2seq-evaluate."""
    parser.add_argument("checkpoint", type=Path, help="a .pt checkpoint written by seq2seq-train")
    parser.add_argument("--beam-size", type=int, default=5, help="1 = greedy (default 5)")
    parser.add_argument("--length-penalty", type=float, default=1.0, help="GNMT alpha")
    parser.add_argument("--max-len-a", type=float, default=1.5, help="max output = a·src + b")
    parser.add_argument("--max-len-b", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per batch")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N")


def load_translator(args: argparse.Namespace, program: str) -> Translator | None:
    """Set up logging and load the checkpoint; None (after one error line) if it fails."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        return Translator.load(args.checkpoint, args.device)
    except CheckpointError as error:
        print(f"{program}: {error}", file=sys.stderr)
        return None


def settings_from(args: argparse.Namespace, n_best: int = 1) -> SearchSettings:
    return SearchSettings(
        beam_size=args.beam_size,
        length_penalty=args.length_penalty,
        max_len_a=args.max_len_a,
        max_len_b=args.max_len_b,
        batch_size=args.batch_size,
        n_best=n_best,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="seq2seq-translate", description=__doc__.split("\n")[0])
    search_arguments(parser)
    parser.add_argument("sentences", nargs="*", help="sentences to translate (else --input/stdin)")
    parser.add_argument("-i", "--input", type=Path, help="a file with one sentence per line")
    parser.add_argument("--n-best", type=int, default=1, help="hypotheses per sentence")
    parser.add_argument("--show-attention", action="store_true", help="print alignment matrices")
    parser.add_argument("--plot", type=Path, help="save the first sentence's alignment as PNG")
    return parser


def read_lines(args: argparse.Namespace) -> list[str]:
    if args.sentences:
        return list(args.sentences)
    handle = args.input.open(encoding="utf-8") if args.input else sys.stdin
    with handle:
        return [line.rstrip("\n") for line in handle]


def format_translation(translation: Translation, n_best: int) -> list[str]:
    """One line per input (n_best = 1), or `rank<TAB>score<TAB>text` lines."""
    if n_best == 1:
        return [translation.text]
    return [
        f"{rank}\t{hyp.score:.4f}\t{text}"
        for rank, (hyp, text) in enumerate(zip(translation.hypotheses, translation.texts), 1)
    ]


def show_attention(translation: Translation) -> str:
    if not translation.hypotheses or translation.hypotheses[0].attention is None:
        return "(no attention weights: the model uses attention=none)"
    weights = translation.hypotheses[0].attention[-1].mean(dim=0)  # last layer, head mean
    return attention_matrix_text(translation.source_pieces, translation.target_pieces[0], weights)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    translator = load_translator(args, "seq2seq-translate")
    if translator is None:
        return 2
    need_weights = args.show_attention or args.plot is not None
    translations = translator.translate(
        read_lines(args), settings_from(args, args.n_best), need_weights
    )
    for translation in translations:
        print("\n".join(format_translation(translation, args.n_best)))
        if args.show_attention and translation.source:
            print(show_attention(translation), file=sys.stderr)
    if args.plot is not None and translations:
        return plot_first(translator, translations[0], args.plot)
    return 0


def plot_first(translator: Translator, translation: Translation, path: Path) -> int:
    from seq2seq.visualise.heatmap import save_translation_heatmap

    try:
        save_translation_heatmap(translator, translation, path)
    except ValueError as error:  # attention=none has no weights to draw
        print(f"seq2seq-translate: --plot: {error}", file=sys.stderr)
        return 2
    print(f"alignment saved to {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
