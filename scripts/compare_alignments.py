"""Draw one sentence's alignment from several runs side by side (e.g. an attention sweep).

    python scripts/compare_alignments.py multirun/default/2026-11-29_14-00-00
    python scripts/compare_alignments.py outputs/a/RUN1 outputs/b/RUN2 --sentence "我爱中国。"
    python scripts/compare_alignments.py multirun/... --reference "I love China." --out cmp.png

Every run folder holding `checkpoints/best.pt` (searched recursively) gives one panel: the
last attention layer's head mean, titled by the settings in which the runs differ
(attention score / region / heads, encoder...). By default each model translates the
sentence greedily; with `--reference` all models are teacher-forced on that translation,
so every panel has the same rows. `--tensorboard DIR` also logs the image there.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from seq2seq.checkpoint import CheckpointError
from seq2seq.decoding import SearchSettings
from seq2seq.inference import Translator
from seq2seq.special_tokens import EOS_PIECE
from seq2seq.training.logger import RunLogger
from seq2seq.visualise.alignment import attention_summary, teacher_forced_attention
from seq2seq.visualise.heatmap import (
    AlignmentPanel,
    describe_run,
    draw_comparison,
    figure_to_rgb,
)
from seq2seq.visualise.probes import probes_for


def runs_below(folder: Path, marker: str) -> list[Path]:
    """Run folders at or below `folder` that hold the file `marker` (a relative path), in
    sweep job order. Symbolic links are followed: `make compare` links a run of the
    attention sweep into the encoder sweep instead of training it twice."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder")
    runs = [
        Path(root)
        for root, _, _ in os.walk(folder, followlinks=True)
        if (Path(root) / marker).is_file()
    ]
    return sorted(runs, key=job_order)


def job_order(run: Path) -> tuple[int, str]:
    """Hydra names sweep jobs `<number>_<overrides>`: sort by the number, then the name."""
    number = run.name.split("_", 1)[0]
    return (int(number) if number.isdigit() else sys.maxsize, str(run))


def find_checkpoints(folders: list[Path]) -> list[Path]:
    """`<run>/checkpoints/best.pt` of every run folder at or below the given folders."""
    found = [
        run / "checkpoints" / "best.pt"
        for folder in folders
        for run in runs_below(folder, "checkpoints/best.pt")
    ]
    if not found:
        raise FileNotFoundError(f"no checkpoints/best.pt below {', '.join(map(str, folders))}")
    return found


def greedy_panel(translator: Translator, sentence: str) -> AlignmentPanel | None:
    """The model's own translation and its attention; None without attention."""
    (translation,) = translator.translate(
        [sentence], SearchSettings(beam_size=1), need_weights=True
    )
    if not translation.hypotheses or translation.hypotheses[0].attention is None:
        return None
    weights = attention_summary(translation.hypotheses[0].attention)  # (tgt_len, src_len)
    return AlignmentPanel(
        translation.source_pieces, translation.target_pieces[0], weights.numpy(), translation.text
    )


def teacher_forced_panel(
    translator: Translator, sentence: str, reference: str
) -> AlignmentPanel | None:
    """The attention while the model is fed `reference`; None without attention."""
    src_ids = translator.src_tokenizer.encode(sentence)
    tgt_ids = translator.tgt_tokenizer.encode(reference)
    matrices = teacher_forced_attention(translator.model, [(src_ids, tgt_ids)], translator.device)
    if matrices is None:
        return None
    source = [translator.src_tokenizer.id_to_piece(i) for i in src_ids] + [EOS_PIECE]
    target = [translator.tgt_tokenizer.id_to_piece(i) for i in tgt_ids] + [EOS_PIECE]
    return AlignmentPanel(source, target, matrices[0].numpy(), reference)


def differing_settings(descriptions: list[dict[str, str]]) -> list[str]:
    """The keys whose values are not the same in every run, in a stable order."""
    keys = list(dict.fromkeys(key for description in descriptions for key in description))
    return [key for key in keys if len({d.get(key, "-") for d in descriptions}) > 1]


def panel_titles(runs: list[Path], descriptions: list[dict[str, str]]) -> list[str]:
    """The differing settings of each run, or its folder when no setting differs."""
    keys = differing_settings(descriptions)
    if not keys:
        common = Path(os.path.commonpath(runs)) if len(runs) > 1 else runs[0].parent
        return [str(run.relative_to(common)) for run in runs]
    return [" · ".join(f"{key}={d.get(key, '-')}" for key in keys) for d in descriptions]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders or a multirun folder")
    parser.add_argument("--sentence", help="source sentence (default: the first probe)")
    parser.add_argument("--reference", help="teacher-force this translation in every run")
    parser.add_argument("--out", type=Path, default=Path("alignment_comparison.png"))
    parser.add_argument("--tensorboard", type=Path, help="also log the image in DIR/tensorboard")
    parser.add_argument("--device", default="cpu")
    return parser


def load_checked(path: Path, device: str) -> Translator:
    """`Translator.load`, which validates the checkpoint's config before building anything;
    a checkpoint it refuses stops the script with its one-line reason."""
    try:
        return Translator.load(path, device)
    except CheckpointError as error:
        raise SystemExit(f"compare_alignments: {error}") from error


def collect_panels(
    checkpoints: list[Path], device: str, sentence: str | None, reference: str | None
) -> tuple[str, list[AlignmentPanel]]:
    """The sentence and one panel per run that has attention weights."""
    translators = [load_checked(path, device) for path in checkpoints]
    sentence = sentence or default_sentence(translators[0])
    runs = [path.parent.parent for path in checkpoints]
    titles = panel_titles(runs, [describe_run(t.config) for t in translators])
    panels = []
    for run, translator, title in zip(runs, translators, titles, strict=True):
        if reference:
            panel = teacher_forced_panel(translator, sentence, reference)
        else:
            panel = greedy_panel(translator, sentence)
        if panel is None:
            print(f"{run}: no attention weights (attention=none), left out", file=sys.stderr)
            continue
        panel.title = f"{title}\n{panel.title}"
        panels.append(panel)
    return sentence, panels


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    checkpoints = find_checkpoints(args.runs)
    sentence, panels = collect_panels(checkpoints, args.device, args.sentence, args.reference)
    if not panels:
        raise SystemExit("none of the runs has attention weights to compare")
    mode = "teacher-forced" if args.reference else "greedy"
    figure = draw_comparison(panels, f"{sentence}  ({mode}; last layer, mean of heads)")
    figure.savefig(args.out, dpi=120)
    if args.tensorboard:
        logger = RunLogger(args.tensorboard)
        logger.image("alignment/comparison", figure_to_rgb(figure), 0)
        logger.close()
    print(args.out)
    return 0


def default_sentence(translator: Translator) -> str:
    data = translator.config.data
    # The built-in probes only: a file named in a checkpoint (logging.probe_file) is not read.
    probes = probes_for(data.src_lang, data.tgt_lang)
    if not probes:
        raise SystemExit("no built-in probe for this language pair: pass --sentence")
    return probes[0].source


if __name__ == "__main__":
    sys.exit(main())
