"""MkDocs hooks of the site (mkdocs.yml `hooks:`): the results pages include the top-level
result files (`tools.site.includes`) before MkDocs reads their markdown, and a menu in
another language than English marks the pages shown in English (`tools.site.translations`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

from tools.site.includes import include_files
from tools.site.translations import UNTRANSLATED_MARK, localise_menu


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """Replace each `<!-- include: FILE -->` line of the page by FILE, relinked."""
    return include_files(markdown, page.file.src_uri)


def building_locale(config: Any) -> str | None:
    """The language mkdocs-static-i18n builds now (it builds each in turn), None without it."""
    plugin = config.plugins.get("i18n")
    return getattr(plugin, "current_language", None)


@event_priority(-200)  # after mkdocs-static-i18n (-100) has applied its nav_translations
def on_nav(nav: Any, config: Any, **_: Any) -> Any:
    """In a translated build, give the menu's pages their titles there and mark those
    without a translation."""
    locale = building_locale(config)
    if locale in UNTRANSLATED_MARK:
        localise_menu(nav.items, locale, Path(config.docs_dir))
    return nav
