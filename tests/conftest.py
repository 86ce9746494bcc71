"""Shared test fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


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
