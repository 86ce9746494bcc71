"""One sentence's alignment in several finished runs, each titled by what sets it apart.

Used by `scripts/compare_alignments.py` (any run folders) and `scripts/compare.py` (one
image per sweep). Checkpoints load through `Translator.load`, which validates their
config before anything is built; a refused checkpoint raises CheckpointError.
"""

from __future__ import annotations

import logging
from pathlib import Path

from seq2seq.inference import Translator
from seq2seq.runs.reading import run_titles
from seq2seq.visualise.comparison import alignment_panel, default_sentence
from seq2seq.visualise.heatmap import AlignmentPanel

log = logging.getLogger(__name__)


def collect_panels(
    checkpoints: list[Path], device: str, sentence: str | None, reference: str | None
) -> tuple[str, list[AlignmentPanel]]:
    """The sentence (by default the first built-in probe of the first run's language pair)
    and one panel per run that has attention weights, in the order of `checkpoints`."""
    translators = [Translator.load(path, device) for path in checkpoints]
    sentence = sentence or default_sentence(translators[0])
    if sentence is None:
        raise ValueError("no built-in probe for this language pair: give a sentence")
    runs = [path.parent.parent for path in checkpoints]
    titles = run_titles(runs, [translator.config for translator in translators])
    panels = []
    for run, translator, title in zip(runs, translators, titles, strict=True):
        panel = alignment_panel(translator, sentence, reference, title)
        if panel is None:
            log.warning("%s: no attention weights (attention=none), left out", run)
            continue
        panels.append(panel)
    return sentence, panels
