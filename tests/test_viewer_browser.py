"""The attention viewer page in a real browser (headless Chromium through Playwright): no
console errors, hovering shows the weights of the embedded data, the buttons switch what
the heatmap shows, hostile text stays text, and a screenshot is saved.

Needs Debian's `chromium` (`apt-get install chromium`) and the `playwright` package (the
`dev` extra); Playwright never downloads a browser here, it drives the system one. Skips
with the reason when either is missing. Marked slow: not part of `make test`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from helpers import compose_config

from seq2seq.cli import translate
from seq2seq.runs.assemble import train_and_test
from seq2seq.visualise.fonts import FontNotFoundError, cjk_font_path

pytestmark = pytest.mark.slow

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')"
)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("no chromium on PATH (apt-get install chromium)", allow_module_level=True)

TOY_TRANSFORMER = [
    "data=toy_reverse", "data.source.train_size=256", "data.source.valid_size=8",
    "data.source.test_size=8", "data.max_tokens=512", "encoder=transformer",
    "decoder=transformer", "attention=multihead", "encoder.hidden_size=16",
    "decoder.hidden_size=16", "model.embed_dim=16", "encoder.num_layers=2",
    "decoder.num_layers=2", "encoder.heads=2", "decoder.heads=2", "attention.heads=2",
    "encoder.ff_size=32", "decoder.ff_size=32", "trainer.max_steps=3", "trainer.valid_every=3",
    "trainer.threads=1", "trainer.test_search.beam_size=1", "logging.progress_bar=false",
    "logging.tensorboard=false",
]  # fmt: skip
HOSTILE = 'a b </script><img src=x onerror="document.title=1"> 我'


@pytest.fixture(scope="module")
def page_file(tmp_path_factory) -> Path:
    """A viewer page of a toy Transformer (2 layers, 2 heads) for two sentences."""
    root = tmp_path_factory.mktemp("viewer_browser")
    train_and_test(compose_config(TOY_TRANSFORMER + [f"data.root={root / 'data'}"]), root / "run")
    page = root / "viewer.html"
    checkpoint = str(root / "run" / "checkpoints" / "best.pt")
    assert translate.main([checkpoint, "a b c d e", HOSTILE, "--html", str(page)]) == 0
    return page


def embedded_data(page: Path) -> dict:
    """The JSON blob of the page, read with Python (not by the page's own script)."""
    match = re.search(r'<script type="application/json" id="attention-data">(.*?)</script>',
                      page.read_text(encoding="utf-8"), re.S)  # fmt: skip
    return json.loads(match.group(1))


def font_environment(folder: Path) -> dict[str, str]:
    """Chromium's environment with the project's bundled CJK font added to fontconfig, so
    Chinese pieces render on a machine without a system CJK font."""
    env = dict(os.environ)
    try:
        font_folder = cjk_font_path().parent
    except FontNotFoundError:
        return env
    config = folder / "fonts.conf"
    config.write_text(
        '<?xml version="1.0"?><fontconfig>'
        '<include ignore_missing="yes">/etc/fonts/fonts.conf</include>'
        f"<dir>{font_folder}</dir><cachedir>{folder / 'font-cache'}</cachedir></fontconfig>",
        encoding="utf-8",
    )
    env["FONTCONFIG_FILE"] = str(config)
    return env


@pytest.fixture(scope="module")
def browser_page(page_file, tmp_path_factory):
    """The page open in headless Chromium, with its console errors collected."""
    env = font_environment(tmp_path_factory.mktemp("fonts"))
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, env=env)
        page = browser.new_page(viewport={"width": 1100, "height": 800})
        errors: list[str] = []
        page.on("console", lambda message: message.type == "error" and errors.append(message.text))
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(page_file.as_uri())
        page.wait_for_selector("#heatmap td")
        yield page, errors
        browser.close()


def texts(page, selector: str) -> list[str]:
    return page.eval_on_selector_all(selector, "nodes => nodes.map(n => n.textContent)")


def cell_weights(page) -> list[str]:
    return page.eval_on_selector_all("#heatmap td", "cells => cells.map(c => c.dataset.weight)")


def click_button(page, group: str, label: str) -> None:
    page.locator(f"#{group} button", has_text=re.compile(f"^{re.escape(label)}$")).click()


def formatted(weights: list[float]) -> list[str]:
    return [f"{weight:.4f}" for weight in weights]


def test_page_loads_without_errors_and_shows_every_view(browser_page, page_file):
    page, errors = browser_page
    data = embedded_data(page_file)
    assert errors == []
    assert texts(page, "#views button") == [view["title"] for view in data["sentences"][0]["views"]]
    assert texts(page, "#layers button") == ["1", "2"]
    assert texts(page, "#heads button") == ["mean", "1", "2"]
    assert len(texts(page, "#sentence option")) == 2


def test_hovering_a_target_piece_shows_its_source_weights(browser_page, page_file):
    page, _ = browser_page
    cross = embedded_data(page_file)["sentences"][0]["views"][0]
    assert cross["name"] == "cross"
    page.hover('.piece[data-side="row"][data-index="1"]')  # the second output piece
    shown = texts(page, '.piece[data-side="column"] .weight')
    assert shown == formatted(cross["layers"][0]["mean"][1])
    page.hover('.piece[data-side="column"][data-index="0"]')  # the first source piece
    shown = texts(page, '.piece[data-side="row"] .weight')
    assert shown == formatted([row[0] for row in cross["layers"][0]["mean"]])
    page.hover('#heatmap td[data-row="2"][data-column="1"]')
    assert f"{cross['layers'][0]['mean'][2][1]:.4f}" in page.text_content("#readout")


def test_head_and_layer_buttons_change_the_heatmap(browser_page, page_file):
    page, errors = browser_page
    cross = embedded_data(page_file)["sentences"][0]["views"][0]
    flat = lambda matrix: formatted([w for row in matrix for w in row])  # noqa: E731
    assert cell_weights(page) == flat(cross["layers"][0]["mean"])
    click_button(page, "heads", "2")
    assert cell_weights(page) == flat(cross["layers"][0]["heads"][1])
    click_button(page, "layers", "2")
    assert cell_weights(page) == flat(cross["layers"][1]["heads"][1])
    assert cell_weights(page) != flat(cross["layers"][0]["mean"])
    page.hover('#heatmap th.row-label[data-index="0"]')
    shown = texts(page, '.piece[data-side="column"] .weight')
    assert shown == formatted(cross["layers"][1]["heads"][1][0])
    click_button(page, "heads", "mean")
    assert errors == []


def test_self_attention_views_and_the_sentence_selector(browser_page, page_file):
    page, errors = browser_page
    sentences = embedded_data(page_file)["sentences"]
    click_button(page, "views", "decoder self-attention")
    decoder = sentences[0]["views"][2]
    assert texts(page, "#heatmap th.column-label") == decoder["columns"]
    assert texts(page, "#heatmap th.column-label")[0] == "<s>"
    page.select_option("#sentence", index=1)
    assert HOSTILE in texts(page, "#texts span")
    assert texts(page, "#heatmap th.row-label") == sentences[1]["views"][2]["rows"]
    assert page.locator("img").count() == 0 and page.title() != "1"  # text, not markup
    assert errors == []


def test_screenshot(browser_page, tmp_path):
    page, errors = browser_page
    page.select_option("#sentence", index=0)
    click_button(page, "views", "cross-attention")
    page.hover('.piece[data-side="row"][data-index="0"]')
    path = tmp_path / "attention_viewer.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000
    assert errors == []
