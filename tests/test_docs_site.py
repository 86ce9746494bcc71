"""The documentation site builds with `mkdocs build --strict` (a broken link, a missing page
or anchor fails it), in English and in Chinese, and the Chinese menu marks exactly the pages
that have no Chinese version."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from seq2seq.lab.catalogue import experiments

REPO_ROOT = Path(__file__).resolve().parent.parent
NAV_LINK = re.compile(
    r'<a href="(?P<href>[^"]*)" class="md-nav__link[^"]*">\s*(?:<[^>]*>\s*)*?'
    r'<span class="md-ellipsis">\s*(?P<title>.*?)\s*</span>',
    re.S,
)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="mkdocs is not installed: pip install -e '.[docs]'")
    pytest.importorskip("mkdocs_static_i18n", reason="mkdocs-static-i18n is not installed")
    site = tmp_path_factory.mktemp("docs") / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "NO_COLOR": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-6000:]
    return site


def test_the_site_builds_strictly(site):
    assert (site / "index.html").is_file()
    assert (site / "zh" / "tutorial" / "first-alignment" / "index.html").is_file()
    assert (site / "reference" / "components" / "index.html").is_file()


def nav_pages(entries: list) -> list[str]:
    """The pages of mkdocs.yml's nav, in order."""
    pages = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def page_url(page: str) -> str:
    """`guides/data.md` → `guides/data/`, `lab/index.md` → `lab/`, `index.md` → ``."""
    stem = page.removesuffix(".md").removesuffix("index").rstrip("/")
    return f"{stem}/" if stem else ""


def test_the_chinese_menu_marks_exactly_the_pages_without_a_chinese_version(site):
    config = yaml.load(
        (REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader
    )
    menu = {}
    for link in NAV_LINK.finditer((site / "zh" / "index.html").read_text(encoding="utf-8")):
        menu.setdefault(link["href"].removeprefix("./"), link["title"])
    english_only = []
    for page in nav_pages(config["nav"]):
        twin = REPO_ROOT / "docs" / page.replace(".md", ".zh.md")
        title = menu[page_url(page)]
        assert title.endswith("（英文）") != twin.is_file(), (page, title)
        english_only += [] if twin.is_file() else [page]
    assert "guides/serving.md" in english_only and "tutorial/first-alignment.md" not in english_only
    assert menu["lab/mechanisms/"] == experiments()["mechanisms"].zh.title  # its own page's
