"""The attention viewer page in a real browser (headless Chromium through Playwright): no
console errors, hovering shows the weights of the embedded data, the buttons switch what
the heatmap shows, hostile text stays text, and a screenshot is saved. Last, one layer
numbering: for a run whose AER hook chose a head, the training log, the service's `GET
/models`, the offline viewer and the served page (as rendered) name the same layer and head.

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
import torch
from chosen_head_run import chosen_head_run
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
    assert texts(page, "#layers button") == ["0", "1"]  # layers and heads from 0
    assert texts(page, "#heads button") == ["mean", "0", "1"]
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
    click_button(page, "heads", "1")
    assert cell_weights(page) == flat(cross["layers"][0]["heads"][1])
    click_button(page, "layers", "1")
    assert cell_weights(page) == flat(cross["layers"][1]["heads"][1])
    assert page.text_content("#note").startswith("cross-attention, layer 1, head 1. ")
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


# ---------------------------------------------------------------- one layer numbering


@pytest.fixture(scope="module")
def chosen_run(tmp_path_factory):
    """A run whose best.pt stores the head its AER hook chose, and its log lines."""
    return chosen_head_run(tmp_path_factory.mktemp("chosen_head"))


def shown_choice(page) -> dict:
    """What the rendered viewer says is selected and marked, as a person reads it."""
    pressed = '#layers button[aria-pressed="true"]'
    return {
        "layer": texts(page, pressed),
        "layer_name": page.get_attribute(pressed, "aria-label"),
        "head": texts(page, '#heads button[aria-pressed="true"]'),
        "marked_layers": texts(page, "#layers button[data-mark]"),
        "marked_heads": texts(page, "#heads button[data-mark]"),
        "note": page.text_content("#note").split(". ")[0],
        "marks": page.text_content("#marks").split(" (")[0],
    }


def test_the_log_the_api_and_both_pages_name_the_same_layer(chosen_run, browser_page, tmp_path):
    pytest.importorskip("fastapi", reason="fastapi is not installed (pip install '.[serve]')")
    pytest.importorskip("uvicorn", reason="uvicorn is not installed (pip install '.[serve]')")
    from seq2seq.serve.process import get_json, running_server

    checkpoint = chosen_run.checkpoint
    best_step = torch.load(checkpoint, weights_only=True)["progress"]["best_step"]
    (logged,) = [choice for choice in chosen_run.logged_choices() if choice.step == best_step]
    offline = tmp_path / "viewer.html"
    assert translate.main([str(checkpoint), "我爱中国。", "--html", str(offline)]) == 0
    shown, errors = [], []
    page = browser_page[0].context.browser.new_page(viewport={"width": 1100, "height": 800})
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(offline.as_uri())
    page.wait_for_selector("#heatmap td")
    shown.append(shown_choice(page))
    with running_server([str(checkpoint), "--threads", "1"]) as server:
        (model,) = get_json(server.url + "/models")["models"]
        page.goto(server.url + "/")
        page.fill("#source", "我爱中国。")
        page.click("#translate")
        page.wait_for_selector("#heatmap td")
        shown.append(shown_choice(page))
    page.close()
    assert (model["alignment"]["layer"], model["alignment"]["head"]) == (logged.layer, logged.head)
    head = "mean" if logged.head is None else str(logged.head)
    expected = {
        "layer": [str(logged.layer)], "layer_name": f"layer {logged.layer}", "head": [head],
        "marked_layers": [str(logged.layer)], "marked_heads": [head],
        "note": f"cross-attention, layer {logged.layer}, head {head}",
        "marks": f"Marked chosen: layer {logged.layer}, head {head}",
    }  # fmt: skip
    assert shown == [expected, expected]  # the offline viewer, then the served page
    assert errors == []
