"""The comparison's column of both directions: each run of a sweep aligned together with
the run of the other direction that has the same settings and seed.

A sweep `<name>` and a sweep `<name>_reverse` (`REVERSE_SUFFIX`; the comparison's `layer`
and `layer_reverse`, `reverse_data=tatoeba_en_zh`) hold the same configurations trained on
data presets of opposite directions. A run and its reverse are the two runs whose
command-line overrides are the same once their data settings are left out (`data=` and
`data.*`: the preset and the vocabulary sizes of each side; the seed is kept). Their test AER is that of

    seq2seq-align FORWARD/checkpoints/best.pt --reverse REVERSE/checkpoints/best.pt \\
        --symmetrise harmonic --extract threshold --threshold 0.3 \\
        --src seq2seq/align/gold/tatoeba_zh_en/test.zh --tgt ...test.en --gold ...test.align

on the hand-aligned gold test pairs: each model read as it aligns by default (its alignment
layer, else its guided or chosen head, else its last layer's head mean:
`seq2seq.align.defaults`), the two word matrices combined by their harmonic mean and every
link of weight 0.3 or more kept (`seq2seq.align.symmetric`). Harmonic with threshold 0.3 is
the reading chosen on the valid gold pairs for the two directions' alignment layers in the
alignment guide (docs/guides/alignments.md, "Both directions' guided layers, symmetrised").
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from seq2seq.align.defaults import default_settings
from seq2seq.align.extract import AlignmentError
from seq2seq.align.symmetric import symmetric_gold_counts
from seq2seq.checkpoint import CheckpointError
from seq2seq.metrics.aer import AlignmentCounts
from seq2seq.search.translator import Translator
from seq2seq.study.reading import BEST_CHECKPOINT, read_overrides
from seq2seq.study.sweep import Configuration, warn

REVERSE_SUFFIX = "_reverse"  # sweep <name>_reverse: the runs of <name>, the other way round
BOTH_METHOD, BOTH_THRESHOLD = "harmonic", 0.3  # chosen on the valid gold (module docstring)


def pairing_key(run: Path) -> frozenset[str]:
    """A run's overrides without its data settings (`data=` and `data.*`): a run's and its
    reverse's are equal."""
    return frozenset(
        item for item in read_overrides(run)
        if item.lstrip("+~").partition("=")[0].partition(".")[0] != "data"
    )  # fmt: skip


def fill_both(forward: list[Configuration], reverse: list[Configuration], device: str) -> None:
    """`test_aer_both` of every run of `forward` whose reverse (module docstring) is in
    `reverse`, both with a best checkpoint; a run whose key two runs of a sweep share (runs
    that differ only in their data settings) is named on stderr and left out, as is a pair
    that cannot be aligned: their cells stay empty."""
    ahead = unique_keys([run for configuration in forward for run in configuration.runs])
    key_of = {run: key for key, run in ahead.items()}
    partners = unique_keys([run for configuration in reverse for run in configuration.runs])
    for configuration in forward:
        for run, row in zip(configuration.runs, configuration.rows, strict=True):
            key = key_of.get(run)
            if key is None or key not in partners:
                continue
            checkpoints = (run / BEST_CHECKPOINT, partners[key] / BEST_CHECKPOINT)
            if all(path.is_file() for path in checkpoints):
                counts = both_or_none(*checkpoints, device)
                row["test_aer_both"] = None if counts is None else counts.aer


def unique_keys(runs: list[Path]) -> dict[frozenset[str], Path]:
    """{pairing key: run} of the runs whose key no other run has; the others named on stderr."""
    found: dict[frozenset[str], list[Path]] = {}
    for run in runs:
        found.setdefault(pairing_key(run), []).append(run)
    for shared in (runs for runs in found.values() if len(runs) > 1):
        warn(f"{', '.join(map(str, shared))}: differ only in their data settings; no test "
             "AER of both directions")  # fmt: skip
    return {key: runs[0] for key, runs in found.items() if len(runs) == 1}


def both_counts(
    forward_checkpoint: Path, reverse_checkpoint: Path, device: str
) -> AlignmentCounts | None:
    """The gold test pairs' counts of the two checkpoints' symmetrised links (module
    docstring); None when the language pair has no gold set. AlignmentError for a reverse
    model of the wrong direction, CheckpointError for one that cannot load."""
    models = [Translator.load(path, device) for path in (forward_checkpoint, reverse_checkpoint)]
    settings = [
        replace(default_settings(model).settings, extract="threshold", threshold=BOTH_THRESHOLD)
        for model in models
    ]
    return symmetric_gold_counts(*models, BOTH_METHOD, *settings)


def both_or_none(
    forward_checkpoint: Path, reverse_checkpoint: Path, device: str
) -> AlignmentCounts | None:
    """`both_counts`, or None after one line on stderr naming the two runs."""
    try:
        return both_counts(forward_checkpoint, reverse_checkpoint, device)
    except (CheckpointError, AlignmentError, ValueError) as error:
        runs = f"{forward_checkpoint.parent.parent} with {reverse_checkpoint.parent.parent}"
        warn(f"{runs}: no test AER of both directions ({error})")
        return None
