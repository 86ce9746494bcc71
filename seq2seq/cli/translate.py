"""`seq2seq-translate`: translate with a checkpoint, which carries its own tokenisers.

    seq2seq-translate CHECKPOINT "我爱中国。"            # sentences on the command line
    seq2seq-translate CHECKPOINT -i input.zh > out.en    # a file (or standard input)
    seq2seq-translate CHECKPOINT "我爱中国。" --show-attention --plot align.png
    seq2seq-translate CHECKPOINT -i input.zh --alignments  # translation<TAB>0-0 1-2 ...
    seq2seq-translate CHECKPOINT "我爱中国。" "你好。" --html align.html   # attention viewer
    seq2seq-translate RUN/checkpoints/best.pt --probes --html probes.html
    seq2seq-translate --engine ctranslate2 OUT/ "我爱中国。"   # a seq2seq-export folder

`--engine ctranslate2` translates with a folder written by `seq2seq-export --format
ctranslate2` instead of a checkpoint, with the same search settings (`seq2seq.export.ctranslate2_translator`).
It gives the attention of one head only, the one the export recorded for alignments (the
checkpoint's, as below), so `--alignments` works with it while `--html`, `--plot`,
`--show-attention` and `--probes` are refused.

`--alignments` reads the links from the attention the checkpoint names: a model's separate
alignment layer (`alignment=layer`, fed the source and the model's own output), else a
guided model's guided head, else the layer and head training chose on the valid gold pairs, else the
last layer's head mean (`seq2seq.align.defaults`); one line on stderr says which.

`--html PAGE` writes one self-contained page (no network access) showing every layer and
head of the cross-attention and, for Transformers, of the encoder and decoder
self-attention of each sentence's best output: hover a piece or a cell to read its
weights (`seq2seq.visualise.viewer`). A model trained with `alignment=layer` shows its
alignment layer too, and the page opens on it, since word links are read from it; one
line on stderr says where the page opens. `--plot` draws the cross-attention alone (its
stderr line says so for a model with an alignment layer). `--probes` translates the
built-in probe sentences of the checkpoint's language pair (`seq2seq/visualise/probes/`)
instead of sentences or a file, and the page shows their reference translations too.

A model trained with document context (`data.documents.context=c`: each source after the
c sentences before it) reads the input as documents, a blank line between two: each line
is translated after the (at most) c lines before it in its document, joined by `<sep>`
(`seq2seq.data.documents.lines_in_context`); `--context N` reads N instead (0: none), and
one stderr line says which.

A checkpoint trained with plugins (`seq2seq-train plugins=[./lab/scores.py]`) is refused
in one line naming them until the same plugins are passed, `--plugins lab/scores.py`
(once per plugin): a plugin runs its code, so pass only plugins you trust.

Every problem with the options, the input or the checkpoint (a hostile or broken config,
unreadable tokenisers) is one error line on stderr and exit code 2, never a traceback.

A line is translated even when something about it is doubtful; one warning on stderr per
line says what, naming the line: a line longer than the model's limit (`data.max_len`
pieces) is cut to it (`WARNING: line 3: 230 source pieces, truncated to the model's limit
of 100`), and a line hardly in the script of the model's source language may be in another
language (`WARNING: line 4: 0 of its 10 letters are Chinese characters, ...`;
`seq2seq.data.script_check`), and characters outside the source vocabulary are read as
<unk> (`WARNING: line 5: 1 character outside the model's source vocabulary, read as <unk>:
龘 ...`; a model prepared with `data.byte_fallback=true` spells them in bytes instead).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from seq2seq.align.defaults import DefaultSettings, default_settings, head_marks
from seq2seq.align.extract import AlignmentError, AlignSettings, translation_links
from seq2seq.align.pharaoh import Links, format_links
from seq2seq.align.teacher_forced import has_alignment_layer
from seq2seq.cli.checked_options import OneLineParser, check_output_files
from seq2seq.cli.common import (
    InputError,
    checked_settings,
    decode_lines,
    load_translator,
    one_line,
    read_text_lines,
    search_arguments,
)
from seq2seq.config.search_settings import SearchSettings
from seq2seq.data.documents import lines_in_context, side_langs
from seq2seq.output_folders import OutputPlaceError, writing_file
from seq2seq.progress_bars import NO_PROGRESS_HELP
from seq2seq.search.translator import Translation, Translator, reading_note
from seq2seq.visualise.probes import Probe, probes_for
from seq2seq.visualise.text_matrix import attention_matrix_text

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="seq2seq-translate", description=__doc__.split("\n")[0])
    search_arguments(parser)
    parser.add_argument("sentences", nargs="*", help="sentences to translate (else --input/stdin)")
    parser.add_argument("-i", "--input", type=Path, help="a file with one sentence per line")
    parser.add_argument("--show-attention", action="store_true", help="print alignment matrices")
    parser.add_argument("--plot", type=Path, help="save the first sentence's alignment as PNG")
    parser.add_argument(
        "--alignments",
        action="store_true",
        help="append a TAB and the word links (Pharaoh i-j) of each output, from its attention",
    )
    parser.add_argument(
        "--html",
        type=Path,
        metavar="PAGE",
        help="write an interactive attention viewer of every sentence (one self-contained file)",
    )
    parser.add_argument(
        "--probes",
        action="store_true",
        help="translate the built-in probe sentences of the checkpoint's language pair",
    )
    parser.add_argument(
        "--engine",
        choices=["pytorch", "ctranslate2"],
        default="pytorch",
        help="pytorch: the checkpoint with the project's search; ctranslate2: CHECKPOINT is "
        "a seq2seq-export folder (default %(default)s)",
    )
    parser.add_argument(
        "--context",
        type=int,
        metavar="N",
        help="read each line after the (at most) N lines before it in its document (a blank "
        "line between documents), as a model trained with data.documents.context reads its "
        "sources; default: the checkpoint's data.documents.context, else 0",
    )
    parser.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)
    return parser


def check_outputs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """One error line and exit code 2 for options that cannot work together or an output
    file (--html, --plot) that cannot be written, before the checkpoint is loaded."""
    if args.probes and (args.sentences or args.input):
        parser.error("--probes translates the probe sentences: give no sentences or --input")
    if args.context is not None and args.context < 0:
        parser.error(f"--context must be 0 or more lines, got {args.context}")
    if args.engine == "ctranslate2":
        given = [option for option, value in PYTORCH_ONLY_OPTIONS.items() if getattr(args, value)]
        if given:
            parser.error(
                f"{given[0]} needs --engine pytorch (CTranslate2 gives only the alignment "
                "head's attention)"
            )
    if args.plot is not None and not args.plot.suffix:
        args.plot = args.plot.with_suffix(".png")  # the name matplotlib would give it
    check_output_files(parser, ("--html", args.html), ("--plot", args.plot))


# Options that need the PyTorch engine: attention weights, the checkpoint's config or code.
PYTORCH_ONLY_OPTIONS = {"--html": "html", "--plot": "plot",
                        "--show-attention": "show_attention", "--probes": "probes",
                        "--plugins": "plugins"}  # fmt: skip


def translate_ctranslate2(args: argparse.Namespace, settings: SearchSettings, lines) -> int:
    """`--engine ctranslate2`: translate with an export folder; 0, or 2 after one error line."""
    from seq2seq.export import ExportError
    from seq2seq.export.ctranslate2_translator import CTranslate2Translator

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        translator = CTranslate2Translator.load(
            args.checkpoint, args.device, compute_type=args.quantization
        )
    except ExportError as error:
        print(f"seq2seq-translate: {one_line(error)}", file=sys.stderr)
        return 2
    translations = translator.translate(lines, settings, args.alignments)
    warn_about_sources(translations, translator.src_tokenizer)
    links = None
    if args.alignments:
        head = translator.meta.get("alignment")
        if not isinstance(head, dict) or not isinstance(head.get("description"), str):
            print("seq2seq-translate: --alignments: the export records no alignment head; "
                  "export the checkpoint again", file=sys.stderr)  # fmt: skip
            return 2
        # Each hypothesis holds the recorded head's attention alone, as layer 0, head 0.
        only = AlignSettings(layer=0, head=0)
        links = [translation_links(translator, t, only) or [Links()] for t in translations]
        print(f"seq2seq-translate: --alignments: links from {head['description']}",
              file=sys.stderr)  # fmt: skip
    print_translations(translations, settings.n_best, links, False)
    return 0


def checkpoint_probes(translator: Translator) -> list[Probe]:
    """The built-in probes of the checkpoint's pair (a probe file named in a checkpoint is
    never read); InputError when there are none."""
    src_lang, tgt_lang = translator.config.data.src_lang, translator.config.data.tgt_lang
    probes = probes_for(src_lang, tgt_lang)
    if not probes:
        raise InputError(f"--probes: no built-in probe sentences for {src_lang}→{tgt_lang}")
    return probes


def read_lines(args: argparse.Namespace) -> list[str]:
    if args.sentences:
        return list(args.sentences)
    if args.input:
        return read_text_lines(args.input, "--input")
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a text stream substituted for stdin (tests, notebooks)
        return [line.rstrip("\r\n") for line in sys.stdin]
    return decode_lines(stream, "standard input")


def read_in_context(translator: Translator, lines: list[str], context: int | None) -> list[str]:
    """`lines`, each after its document's `context` lines before it (None: the checkpoint's
    data.documents.context) with one line on stderr saying so; as they are for 0."""
    data = translator.config.data
    documents = data.get("documents") or {}
    trained = documents.get("context") or 0
    lines_before = trained if context is None else context
    if not lines_before:
        return lines
    if trained != lines_before:
        log.warning(
            "--context %d: the model was trained with %d lines of context", lines_before, trained
        )
    source = "--context" if context is not None else "the checkpoint's data.documents.context"
    print(
        f"seq2seq-translate: each line read after the {lines_before} (at most) before it in "
        f"its document ({source}; a blank line starts a document)",
        file=sys.stderr,
    )
    src_langs = side_langs(data)[0]
    return lines_in_context(lines, lines_before, src_langs)


def warn_about_sources(translations: Sequence[Translation], src_tokenizer) -> None:
    """One warning per line hardly in the script of the model's source language, or else
    with characters outside the source vocabulary (`seq2seq.search.translator.reading_note`),
    naming the line from 1. (The translator warns of
    each line it cuts to the model's limit.)"""
    for number, translation in enumerate(translations, 1):
        note = reading_note(translation, src_tokenizer)
        if note is not None:
            log.warning("line %d: %s", number, note)


def format_translation(translation: Translation, n_best: int) -> list[str]:
    """One line per input (n_best = 1), or `rank<TAB>score<TAB>text` lines. An empty input
    line has one empty translation: an empty line, or `1<TAB>0.0000<TAB>` with n-best."""
    if n_best == 1:
        return [translation.text]
    if not translation.hypotheses:
        return [f"1\t{0.0:.4f}\t"]
    return [
        f"{rank}\t{hyp.score:.4f}\t{text}"
        for rank, (hyp, text) in enumerate(zip(translation.hypotheses, translation.texts), 1)
    ]


def output_links(
    translator: Translator, translation: Translation, settings: AlignSettings
) -> list[Links]:
    """The word links of each output line of a translation (`default_settings` in `main`);
    an empty input line has one output without links."""
    return translation_links(translator, translation, settings) or [Links()]


def all_links(
    translator: Translator, translations: Sequence[Translation]
) -> tuple[list[list[Links]], DefaultSettings]:
    """`--alignments`: the links of every output, and the settings they were read with;
    AlignmentError when the model has no attention weights."""
    found = default_settings(translator)
    return [output_links(translator, t, found.settings) for t in translations], found


def print_translations(
    translations: Sequence[Translation],
    n_best: int,
    links: Sequence[list[Links]] | None,
    show: bool,
) -> None:
    """The output lines on stdout (each followed by a TAB and its links, when given) and,
    with `show`, each sentence's attention matrix on stderr."""
    for index, translation in enumerate(translations):
        outputs = format_translation(translation, n_best)
        if links is not None:
            outputs = [f"{out}\t{format_links(found)}" for out, found in zip(outputs, links[index])]
        print("\n".join(outputs))
        if show and translation.source:
            print(show_attention(translation), file=sys.stderr)


def show_attention(translation: Translation) -> str:
    if not translation.hypotheses or translation.hypotheses[0].attention is None:
        return "(no attention weights: the model uses attention=none)"
    weights = translation.hypotheses[0].attention[-1].mean(dim=0)  # last layer, head mean
    return attention_matrix_text(translation.source_pieces, translation.target_pieces[0], weights)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    settings = checked_settings(parser, args)
    check_outputs(parser, args)
    try:
        lines = [] if args.probes else read_lines(args)
    except InputError as error:
        parser.error(str(error))
    if args.engine == "ctranslate2":
        return translate_ctranslate2(args, settings, lines)
    translator = load_translator(args, "seq2seq-translate")
    if translator is None:
        return 2
    references: list[str | None] = [None] * len(lines)
    if args.probes:
        try:
            probes = checkpoint_probes(translator)
        except InputError as error:
            print(f"seq2seq-translate: {error}", file=sys.stderr)
            return 2
        lines, references = [p.source for p in probes], [p.reference for p in probes]
    else:
        lines = read_in_context(translator, lines, args.context)
    draws = args.plot is not None or args.html is not None
    need_weights = args.show_attention or args.alignments or draws
    translations = translator.translate(
        lines, settings, need_weights, progress=not args.no_progress
    )
    warn_about_sources(translations, translator.src_tokenizer)
    links = None
    if args.alignments:
        try:
            links, found = all_links(translator, translations)
        except AlignmentError as error:
            print(f"seq2seq-translate: --alignments: {error}", file=sys.stderr)
            return 2
        print(f"seq2seq-translate: --alignments: links from {found.description}", file=sys.stderr)
    print_translations(translations, settings.n_best, links, args.show_attention)
    if args.html is not None and write_page(translator, translations, references, args.html):
        return 2
    if args.plot is not None and translations:
        return plot_first(translator, translations[0], args.plot)
    return 0


def write_page(
    translator: Translator,
    translations: Sequence[Translation],
    references: Sequence[str | None],
    path: Path,
) -> int:
    """Write the attention viewer; 0, or 2 after one error line."""
    from seq2seq.visualise.viewer import ViewerError, opening_line, write_viewer

    try:
        with writing_file(path, "--html") as temporary:  # whole or not at all
            data = write_viewer(temporary, translator, translations, references)
    except ViewerError as error:
        print(f"seq2seq-translate: --html {path}: {one_line(error)}", file=sys.stderr)
        return 2
    except OutputPlaceError as error:
        print(f"seq2seq-translate: {error}", file=sys.stderr)
        return 2
    print(f"attention viewer saved to {path}; {opening_line(data)}", file=sys.stderr)
    return 0


def plot_first(translator: Translator, translation: Translation, path: Path) -> int:
    from seq2seq.visualise.heatmap import save_translation_heatmap

    try:
        with writing_file(path, "--plot") as temporary:  # whole or not at all
            save_translation_heatmap(translator, translation, temporary, head_marks(translator))
    except OutputPlaceError as error:  # before ValueError: it is one
        print(f"seq2seq-translate: {error}", file=sys.stderr)
        return 2
    except ValueError as error:  # attention=none has no weights to draw; a bad guided head
        print(f"seq2seq-translate: --plot: {error}", file=sys.stderr)
        return 2
    note = ""
    if has_alignment_layer(translator.model):  # word links come from the layer, not drawn here
        note = " (the cross-attention alone; --html shows the alignment layer too)"
    print(f"alignment saved to {path}{note}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
