"""The documentation site builds with `mkdocs build --strict` (a broken link, a missing page
or anchor fails it), in English and in Chinese."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_the_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is not installed: pip install -e '.[docs]'")
    pytest.importorskip("mkdocs_static_i18n", reason="mkdocs-static-i18n is not installed")
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "NO_COLOR": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-6000:]
    assert (site / "index.html").is_file()
    assert (site / "zh" / "tutorial" / "first-alignment" / "index.html").is_file()
    assert (site / "reference" / "components" / "index.html").is_file()
