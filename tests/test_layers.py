"""The package's import layers (the import-linter contract in pyproject.toml) hold, and a
wrong-way import breaks them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(
    not LINT_IMPORTS.exists(), reason="import-linter is not installed (pip install -e '.[dev]')"
)


def lint_imports(package_parent: Path) -> subprocess.CompletedProcess:
    """`lint-imports` with the project's contract, on the package found in `package_parent`."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(REPO_ROOT / "pyproject.toml")],
        cwd=package_parent,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(package_parent)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def copy_of_the_package(folder: Path) -> Path:
    """The package's Python files below `folder/seq2seq` (and the configs package), and the
    workshop's below `folder/tools`."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO_ROOT / "seq2seq", folder / "seq2seq", ignore=ignore)
    shutil.copytree(REPO_ROOT / "tools", folder / "tools", ignore=ignore)
    shutil.copytree(REPO_ROOT / "configs", folder / "seq2seq" / "configs", ignore=ignore)
    return folder


def test_the_package_keeps_its_layers(tmp_path):
    checked = lint_imports(copy_of_the_package(tmp_path))
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-2000:]
    assert "1 kept, 0 broken" in checked.stdout


@pytest.mark.parametrize(
    ("module", "wrong_import"),
    [
        ("seq2seq/data/corpus.py", "import seq2seq.models.model"),  # data knows no models
        ("seq2seq/search/translator.py", "import seq2seq.training.trainer"),  # serving needs no training
        ("seq2seq/checkpoint.py", "from seq2seq.runs import folder"),  # upwards
        ("seq2seq/training/trainer.py", "import seq2seq.study.reading"),  # core imports an annex
        ("seq2seq/align/head_choice.py", "import seq2seq.export.parts"),  # core imports an annex
        ("seq2seq/lab/page.py", "import tools.bench.speed"),  # an annex imports the workshop
        ("seq2seq/runs/assemble.py", "import tools.site.reference"),  # the core imports it
        ("seq2seq/serve/app.py", "import seq2seq.lab.page"),  # one annex beside another
    ],
)
def test_a_wrong_way_import_breaks_the_contract(tmp_path, module, wrong_import):
    package = copy_of_the_package(tmp_path)
    path = package / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{wrong_import}\n", encoding="utf-8")
    checked = lint_imports(package)
    assert checked.returncode != 0
    assert "BROKEN" in checked.stdout or "broken" in checked.stdout, checked.stdout[-2000:]
