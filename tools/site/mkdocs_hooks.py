"""MkDocs hooks of the site (mkdocs.yml `hooks:`): the results pages include the top-level
result files (`tools.site.includes`) before MkDocs reads their markdown."""

from __future__ import annotations

from typing import Any

from tools.site.includes import include_files


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """Replace each `<!-- include: FILE -->` line of the page by FILE, relinked."""
    return include_files(markdown, page.file.src_uri)
