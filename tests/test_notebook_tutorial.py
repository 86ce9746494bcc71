"""The tutorial notebook (notebooks/tutorial.ipynb and its Chinese twin) runs top to bottom
in a fresh kernel at the small budget, and shows the viewer, the heat map, two mechanisms
side by side, the links and the AER inline; the committed notebooks are the cells of
tools/site/notebooks.py, the same code in both languages."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from seq2seq.data.fetch import MIRROR_ENV
from tools.site import notebooks
from tools.site.includes import REPO_ROOT

CORPUS = "cmn-eng.zip"


def committed(lang: str):
    nbformat = pytest.importorskip("nbformat", reason="the notebook extra is not installed")
    return nbformat.read(notebooks.notebook_path(lang), as_version=4)


def cell_texts(book) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source) for cell in book.cells]


@pytest.mark.parametrize("lang", notebooks.LANGS)
def test_the_committed_notebook_holds_the_generators_cells(lang: str) -> None:
    book = committed(lang)
    assert cell_texts(book) == cell_texts(notebooks.notebook(lang))
    code = [cell for cell in book.cells if cell.cell_type == "code"]
    assert all(cell.execution_count is not None for cell in code)  # run, with its outputs
    assert not [out for cell in code for out in cell.outputs if out.output_type == "error"]


def test_both_languages_share_every_code_cell() -> None:
    pytest.importorskip("nbformat", reason="the notebook extra is not installed")
    code = {
        lang: [source for kind, source in cell_texts(notebooks.notebook(lang)) if kind == "code"]
        for lang in notebooks.LANGS
    }
    assert code["en"] == code["zh"] and len(code["en"]) >= 8
    prose = [source for kind, source in cell_texts(notebooks.notebook("zh")) if kind == "markdown"]
    assert all(any("\u4e00" <= char <= "\u9fff" for char in text) for text in prose)


def corpus_mirror() -> Path | None:
    folder = os.environ.get(MIRROR_ENV)
    return Path(folder) if folder and (Path(folder) / CORPUS).is_file() else None


def outputs_of(cell) -> list[dict]:
    return [output for output in cell.get("outputs", [])]


def text_of(cell) -> str:
    parts = []
    for output in outputs_of(cell):
        if output["output_type"] == "stream":
            parts.append(output["text"])
        elif "data" in output and "text/plain" in output["data"]:
            parts.append(output["data"]["text/plain"])
    return "".join(parts)


def cell_with(book, code: str):
    matches = [cell for cell in book.cells if cell.cell_type == "code" and code in cell.source]
    assert len(matches) == 1, code
    return matches[0]


def test_the_tutorial_runs_top_to_bottom_at_the_small_budget(tmp_path: Path) -> None:
    pytest.importorskip("nbclient", reason="the notebook extra is not installed")
    pytest.importorskip("ipykernel", reason="the notebook extra is not installed")
    if corpus_mirror() is None:
        pytest.skip(f"the Tatoeba corpus is needed without the network: set {MIRROR_ENV}")
    book = notebooks.executed(notebooks.notebook("en"), tmp_path, "small", None)
    errors = [out for cell in book.cells for out in outputs_of(cell) if out["output_type"] == "error"]  # fmt: skip
    assert not errors
    viewer = outputs_of(cell_with(book, 'reverser.translate("a b c d e f g")'))
    assert viewer and viewer[-1]["data"]["text/html"].startswith("<iframe")
    picture = outputs_of(cell_with(book, "reversed_.plot()"))
    assert any("image/png" in output.get("data", {}) for output in picture)
    looks = [line.split() for line in text_of(cell_with(book, "looks most at")).splitlines()]
    assert looks and all(words[1:4] == ["looks", "most", "at"] for words in looks)
    assert {words[-1] for words in looks} <= {*"a b c d e f g".split(), "</s>"}  # source pieces
    love = outputs_of(cell_with(book, 'zh_en.translate("我爱中国。")'))
    assert "我" in love[-1]["data"]["text/html"]
    both = outputs_of(cell_with(book, "seq2seq.compare("))[-1]["data"]["text/html"]
    assert both.count("<iframe") == 2 and "GRU, additive (Bahdanau)" in both
    assert "→" in text_of(cell_with(book, "love.word_links()"))
    assert "test AER" in text_of(cell_with(book, "zh_en.gold_aer()"))
    runs = tmp_path / "outputs" / "notebook"
    assert sorted(path.name for path in runs.iterdir()) == ["gru_additive", "toy_reverse", "zh_en"]


def test_the_rendered_pages_come_from_executed_notebooks() -> None:
    for lang in notebooks.LANGS:
        suffix = "" if lang == "en" else f".{lang}"
        page = (REPO_ROOT / notebooks.PAGES / f"notebook{suffix}.md").read_text(encoding="utf-8")
        assert "<iframe" in page and "../images/notebook/" in page
        for name in page.split("../images/notebook/")[1:]:
            assert (REPO_ROOT / notebooks.IMAGES / name.split(")")[0]).is_file()
