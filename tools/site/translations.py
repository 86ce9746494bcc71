"""Which pages of the site are translated, and a menu in another language that says so.

A page `guides/data.md` is translated into Chinese when `guides/data.zh.md` lies beside it
(mkdocs-static-i18n's suffix structure); the Chinese site shows the English page where
there is none. So that a reader knows before clicking, the MkDocs hook
(`tools/site/mkdocs_hooks.py`) gives every menu entry of such a page a mark after its
title in that language's menu (`UNTRANSLATED_MARK`: 数据（英文）), decided from the files at
each build, never from a list kept by hand. The same for a section whose own page (its
`index.md`) is untranslated.

The lab's pages are generated (`seq2seq-lab`) and titled by their experiment
(`seq2seq.lab`'s `Experiment.title`), so mkdocs.yml's `nav_translations` cannot name them:
`LAB_TITLES` gives each its Chinese menu title beside the English title it translates. A
title that no longer matches (an experiment renamed) stays English in the menu, and
tests/test_site_translations.py fails until its translation is updated.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mkdocs.utils import get_markdown_title

UNTRANSLATED_MARK = {"zh": "（英文）"}
LAB_FOLDER = "lab"
# {locale: {experiment name: (its English title, the menu title in that language)}}
LAB_TITLES = {
    "zh": {
        "hierarchical": (
            "Hierarchical attention on documents: words, then sentences",
            "文档上的层次注意力：先词，后句",
        ),
        "pooling": (
            "N vs 1: last state, mean or attention pooling",
            "N vs 1：最后状态、平均还是注意力池化",
        ),
        "rnn_forms": (
            "The four forms of an RNN: N vs N, N vs 1, 1 vs N, N vs M",
            "RNN 的四种形式：N vs N、N vs 1、1 vs N、N vs M",
        ),
        "vanishing_gradients": (
            "Vanishing gradients: RNN, GRU and LSTM",
            "梯度消失：RNN、GRU 与 LSTM",
        ),
        "context_vector": (
            "One context vector against one per step",
            "一个上下文向量，还是每步一个",
        ),
        "parallelism": (
            "Parallelism: RNN, CNN and Transformer against sentence length",
            "并行：RNN、CNN 与 Transformer 随句长的变化",
        ),
        "scaling": ("Why divide by √d_k", "为什么要除以 √d_k"),
        "hard_attention": ("Hard attention by reinforcement learning", "用强化学习训练硬注意力"),
        "heads": ("What the heads do", "各个头在做什么"),
        "masks": ("Masks: the future and the padding", "掩码：未来位置与填充"),
        "mechanisms": ("我爱中国 across mechanisms", "各种注意力机制下的「我爱中国」"),
    },
}


def english_page(src_uri: str, locale: str) -> str:
    """The English page of `src_uri`: `guides/data.zh.md` → `guides/data.md`."""
    suffix = f".{locale}.md"
    return src_uri[: -len(suffix)] + ".md" if src_uri.endswith(suffix) else src_uri


def is_translated(src_uri: str, locale: str, docs_dir: Path) -> bool:
    """Whether the page `src_uri` (below `docs_dir`) has its `locale` twin."""
    english = english_page(src_uri, locale)
    return (docs_dir / f"{english[: -len('.md')]}.{locale}.md").is_file()


def lab_title(src_uri: str, english_title: str, locale: str) -> str | None:
    """The menu title in `locale` of a lab page whose English title is `english_title`,
    or None (no translation, or one of an older title)."""
    folder, _, name = english_page(src_uri, locale).rpartition("/")
    known = LAB_TITLES.get(locale, {}).get(name.removesuffix(".md"))
    if folder != LAB_FOLDER or known is None or known[0] != english_title:
        return None
    return known[1]


def page_title(page: Any) -> str:
    """A menu page's title: the one the menu gives, else its page's first heading (what
    MkDocs shows once it has read the page), else its file name."""
    if page.title:
        return page.title
    source = Path(page.file.abs_src_path).read_text(encoding="utf-8")
    return get_markdown_title(source) or Path(page.file.src_uri).stem


def localise_page(page: Any, locale: str, docs_dir: Path) -> bool:
    """Give a menu page its title in `locale`'s menu: a lab page's translated title, and the
    mark when the page is not translated. Returns whether it is untranslated."""
    title, src_uri = page_title(page), page.file.src_uri
    title = lab_title(src_uri, title, locale) or title
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
