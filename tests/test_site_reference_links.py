"""A docs page that a component's summary names (`docs/lab/hard_attention.md`) becomes a
link in the generated tables, from the site's reference page and from the README
(`tools.site.reference.linked_doc_pages`)."""

from __future__ import annotations

from pathlib import Path

from tools.site.reference import linked_doc_pages


def make_docs(root: Path) -> Path:
    for page in ("docs/lab/hard_attention.md", "docs/index.md", "docs/index.zh.md"):
        (root / page).parent.mkdir(parents=True, exist_ok=True)
        (root / page).write_text("# a page\n", encoding="utf-8")
    return root


def test_a_named_page_is_linked_from_the_reference_page_and_from_the_readme(tmp_path):
    repo = make_docs(tmp_path)
    text = "Exactly one key (hard attention, docs/lab/hard_attention.md)."
    assert linked_doc_pages(text, "docs/reference", repo) == (
        "Exactly one key (hard attention, [docs/lab/hard_attention.md](../lab/hard_attention.md))."
    )
    assert linked_doc_pages(text, "", repo) == (
        "Exactly one key (hard attention, [docs/lab/hard_attention.md](docs/lab/hard_attention.md))."
    )


def test_a_page_named_right_after_a_parenthesis_is_linked(tmp_path):
    repo = make_docs(tmp_path)
    assert linked_doc_pages("(docs/lab/hard_attention.md)", "docs/reference", repo) == (
        "([docs/lab/hard_attention.md](../lab/hard_attention.md))"
    )


def test_a_translation_is_linked_as_its_page_inside_the_site_and_as_its_file_outside(tmp_path):
    repo = make_docs(tmp_path)
    text = "qᵀ k (点积, docs/index.zh.md; Luong et al. 2015)"
    assert "[docs/index.zh.md](../index.md)" in linked_doc_pages(text, "docs/reference", repo)
    assert "[docs/index.zh.md](docs/index.zh.md)" in linked_doc_pages(text, "", repo)


def test_a_missing_page_a_code_span_and_a_link_stay_as_they_are(tmp_path):
    repo = make_docs(tmp_path)
    for text in (
        "see docs/no_such_page.md",
        "run `python docs/lab/hard_attention.md`",
        "[the lab](docs/lab/hard_attention.md)",
    ):
        assert linked_doc_pages(text, "docs/reference", repo) == text
