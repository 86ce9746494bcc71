"""Shared test fixtures."""

from __future__ import annotations

import logging
import os
import zipfile
from pathlib import Path

import pytest
from helpers import toy_corpus_lines

import seq2seq.built_ins  # noqa: F401  (the built-in components, as every entry point loads them)

REPO_ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config):
    """Under pytest-xdist (`make test` runs one worker per core), each worker and the
    processes it starts use one torch thread: two threads per worker on two cores would
    make their matrix products wait on each other."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        os.environ["OMP_NUM_THREADS"] = "1"
        torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def root_logging_restored():
    """A command's `main()` configures the root logger once per process (`logging.basicConfig`
    adds a handler on the stream that is stderr at that moment: in a test, the capture's,
    closed when the test ends). Handlers a test added that way are removed after it, so a
    later test in the same process (an xdist worker runs many files) never writes to a
    closed stream. pytest's own handlers are subclasses and are left alone."""
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if type(handler) is logging.StreamHandler and handler not in before:
            root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture(scope="session")
def corpus_mirror() -> Path:
    """The offline corpus mirror (`SEQ2SEQ_DATA_MIRROR`), or skip when there is none."""
    env = os.environ.get("SEQ2SEQ_DATA_MIRROR")
    candidates = [Path(env)] if env else []
    candidates.append(REPO_ROOT.parent / "shared" / "corpora")
    for folder in candidates:
        if (folder / "cmn-eng.zip").is_file():
            return folder
    pytest.skip("no corpus mirror: set SEQ2SEQ_DATA_MIRROR to a folder holding cmn-eng.zip")


@pytest.fixture
def mirror(tmp_path) -> Path:
    """A mirror folder holding `toy-eng.zip`, whose `toy.txt` has 400 toy pairs."""
    folder = tmp_path / "mirror"
    folder.mkdir()
    with zipfile.ZipFile(folder / "toy-eng.zip", "w") as archive:
        archive.writestr("toy.txt", "\n".join(toy_corpus_lines(400, seed=0)) + "\n")
    return folder


@pytest.fixture(scope="session")
def lab_quick(tmp_path_factory):
    """`lab_quick(EXPERIMENT)`: the experiment's quick finding, run once per session. Every
    experiment gets its own figure folder and shares one runs folder, so a quick model two
    experiments train with the same overrides is trained once (as `make lab` does)."""
    from seq2seq.lab.experiment import LabContext

    root = tmp_path_factory.mktemp("lab")
    found = {}

    def finding(experiment):
        if experiment.name not in found:
            context = LabContext(root / "out" / experiment.name, root / "runs", root / "data",
                                 quick=True, threads=1)  # fmt: skip
            found[experiment.name] = experiment.run(context)
        return found[experiment.name]

    return finding
