"""One sentence's alignment in several finished runs, each titled by what sets it apart.

Used by `scripts/compare_alignments.py` (any run folders) and `seq2seq-compare` (one
image per sweep, `sweep_image`). Checkpoints load through `Translator.load`, which validates their
config before anything is built; a refused checkpoint raises CheckpointError.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import NamedTuple

from matplotlib.figure import Figure

from seq2seq.checkpoint import CheckpointError
from seq2seq.search.translator import Translator
from seq2seq.study.reading import (
    BEST_CHECKPOINT,
    find_checkpoints,
    one_per_configuration,
    run_titles,
    runs_below,
)
from seq2seq.visualise.heatmap import AlignmentPanel, draw_comparison
from seq2seq.visualise.side_by_side import default_sentence, model_panels

log = logging.getLogger(__name__)


class Panels(NamedTuple):
    """One sentence's panels: the translation attention of each run that has it, and the
    alignment layer of each run that has one (`alignment=layer`), both in the runs' order."""

    sentence: str
    attention: list[AlignmentPanel]
    layer: list[AlignmentPanel]

    def figure(self, mode: str, seeds: str = "") -> Figure:
        """The attention panels in a row, the layer panels in the row below; ValueError
        when there is none."""
        if not self.attention and not self.layer:
            raise ValueError("none of the runs has attention weights to compare")
        what = "last layer, mean of heads"
        if self.layer:
            what += "; below: the alignment layer, mean of its heads"
        per_row = len(self.attention) if self.layer and self.attention else None
        title = f"{self.sentence}  ({mode}; {what}{seeds})"
        return draw_comparison(self.attention + self.layer, title, per_row)


def collect_panels(
    checkpoints: list[Path], device: str, sentence: str | None, reference: str | None
) -> Panels:
    """The sentence (by default the first built-in probe of the first run's language pair),
    one attention panel per run that has attention weights and one layer panel per run that
    has an alignment layer, in the order of `checkpoints`."""
    translators = [Translator.load(path, device) for path in checkpoints]
    sentence = sentence or default_sentence(translators[0])
    if sentence is None:
        raise ValueError("no built-in probe for this language pair: give a sentence")
    runs = [path.parent.parent for path in checkpoints]
    titles = run_titles(runs, [translator.run_config for translator in translators])
    found = Panels(sentence, [], [])
    for run, translator, title in zip(runs, translators, titles, strict=True):
        attention, layer = model_panels(translator, sentence, reference, title)
        if attention is None:
            log.warning("%s: no attention weights (attention=none), left out", run)
        else:
            found.attention.append(attention)
        if layer is not None:
            found.layer.append(layer)
    return found


def sweep_image(sweep_dir: Path, out: Path, device: str) -> Path | None:
    """The first probe's greedy alignment, one panel per configuration of the sweep (its
    first seed's best checkpoint) and, below, one per configuration with an alignment layer,
    saved at `out`; None, with a warning, when the sweep has no checkpoint or no run with
    attention weights."""
    try:
        runs = one_per_configuration(runs_below(sweep_dir, BEST_CHECKPOINT))
        if not runs:
            raise FileNotFoundError(f"no {BEST_CHECKPOINT} below {sweep_dir}")
        panels = collect_panels([run / BEST_CHECKPOINT for run in runs], device, None, None)
        figure = panels.figure("greedy", "; first seed")
    except (FileNotFoundError, CheckpointError, ValueError) as error:
        log.warning("%s: no alignment image (%s)", sweep_dir, error)
        return None
    figure.savefig(out, dpi=120)
    return out


def runs_figure(
    folders: list[Path],
    device: str = "cpu",
    sentence: str | None = None,
    reference: str | None = None,
    all_seeds: bool = False,
) -> Figure:
    """One panel per run folder with `checkpoints/best.pt` at or below `folders` (one per
    configuration, its lowest seed, unless `all_seeds`): the sentence translated greedily,
    or teacher-forced on `reference` so that every panel has the same rows; below them one
    panel per run with an alignment layer, the layer over the same rows. Raises
    FileNotFoundError without checkpoints, CheckpointError for a refused one, ValueError
    when no run has attention weights."""
    checkpoints = find_checkpoints(folders)
    if not all_seeds:
        runs = one_per_configuration([checkpoint.parent.parent for checkpoint in checkpoints])
        checkpoints = [run / BEST_CHECKPOINT for run in runs]
    panels = collect_panels(checkpoints, device, sentence, reference)
    return panels.figure("teacher-forced" if reference else "greedy")
