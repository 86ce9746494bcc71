"""The test-AER columns of a comparison, and the rows of word aligners that are not models.

Every run with a best checkpoint and attention weights gets its test AER on the hand-aligned
gold pairs (`seq2seq.align.model_aer.checkpoint_aer`: the last layer's head mean, the head
chosen on the valid pairs, a guided model's guided head, and the heads' mean of a model's
alignment layer, `alignment=layer`). A word aligner such as eflomal is
added from a JSON file, in one of two forms:

    {"name": "eflomal", "test_aer": 0.31, "precision": 0.72, "recall": 0.65}

(precision and recall may be null), or what `seq2seq-align-baseline --part test --json FILE`
writes (one row per symmetrisation, named `eflomal <method>`). Each becomes a row of sweep
`aligners`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seq2seq.align.extract import AlignmentError
from seq2seq.align.model_aer import checkpoint_aer
from seq2seq.bounded_files import StructuredFileError, read_json
from seq2seq.checkpoint import CheckpointError
from seq2seq.study.reading import BEST_CHECKPOINT
from seq2seq.study.sweep import Configuration, empty_row, warn

ALIGNER_SWEEP = "aligners"


class AlignerFileError(ValueError):
    """A word aligner's JSON file that cannot be read; the message names the file."""


def fill_aer(
    configurations: list[Configuration], device: str, cache: dict[Path, Any] | None = None
) -> None:
    """The test AER columns of every run with a best checkpoint and attention weights;
    `cache` (by the checkpoint's real path) scores a run linked into two sweeps once."""
    cache = {} if cache is None else cache
    for configuration in configurations:
        for run, row in zip(configuration.runs, configuration.rows, strict=True):
            checkpoint = run / BEST_CHECKPOINT
            if not checkpoint.is_file():
                continue
            key = checkpoint.resolve()
            if key not in cache:
                cache[key] = scored_or_none(checkpoint, device)
            found = cache[key]
            if found is None:
                continue
            row.update(
                test_aer=found.head_mean.aer,
                test_aer_precision=found.head_mean.precision,
                test_aer_recall=found.head_mean.recall,
                test_aer_best=found.best.aer,
                test_aer_best_head=found.best_name,
                test_aer_guided=None if found.guided is None else found.guided.aer,
                test_aer_layer=None if found.layer_counts is None else found.layer_counts.aer,
            )


def scored_or_none(checkpoint: Path, device: str) -> Any:
    """`checkpoint_aer`, or None after one line on stderr (no attention, a bad checkpoint)."""
    try:
        return checkpoint_aer(checkpoint, device)
    except (CheckpointError, AlignmentError, ValueError) as error:
        warn(f"{checkpoint.parent.parent}: no test AER ({error})")
        return None


def read_aligners(path: Path) -> list[dict[str, Any]]:
    """A word aligner's file (module docstring) as rows of sweep `aligners`: one row for
    the short form, one per symmetrisation for `seq2seq-align-baseline --json`."""
    try:
        found = read_json(path)
    except StructuredFileError as error:
        raise AlignerFileError(f"aligner file {error}") from None
    if isinstance(found, dict) and isinstance(found.get("scores"), dict):
        test = found["scores"].get("test")
        if not isinstance(test, dict) or not test:
            raise AlignerFileError(f"aligner file {path}: no scores of the test part")
        name = str(found.get("aligner", path.stem))
        return [
            aligner_row(path, {"name": f"{name} {method}", "test_aer": scores.get("aer"),
                               **scores} if isinstance(scores, dict) else {})
            for method, scores in test.items()
        ]  # fmt: skip
    return [aligner_row(path, found)]


def aligner_row(path: Path, found: Any) -> dict[str, Any]:
    """One aligner's row from {"name", "test_aer", "precision", "recall"}."""
    if not isinstance(found, dict) or not isinstance(found.get("name"), str):
        raise AlignerFileError(f"aligner file {path}: expected an object with a name and test_aer")
    numbers = {}
    for key in ("test_aer", "precision", "recall"):
        value = found.get(key)
        if (value is None and key != "test_aer") or isinstance(value, (int, float)):
            numbers[key] = value
        else:
            raise AlignerFileError(f"aligner file {path}: {key} must be a number, got {value!r}")
    return empty_row(
        sweep=ALIGNER_SWEEP,
        model=found["name"],
        test_aer=numbers["test_aer"],
        test_aer_precision=numbers["precision"],
        test_aer_recall=numbers["recall"],
        run_dir=str(path),
    )
