"""One lab experiment: what it claims, how it runs, and what it finds.

An experiment is a function `run(context) -> Finding` with a name, a title and the claim
it tests, written in the project's own words. `LabContext` tells it where to write, where
trained models are kept between calls, how big to be (`quick`) and which seed, device and
threads to use; the `Finding` says what it measured: two or three sentences, a small table,
its figures and the numbers the tests and the pages quote. A finding that contradicts the
claim says so (`agrees=False`): the lab reports what it measured, it is never tuned until
it agrees.

Each experiment also has its page in Chinese (`ChineseText`, the `CHINESE` of the module of
its name in `seq2seq.lab.chinese`, which the catalogue attaches as `Experiment.zh`): the
same title, claim and size in Chinese, and a summary written from what its finding recorded
(`Finding.values` and `table`), so the Chinese page states what was measured, as the
English one does, and both are rewritten from the same record (`seq2seq-lab --pages`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class LabContext:
    """What an experiment is given."""

    out_dir: Path  # this experiment's own folder: its figures go here
    runs_dir: Path  # trained models, kept between calls and shared between experiments
    data_root: Path  # `data.root` of every training run (raw and prepared corpora)
    quick: bool = False  # the seconds-sized version (the tests), else the default size
    seed: int = 1234
    device: str = "cpu"
    threads: int = 0  # torch threads; 0 = torch's default
    # A smoke test of the default size's code paths: every lab training run stops after
    # this many updates (None: the experiment's own budget). Figures made so mean nothing.
    max_steps: int | None = None
    # The models `seq2seq.lab.training.trained` gave this experiment: (label, reused, minutes
    # of training), reused when an earlier call had trained it (not timed in this run).
    models: list[tuple[str, bool, float]] = field(default_factory=list, compare=False)

    def figure(self, stem: str) -> Path:
        """The path of the PNG figure `stem` in this experiment's folder (folder made)."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        return self.out_dir / f"{stem}.png"

    def seeds(self, count: int) -> list[int]:
        """`count` training seeds from this context's seed on (1234, 1235, ...)."""
        return [self.seed + offset for offset in range(count)]


@dataclass
class Finding:
    """What an experiment found."""

    summary: str  # two or three sentences, printed and put on the page
    table: list[dict[str, Any]]  # the small table: one dict per row, the same keys in each
    figures: list[Path]  # PNG files it wrote (in `LabContext.out_dir`)
    values: dict[str, Any] = field(default_factory=dict)  # numbers the tests and pages quote
    agrees: bool | None = None  # does the measurement support the claim (None: undecided)


@dataclass(frozen=True)
class ChineseText:
    """An experiment's page in Chinese: its fixed texts, and `summary(finding, quick)`,
    the finding in Chinese from what it recorded (`values`, `table`, `agrees`; and whether
    the run was `--quick`), as the English summary states it."""

    title: str
    claim: str
    default_size: str
    summary: Callable[[Finding, bool], str]


@dataclass(frozen=True)
class Experiment:
    """A registered experiment (`EXPERIMENT` of a module of `seq2seq.lab`)."""

    name: str  # `seq2seq-lab NAME`
    order: int  # its place in the lab's list and on the index page
    title: str
    claim: str  # the claim under test, in the project's own words (a short paragraph)
    run: Callable[[LabContext], Finding]
    # What the default size costs and measures, in one sentence for the page.
    default_size: str = ""
    zh: ChineseText | None = None  # the Chinese page: `seq2seq.lab.catalogue` attaches it
