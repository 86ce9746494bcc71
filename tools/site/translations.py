"""Which pages of the site are translated, and a menu in another language that says so.

A page `guides/data.md` is translated into Chinese when `guides/data.zh.md` lies beside it
(mkdocs-static-i18n's suffix structure); the Chinese site shows the English page where
there is none. So that a reader knows before clicking, the MkDocs hook
(`tools/site/mkdocs_hooks.py`) gives every menu entry of such a page a mark after its
title in that language's menu (`UNTRANSLATED_MARK`: 数据（英文）), decided from the files at
each build, never from a list kept by hand. The same for a section whose own page (its
`index.md`) is untranslated.

The lab's pages are generated (`seq2seq-lab`) in both languages, each titled by its
experiment (`Experiment.title`, and `Experiment.zh.title` for `NAME.zh.md`), so the Chinese
menu takes their Chinese titles from the pages as it does for any translated page.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mkdocs.utils import get_markdown_title

UNTRANSLATED_MARK = {"zh": "（英文）"}
def english_page(src_uri: str, locale: str) -> str:
    """The English page of `src_uri`: `guides/data.zh.md` → `guides/data.md`."""
    suffix = f".{locale}.md"
    return src_uri[: -len(suffix)] + ".md" if src_uri.endswith(suffix) else src_uri


def is_translated(src_uri: str, locale: str, docs_dir: Path) -> bool:
    """Whether the page `src_uri` (below `docs_dir`) has its `locale` twin."""
    english = english_page(src_uri, locale)
    return (docs_dir / f"{english[: -len('.md')]}.{locale}.md").is_file()


def page_title(page: Any) -> str:
    """A menu page's title: the one the menu gives, else its page's first heading (what
    MkDocs shows once it has read the page), else its file name."""
    if page.title:
        return page.title
    source = Path(page.file.abs_src_path).read_text(encoding="utf-8")
    return get_markdown_title(source) or Path(page.file.src_uri).stem


def localise_page(page: Any, locale: str, docs_dir: Path) -> bool:
    """Give a menu page the mark in `locale`'s menu when the page is not translated.
    Returns whether it is untranslated."""
    title, src_uri = page_title(page), page.file.src_uri
    untranslated = not is_translated(src_uri, locale, docs_dir)
    page.title = title + UNTRANSLATED_MARK[locale] if untranslated else title
    return untranslated


def localise_menu(items: Iterable[Any], locale: str, docs_dir: Path) -> None:
    """Walk a MkDocs navigation (pages, sections, links) and localise each page's title;
    a section whose own index page is untranslated is marked too."""
    for item in items:
        if item.is_page:
            localise_page(item, locale, docs_dir)
        elif item.is_section:
            localise_menu(item.children, locale, docs_dir)
            index = next((c for c in item.children if c.is_page and c.is_index), None)
            mark = UNTRANSLATED_MARK[locale]
            if index is not None and index.title.endswith(mark) and not item.title.endswith(mark):
                item.title += mark
