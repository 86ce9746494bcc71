"""A run whose checkpoint stores a chosen head, and the training log line that names it, for
the tests that check that every place a person reads names the same layer and head.

The model is a tiny zh→en Transformer (2 layers, 2 heads) trained for seconds on the toy
lexicon corpus (`helpers.toy_corpus_lines`), the recipe of `tests/lexicon_model.py`.
Its data source is Tatoeba's, so the AER hook runs on the zh-en gold pairs at its one
validation, logs `lowest valid AER … at layer L, head H` and stores that choice in
`best.pt`. The log records are caught from the hook's logger while the run trains.
"""

from __future__ import annotations

import logging
import re
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import compose_config, toy_corpus_lines
from lexicon_model import LEXICON_TRANSFORMER

from seq2seq.data.fetch import MIRROR_ENV
from seq2seq.runs.assemble import train_and_test

AER_LOGGER = "seq2seq.align.aer_hook"
# The AER hook's line: `step 30: lowest valid AER 0.9000 at layer 1, head mean (valid/aer …)`.
CHOSEN_LINE = re.compile(r"step (\d+): lowest valid AER [0-9.]+ at layer (-?\d+), head (mean|\d+) ")


@dataclass(frozen=True)
class LoggedChoice:
    """What the training log says was chosen at one validation: step, layer and head
    (None: the head mean), read from the line's text."""

    step: int
    layer: int
    head: int | None


@dataclass(frozen=True)
class ChosenHeadRun:
    """The best checkpoint and the training log's INFO lines of the AER hook."""

    checkpoint: Path
    log_lines: list[str]

    def logged_choices(self) -> list[LoggedChoice]:
        """Every `lowest valid AER … at layer L, head H` line, parsed."""
        found = [CHOSEN_LINE.search(line) for line in self.log_lines]
        return [
            LoggedChoice(int(m[1]), int(m[2]), None if m[3] == "mean" else int(m[3]))
            for m in found
            if m is not None
        ]


class _Lines(logging.Handler):
    """A logging handler that keeps each record's message."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextmanager
def caught_lines(name: str) -> Iterator[list[str]]:
    """The INFO (and higher) messages of logger `name` within the block; its level and
    handlers are restored after."""
    logger, handler = logging.getLogger(name), _Lines()
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield handler.lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def chosen_head_run(root: Path) -> ChosenHeadRun:
    """Train the lexicon Transformer under `root` (module docstring), catching the AER
    hook's log lines."""
    (root / "mirror").mkdir()
    with zipfile.ZipFile(root / "mirror" / "toy-eng.zip", "w") as archive:
        archive.writestr("toy.txt", "\n".join(toy_corpus_lines(400, seed=0)) + "\n")
    with pytest.MonkeyPatch.context() as patch, caught_lines(AER_LOGGER) as lines:
        patch.setenv(MIRROR_ENV, str(root / "mirror"))
        overrides = LEXICON_TRANSFORMER + [f"data.root={root / 'data'}"]
        train_and_test(compose_config(overrides), root / "run", outputs_root=root)
    return ChosenHeadRun(root / "run" / "checkpoints" / "best.pt", list(lines))
